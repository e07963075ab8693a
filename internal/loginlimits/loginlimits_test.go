package loginlimits_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/loginlimits"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/store/storetest"
	"github.com/guardian-sec/guardian/internal/tokens"
)

var (
	t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Hour)
	t2 = t0.Add(tokens.DefaultDeviceTTL - time.Second)
	t3 = t0.Add(tokens.DefaultDeviceTTL)
)

func testKey(tb testing.TB, b byte) secret.Key {
	tb.Helper()
	k, err := secret.New(bytes.Repeat([]byte{b}, secret.MinLen))
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// newPolicy returns a Policy and the Hasher and Devices behind it, all keyed
// from one signing key.
func newPolicy(tb testing.TB) (*loginlimits.Policy, *keys.Hasher, *tokens.Devices) {
	tb.Helper()
	k := testKey(tb, 1)
	h, d := keys.NewHasher(k), tokens.NewDevices(k, 0)
	return loginlimits.New(h, d, nil), h, d
}

// mustAccount resolves account and token at now, failing the test on error.
func mustAccount(tb testing.TB, p *loginlimits.Policy, account, token string, now time.Time) loginlimits.Account {
	tb.Helper()
	a, err := p.Account(account, token, now)
	if err != nil {
		tb.Fatalf("Account(%q): %v", account, err)
	}
	return a
}

// deviceToken is the token a success report of an attempt of account earns.
func deviceToken(tb testing.TB, p *loginlimits.Policy, account string, now time.Time) string {
	tb.Helper()
	a := mustAccount(tb, p, account, "", now)
	tok, err := p.DeviceToken(&tokens.Attempt{Account: a.Subject}, now)
	if err != nil || tok == "" {
		tb.Fatalf("DeviceToken = %q, %v; want a token", tok, err)
	}
	return tok
}

func TestAccountTrustsOnlyAValidTokenForItsAccount(t *testing.T) {
	p, h, _ := newPolicy(t)
	alice := h.Subject("account", "alice@example.com")
	aliceTok := deviceToken(t, p, "alice@example.com", t0)
	bobTok := deviceToken(t, p, "bob@example.com", t0)
	forged, _, err := tokens.NewDevices(testKey(t, 2), 0).Issue(alice, t0)
	if err != nil {
		t.Fatal(err)
	}
	serviceTok, err := tokens.NewService(testKey(t, 1)).Issue(tokens.ScopeAdmin, "x", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		account     string
		token       string
		now         time.Time
		wantTrusted bool
	}{
		{"no token", "alice@example.com", "", t1, false},
		{"its own token", "alice@example.com", aliceTok, t1, true},
		{"its own token, other spelling", " ALICE@Example.com", aliceTok, t1, true},
		{"its own token, last second", "alice@example.com", aliceTok, t2, true},
		{"expired", "alice@example.com", aliceTok, t3, false},
		{"another account's token", "alice@example.com", bobTok, t1, false},
		{"signed with another key", "alice@example.com", forged, t1, false},
		{"a service token", "alice@example.com", serviceTok, t1, false},
		{"garbage", "alice@example.com", "not.a.token", t1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := mustAccount(t, p, tt.account, tt.token, tt.now)
			if a.Subject != alice {
				t.Fatalf("Subject = %q, want alice's %q", a.Subject, alice)
			}
			if got := a.Trusted(); got != tt.wantTrusted {
				t.Fatalf("Trusted() = %v, want %v", got, tt.wantTrusted)
			}
			want := alice // untrusted: the account's shared bucket
			if tt.wantTrusted {
				want = h.Subject("device", alice, a.Device)
			}
			if got := a.Bucket(); got != want {
				t.Fatalf("Bucket() = %q, want %q", got, want)
			}
			if !tt.wantTrusted && a.Device != "" {
				t.Fatalf("Device = %q on an untrusted check", a.Device)
			}
		})
	}
}

func TestEachDeviceHasItsOwnBucket(t *testing.T) {
	p, _, _ := newPolicy(t)
	first := deviceToken(t, p, "alice", t0)
	second := deviceToken(t, p, "alice", t0)
	a1 := mustAccount(t, p, "alice", first, t1)
	again := mustAccount(t, p, "alice", first, t1.Add(time.Hour))
	a2 := mustAccount(t, p, "alice", second, t1)
	if a1.Bucket() != again.Bucket() {
		t.Errorf("one device, two buckets: %q and %q", a1.Bucket(), again.Bucket())
	}
	if a1.Bucket() == a2.Bucket() || a1.Device == a2.Device {
		t.Errorf("two devices share bucket %q (devices %q, %q)", a1.Bucket(), a1.Device, a2.Device)
	}
}

