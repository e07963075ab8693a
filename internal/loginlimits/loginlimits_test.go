package loginlimits_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/loginlimits"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
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
	return loginlimits.New(h, d), h, d
}

// subject is the subject of account, as the engine hashes it.
func subject(tb testing.TB, h *keys.Hasher, account string) string {
	tb.Helper()
	norm, err := keys.Account(account)
	if err != nil {
		tb.Fatalf("keys.Account(%q): %v", account, err)
	}
	return h.KeySubject(keys.Key{Kind: "account", ID: norm})
}

// deviceToken is the token a success report of an attempt of account earns.
func deviceToken(tb testing.TB, p *loginlimits.Policy, h *keys.Hasher, account string, now time.Time) string {
	tb.Helper()
	tok, err := p.DeviceToken(&tokens.Attempt{Account: subject(tb, h, account)}, now)
	if err != nil || tok == "" {
		tb.Fatalf("DeviceToken = %q, %v; want a token", tok, err)
	}
	return tok
}

func TestTrustOnlyAValidTokenForItsAccount(t *testing.T) {
	p, h, _ := newPolicy(t)
	alice := h.Subject("account", "alice@example.com")
	aliceTok := deviceToken(t, p, h, "alice@example.com", t0)
	bobTok := deviceToken(t, p, h, "bob@example.com", t0)
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
			sub := subject(t, h, tt.account)
			if sub != alice {
				t.Fatalf("subject = %q, want alice's %q", sub, alice)
			}
			dev, bucket := p.Trust(sub, tt.token, tt.now)
			if got := dev != ""; got != tt.wantTrusted {
				t.Fatalf("trusted = %v, want %v", got, tt.wantTrusted)
			}
			want := "" // untrusted: the account's shared bucket
			if tt.wantTrusted {
				want = h.Subject("device", alice, dev)
			}
			if bucket != want {
				t.Fatalf("bucket = %q, want %q", bucket, want)
			}
		})
	}
}

func TestEachDeviceHasItsOwnBucket(t *testing.T) {
	p, h, _ := newPolicy(t)
	first := deviceToken(t, p, h, "alice", t0)
	second := deviceToken(t, p, h, "alice", t0)
	alice := subject(t, h, "alice")
	d1, b1 := p.Trust(alice, first, t1)
	_, again := p.Trust(alice, first, t1.Add(time.Hour))
	d2, b2 := p.Trust(alice, second, t1)
	if b1 != again {
		t.Errorf("one device, two buckets: %q and %q", b1, again)
	}
	if b1 == b2 || d1 == d2 {
		t.Errorf("two devices share bucket %q (devices %q, %q)", b1, d1, d2)
	}
}

func TestTrustWithoutAccount(t *testing.T) {
	p, h, _ := newPolicy(t)
	tok := deviceToken(t, p, h, "alice", t0)
	if dev, bucket := p.Trust("", tok, t1); dev != "" || bucket != "" {
		t.Fatalf("Trust without an account = %q, %q; want untrusted", dev, bucket)
	}
	if tok, err := p.DeviceToken(&tokens.Attempt{}, t1); tok != "" || err != nil {
		t.Fatalf("DeviceToken without an account = %q, %v; want \"\", nil", tok, err)
	}
}

func TestDeviceTokenIsBoundToTheAccount(t *testing.T) {
	p, h, d := newPolicy(t)
	alice := subject(t, h, "alice")
	tok, err := p.DeviceToken(&tokens.Attempt{Account: alice, Flow: "login"}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Verify(tok, alice, t1); err != nil {
		t.Fatalf("the token does not verify for its account: %v", err)
	}
	if dev, _ := p.Trust(alice, tok, t1); dev == "" {
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
		{Key: "k-account", Cost: 3, Limit: store.Rate{Interval: time.Minute, Burst: 5}},
		{Key: "k-ip", Cost: 3, Limit: store.Rate{Interval: 20 * time.Second, Burst: 30}},
		{Key: "k-stop", Cost: 1, Limit: store.Counter{Max: 100, Hold: time.Hour}},
		{Key: "k-send", Cost: 3, Limit: store.Rate{Interval: 5 * time.Minute, Burst: 3}},
	}
	rs := []*rules.Rule{account, ip, stop, send}
	spent := store.Result{Allowed: true, Spent: true}
	fits := store.Result{Allowed: true}
	denied := store.Result{}
	tests := []struct {
		name string
		res  []store.Result
		want []store.Settlement
	}{
		{
			name: "all spent",
			res:  []store.Result{spent, spent, spent, spent},
			want: []store.Settlement{
				{Key: "k-account", Action: store.GiveBack, Span: 3 * time.Minute},
				{Key: "k-ip", Action: store.GiveBack, Span: time.Minute},
				{Key: "k-stop", Action: store.Reset},
			},
		},
		{
			name: "a challenged check spent what fitted",
			res:  []store.Result{spent, fits, spent, spent},
			want: []store.Settlement{{Key: "k-account", Action: store.GiveBack, Span: 3 * time.Minute}, {Key: "k-stop", Action: store.Reset}},
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
		dst := []store.Settlement{{Key: "before"}}
		got := loginlimits.Reservations(dst, rs[2:3], ops[2:3], []store.Result{spent})
		want := []store.Settlement{{Key: "before"}, {Key: "k-stop", Action: store.Reset}}
		if !slices.Equal(got, want) {
			t.Fatalf("Reservations = %+v, want %+v", got, want)
		}
	})
}

// TestSuccessGivesBackOnlyItsOwnReservation plays a check's reservation and
// its success against the embedded store while an attacker's failures sit on
// the same keys.
func TestSuccessGivesBackOnlyItsOwnReservation(t *testing.T) {
	clock := testclock.New(t0)
	st := memstore.New(memstore.Config{Now: clock.Now})
	ctx := context.Background()
	rs := []*rules.Rule{rule(t, "login-account"), rule(t, "login-hard-stop")}
	ops := []store.Op{
		{Key: "acct", Cost: 1, Limit: store.Rate{Interval: time.Minute, Burst: 5}},
		{Key: "stop", Cost: 1, Limit: store.Counter{Max: 100, Hold: 90 * 24 * time.Hour}},
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
	if err := st.Settle(ctx, loginlimits.Reservations(nil, rs, ops, res)); err != nil {
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
		keys.StoreKey(subject, "per-account:challenged"),
		keys.StoreKey(subject, "hard-stop"),
		keys.StoreKey(subject, "per-account-next"),
		keys.StoreKey(subject, "per-account-next:challenged"),
		keys.StoreKey(subject, "familiar"),
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
	if want := []string{"login-account", "password-reset-account", "login-hard-stop"}; !slices.Equal(got, want) {
		t.Fatalf("StatusRules(built-in) = %v, want %v", got, want)
	}
}