func TestAccountWithoutAccount(t *testing.T) {
	p, _, _ := newPolicy(t)
	tok := deviceToken(t, p, "alice", t0)
	a := mustAccount(t, p, "", tok, t1)
	if a != (loginlimits.Account{}) || a.Trusted() || a.Bucket() != "" {
		t.Fatalf("Account(\"\") = %+v, want the zero Account", a)
	}
	if got := p.AccountIP(&a, netip.MustParseAddr("192.0.2.1")); got != "" {
		t.Fatalf("AccountIP without an account = %q, want \"\"", got)
	}
	if tok, err := p.DeviceToken(&tokens.Attempt{}, t1); tok != "" || err != nil {
		t.Fatalf("DeviceToken without an account = %q, %v; want \"\", nil", tok, err)
	}
}

func TestInvalidAccount(t *testing.T) {
	p, _, _ := newPolicy(t)
	for _, in := range []string{"   ", "a\x00b", string(bytes.Repeat([]byte("x"), 300))} {
		if _, err := p.Account(in, "", t0); !errors.Is(err, keys.ErrInvalidAccount) {
			t.Errorf("Account(%.10q…) err = %v, want keys.ErrInvalidAccount", in, err)
		}
		if _, err := p.Subject(in); !errors.Is(err, keys.ErrInvalidAccount) {
			t.Errorf("Subject(%.10q…) err = %v, want keys.ErrInvalidAccount", in, err)
		}
	}
}

func TestSubjectIsTheAccountsSubject(t *testing.T) {
	p, _, _ := newPolicy(t)
	got, err := p.Subject("ALICE ")
	if err != nil {
		t.Fatal(err)
	}
	if want := mustAccount(t, p, "alice", "", t0).Subject; got != want {
		t.Fatalf("Subject = %q, want %q", got, want)
	}
}

func TestAccountIP(t *testing.T) {
	p, _, _ := newPolicy(t)
	tok := deviceToken(t, p, "alice", t0)
	alice := mustAccount(t, p, "alice", "", t1)
	trusted := mustAccount(t, p, "alice", tok, t1)
	bob := mustAccount(t, p, "bob", "", t1)
	ip := netip.MustParseAddr
	base := p.AccountIP(&alice, ip("2001:db8:1:2::1"))
	tests := []struct {
		name     string
		account  *loginlimits.Account
		ip       netip.Addr
		wantSame bool
	}{
		{"same /64", &alice, ip("2001:db8:1:2:ffff:ffff:ffff:ffff"), true},
		{"trusted device, same /64", &trusted, ip("2001:db8:1:2::9"), true},
		{"another /64", &alice, ip("2001:db8:1:3::1"), false},
		{"another account", &bob, ip("2001:db8:1:2::1"), false},
	}
	for _, tt := range tests {
		if got := p.AccountIP(tt.account, tt.ip) == base; got != tt.wantSame {
			t.Errorf("%s: same pair = %v, want %v", tt.name, got, tt.wantSame)
		}
	}
	v4 := p.AccountIP(&alice, ip("192.0.2.1"))
	if v4 == p.AccountIP(&alice, ip("192.0.2.2")) {
		t.Error("two IPv4 addresses share a pair: IPv4 counts per address")
	}
	if v4 != p.AccountIP(&alice, ip("::ffff:192.0.2.1").Unmap()) {
		t.Error("an IPv4-mapped address is another pair")
	}
}

func TestDeviceTokenIsBoundToTheAccount(t *testing.T) {
	p, _, d := newPolicy(t)
	a := mustAccount(t, p, "alice", "", t0)
	tok, err := p.DeviceToken(&tokens.Attempt{Account: a.Subject, Flow: "login"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Verify(tok, a.Subject, t1); err != nil {
		t.Fatalf("the token does not verify for its account: %v", err)
	}
	if got := mustAccount(t, p, "alice", tok, t1); !got.Trusted() {
		t.Fatal("the account does not trust its own new device")
	}
}

// rule returns the rule called name from the built-in set.
func rule(tb testing.TB, name string) *rules.Rule {
	tb.Helper()
	r, ok := rules.Default().Rule(name)
	if !ok {
		tb.Fatalf("no built-in rule %s", name)
	}
	return r
}

func TestReservations(t *testing.T) {
	account, ip, stop, send := rule(t, "login-account"), rule(t, "login-ip"), rule(t, "login-hard-stop"), rule(t, "otp-send-recipient")
	ops := []store.Op{
		{Key: "k-account", Kind: store.Rate, Cost: 3, Interval: time.Minute, Burst: 5},
		{Key: "k-ip", Kind: store.Rate, Cost: 3, Interval: 20 * time.Second, Burst: 30},
		{Key: "k-stop", Kind: store.Counter, Cost: 1, Limit: 100, Hold: time.Hour},
		{Key: "k-send", Kind: store.Rate, Cost: 3, Interval: 5 * time.Minute, Burst: 3},
	}
	rs := []*rules.Rule{account, ip, stop, send}
	spent := store.Result{Allowed: true, Spent: true}
	fits := store.Result{Allowed: true}
	denied := store.Result{}
	tests := []struct {
		name string
		res  []store.Result
		want []tokens.Refund
	}{
		{
			name: "all spent",
			res:  []store.Result{spent, spent, spent, spent},
			want: []tokens.Refund{
				{Key: "k-account", Amount: 3 * time.Minute},
				{Key: "k-ip", Amount: time.Minute},
				{Key: "k-stop", Counter: true},
			},
		},
		{
			name: "a challenged check spent what fitted",
			res:  []store.Result{spent, fits, spent, spent},
			want: []tokens.Refund{{Key: "k-account", Amount: 3 * time.Minute}, {Key: "k-stop", Counter: true}},
		},
		{
			name: "nothing spent",
			res:  []store.Result{fits, denied, fits, denied},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := loginlimits.Reservations(nil, rs, ops, tt.res)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Reservations = %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("appends to dst", func(t *testing.T) {
		dst := []tokens.Refund{{Key: "before"}}
		got := loginlimits.Reservations(dst, rs[2:3], ops[2:3], []store.Result{spent})
		want := []tokens.Refund{{Key: "before"}, {Key: "k-stop", Counter: true}}
		if !slices.Equal(got, want) {
			t.Fatalf("Reservations = %+v, want %+v", got, want)
		}
	})
}

func TestRefunds(t *testing.T) {
	tests := []struct {
		name string
		at   tokens.Attempt
		want []store.Refund
	}{
		{"nothing reserved", tokens.Attempt{}, nil},
		{
			name: "primary",
			at:   tokens.Attempt{Refunds: []tokens.Refund{{Key: "a", Amount: time.Minute}, {Key: "b", Counter: true}}},
			want: []store.Refund{{Key: "a", Kind: store.Rate, Amount: time.Minute}, {Key: "b", Kind: store.Counter}},
		},
		{
			name: "fallback",
			at:   tokens.Attempt{Fallback: true, Refunds: []tokens.Refund{{Key: "a", Amount: time.Second}}},
			want: []store.Refund{{Key: "a", Kind: store.Rate, Amount: time.Second, Local: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loginlimits.Refunds(&tt.at); !slices.Equal(got, tt.want) {
				t.Fatalf("Refunds = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestSuccessGivesBackOnlyItsOwnReservation plays a check's reservation and
// its success against the embedded store while an attacker's failures sit on
// the same keys.
func TestSuccessGivesBackOnlyItsOwnReservation(t *testing.T) {
	clock := storetest.NewClock(t0)
	st := memstore.New(memstore.Config{Now: clock.Now})
	ctx := context.Background()
	rs := []*rules.Rule{rule(t, "login-account"), rule(t, "login-hard-stop")}
	ops := []store.Op{
		{Key: "acct", Kind: store.Rate, Cost: 1, Interval: time.Minute, Burst: 5},
		{Key: "stop", Kind: store.Counter, Cost: 1, Limit: 100, Hold: 90 * 24 * time.Hour},
	}
	res := make([]store.Result, len(ops))
	for range 3 { // the attacker's failures
		if err := st.Do(ctx, ops, res); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Do(ctx, ops, res); err != nil { // the user's check
		t.Fatal(err)
	}
	if got, want := res[0].Remaining, int64(1); got != want {
		t.Fatalf("remaining after 4 checks = %d, want %d", got, want)
	}
	at := tokens.Attempt{Refunds: loginlimits.Reservations(nil, rs, ops, res)}
	if err := st.Refund(ctx, loginlimits.Refunds(&at)); err != nil {
		t.Fatal(err)
	}
	if err := st.Peek(ctx, ops, res); err != nil {
		t.Fatal(err)
	}
	if got, want := res[0].Remaining, int64(2); got != want {
		t.Errorf("remaining after the success = %d, want %d: the attacker's 3 failures stay spent", got, want)
	}
	if got := res[1].Count; got != 0 {
		t.Errorf("consecutive failures after the success = %d, want 0", got)
	}
}

func TestReadStatus(t *testing.T) {
	rate := rule(t, "login-account")
	stop := rule(t, "login-hard-stop")
	slowStop := *stop
	slowStop.Action = rules.Slow
	challenge := *rate
	challenge.Action = rules.Challenge
	tests := []struct {
		name string
		rs   []*rules.Rule
		res  []store.Result
		want loginlimits.Status
	}{
		{
			name: "never seen",
			rs:   []*rules.Rule{rate, stop},
			res:  []store.Result{{Allowed: true, Remaining: 5}, {Allowed: true, Remaining: 100}},
			want: loginlimits.Status{},
		},
		{
			name: "slowed, 7 in a row",
			rs:   []*rules.Rule{rate, stop},
			res:  []store.Result{{RetryAfter: 41 * time.Second}, {Allowed: true, Count: 7}},
			want: loginlimits.Status{ConsecutiveFailures: 7, NextAllowed: 41 * time.Second},
		},
		{
			name: "at the hard stop",
			rs:   []*rules.Rule{rate, stop},
			res:  []store.Result{{RetryAfter: time.Minute}, {Count: 100, ResetAfter: time.Hour}},
			want: loginlimits.Status{ConsecutiveFailures: 100, Blocked: true, NextAllowed: time.Minute},
		},
		{
			name: "a slowing count waits until it is forgotten",
			rs:   []*rules.Rule{rate, &slowStop},
			res:  []store.Result{{Allowed: true}, {Count: 100, ResetAfter: time.Hour}},
			want: loginlimits.Status{ConsecutiveFailures: 100, NextAllowed: time.Hour},
		},
		{
			name: "a challenge does not hold a check back",
			rs:   []*rules.Rule{&challenge},
			res:  []store.Result{{RetryAfter: time.Minute}},
			want: loginlimits.Status{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := loginlimits.ReadStatus(tt.rs, tt.res); got != tt.want {
				t.Fatalf("ReadStatus = %+v, want %+v", got, tt.want)
			}
		})
	}
}

const statusRules = `version: 1
rules:
  - name: per-account
    flows: [login, password_reset]
    key: account
    type: rate
    limit: 1
    per: 1m
  - name: per-ip
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1m
  - name: hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 100
  - name: per-account-next
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1s
    mode: shadow
  - name: per-pair
    flows: [login]
    key: account+ip
    type: rate
    limit: 1
    per: 1m
  - name: stuffing
    flows: [login]
    key: global
    type: failure_rate
    limit: 10
    per: 1m
`

func TestStatusRulesAndResetKeys(t *testing.T) {
	set, err := rules.Parse("rules.yaml", []byte(statusRules), t0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range loginlimits.StatusRules(set) {
		got = append(got, r.Name)
	}
	if want := []string{"per-account", "hard-stop"}; !slices.Equal(got, want) {
		t.Errorf("StatusRules = %v, want %v", got, want)
	}
	const subject = "AbCdEfGhIjKlMnOpQrStUv"
	got = loginlimits.ResetKeys(set, subject)
	want := []string{
		keys.StoreKey(subject, "per-account"),
		keys.StoreKey(subject, "hard-stop"),
		keys.StoreKey(subject, "per-account-next"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("ResetKeys = %v, want %v", got, want)
	}
}

func TestStatusRulesOfTheBuiltInRules(t *testing.T) {
	var got []string
	for _, r := range loginlimits.StatusRules(rules.Default()) {
		got = append(got, r.Name)
	}
	if want := []string{"login-account", "login-hard-stop"}; !slices.Equal(got, want) {
		t.Fatalf("StatusRules(built-in) = %v, want %v", got, want)
	}
}
