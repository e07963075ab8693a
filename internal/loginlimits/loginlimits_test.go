package loginlimits_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/loginlimits"
	"github.com/guardian-sec/guardian/internal/plan"
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

// entry returns the plan entry of built-in rule name on subject, spending
// cost, as the engine builds it, with its settlements.
func entry(tb testing.TB, name, subject string, cost int64) plan.Entry {
	tb.Helper()
	r := rule(tb, name)
	e := plan.Entry{Rule: r, Subject: subject, Bit: 0, Op: store.Op{Key: keys.StoreKey(subject, r.Name), Cost: 1}}
	switch r.Type {
	case rules.Rate:
		e.Op.Cost, e.Op.Limit = cost, store.Rate{Interval: r.Interval(), Burst: r.Burst}
	case rules.ConsecutiveFailures:
		e.Op.Limit = store.Counter{Max: r.Limit, Hold: r.Hold}
	}
	loginlimits.Settle(&e)
	return e
}

func TestSettle(t *testing.T) {
	tests := []struct {
		rule             string
		success, failure store.Settlement
	}{
		{"login-account", store.Settlement{Action: store.GiveBack, Span: 3 * time.Minute}, store.Settlement{}},
		{"login-ip", store.Settlement{Action: store.GiveBack, Span: time.Minute}, store.Settlement{}},
		{"login-hard-stop", store.Settlement{Action: store.Reset}, store.Settlement{Action: store.Confirm, Span: 90 * 24 * time.Hour, Max: 100}},
		{"otp-send-recipient", store.Settlement{}, store.Settlement{}},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			e := entry(t, tt.rule, "AbCdEfGhIjKlMnOpQrStUv", 3)
			if e.Success != tt.success || e.Failure != tt.failure {
				t.Fatalf("Settle: success %+v, failure %+v; want %+v, %+v", e.Success, e.Failure, tt.success, tt.failure)
			}
		})
	}
}

// TestSuccessGivesBackOnlyItsOwnReservation plays a check's reservation and
// its success against the embedded store while an attacker's failures sit on
// the same keys.
func TestSuccessGivesBackOnlyItsOwnReservation(t *testing.T) {
	clock := testclock.New(t0)
	st := memstore.New(memstore.Config{Now: clock.Now})
	ctx := context.Background()
	p := &plan.Plan{}
	p.Add(entry(t, "login-account", "acct", 1))
	hardStop := entry(t, "login-hard-stop", "acct", 1)
	hardStop.Bit = 1
	p.Add(hardStop)
	ops, res := p.Batch()
	for range 4 { // the attacker's 3 failures, then the user's check
		if err := st.Do(ctx, ops, res); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := res[0].Remaining, int64(1); got != want {
		t.Fatalf("remaining after 4 checks = %d, want %d", got, want)
	}
	if got, want := p.Spent(), uint64(0b11); got != want {
		t.Fatalf("Spent = %b, want %b", got, want)
	}
	if err := st.Settle(ctx, p.Settlements(true, p.Spent(), false)); err != nil {
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

func TestBucketsAdd(t *testing.T) {
	const account = "AbCdEfGhIjKlMnOpQrStUv"
	tests := []struct {
		name    string
		b       loginlimits.Buckets
		rule    string
		want    []string
		wantIfs []store.When
	}{
		{"shared", loginlimits.Buckets{Source: "srcA", Account: account}, "login-account",
			[]string{keys.StoreKey(account, "login-account")}, []store.When{store.Always}},
		{"challenged", loginlimits.Buckets{Source: "srcA", Account: account, Challenged: true}, "login-account",
			[]string{loginlimits.ChallengedKey(account, "login-account")}, []store.When{store.Always}},
		{"challenged count", loginlimits.Buckets{Source: "srcA", Account: account, Challenged: true}, "login-hard-stop",
			[]string{keys.StoreKey(account, "login-hard-stop")}, []store.When{store.Always}},
		{"familiar", loginlimits.Buckets{Source: "srcA", Account: account, Member: "netA"}, "login-hard-stop",
			[]string{loginlimits.FamiliarKey(account), keys.StoreKey(account, "login-hard-stop"), loginlimits.NetworkKey(account, "login-hard-stop", "netA")},
			[]store.When{store.Always, store.IfUnfamiliar, store.IfFamiliar}},
		{"challenged and familiar", loginlimits.Buckets{Source: "srcA", Account: account, Challenged: true, Member: "netA"}, "login-account",
			[]string{loginlimits.FamiliarKey(account), loginlimits.ChallengedKey(account, "login-account"), loginlimits.NetworkKey(account, "login-account", "netA")},
			[]store.When{store.Always, store.IfUnfamiliar, store.IfFamiliar}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &plan.Plan{}
			tt.b.Add(p, entry(t, tt.rule, account, 1))
			var got []string
			var ifs []store.When
			for _, e := range p.Entries() {
				got, ifs = append(got, e.Op.Key), append(ifs, e.Op.When)
			}
			if !slices.Equal(got, tt.want) || !slices.Equal(ifs, tt.wantIfs) {
				t.Fatalf("keys %v when %v, want %v when %v", got, ifs, tt.want, tt.wantIfs)
			}
			// Every bucket of the rule settles alike, on its own key.
			for _, e := range p.Entries() {
				if e.Kind == plan.Familiar {
					continue
				}
				if e.Success.Action == 0 || e.Bit != 0 {
					t.Errorf("%s: success %+v, bit %d; want the rule's", e.Op.Key, e.Success, e.Bit)
				}
				// A count is attributed to the check's source, and a
				// success lifts that source's failures alone.
				lift := store.Settlement{Action: store.Lift, Member: "srcA"}
				if e.Rule.Type == rules.ConsecutiveFailures && (e.Op.Member != "srcA" || e.Success != lift) {
					t.Errorf("%s: member %q, success %+v; want attributed to srcA and lifting it", e.Op.Key, e.Op.Member, e.Success)
				}
			}
		})
	}
	// Without a source, a success lifts nothing.
	p := &plan.Plan{}
	loginlimits.Buckets{Account: account}.Add(p, entry(t, "login-hard-stop", account, 1))
	if e := p.Entries()[0]; e.Success != (store.Settlement{}) || e.Op.Member != "" {
		t.Errorf("no source: member %q, success %+v; want none", e.Op.Member, e.Success)
	}
	// A second rule reads the same familiar list.
	p = &plan.Plan{}
	b := loginlimits.Buckets{Source: "srcA", Account: account, Member: "netA"}
	b.Add(p, entry(t, "login-account", account, 1))
	b.Add(p, entry(t, "login-hard-stop", account, 1))
	if n := len(p.Entries()); n != 5 {
		t.Errorf("two rules under familiar networks: %d entries, want one list and two buckets each", n)
	}
}

func TestLearn(t *testing.T) {
	const account = "AbCdEfGhIjKlMnOpQrStUv"
	p := &plan.Plan{}
	loginlimits.Learn(p, rules.Default(), rules.Login, account, "netA")
	var got []store.Settlement
	for _, e := range p.Entries() {
		if e.HasOp() || e.Kind != plan.Learning {
			t.Errorf("entry %+v: want a lesson without an op", e)
		}
		got = append(got, e.Success)
	}
	// The network joins the list and nothing is reset: its bucket keeps
	// what others on it failed, learned again or not.
	want := []store.Settlement{
		{Key: loginlimits.FamiliarKey(account), Action: store.Learn, Member: "netA", Span: 90 * 24 * time.Hour},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Learn: %+v, want %+v", got, want)
	}
	for _, familiar := range []bool{false, true} {
		if s := p.Settlements(true, 0, familiar); !slices.Equal(s, want) {
			t.Errorf("a success settles %+v, want %+v", s, want)
		}
	}
	if s := p.Settlements(false, 0, false); len(s) != 0 {
		t.Errorf("a failure settles %+v, want nothing", s)
	}
	for _, tt := range []struct {
		name            string
		flow            rules.Flow
		account, member string
	}{
		{"otp_verify", rules.OTPVerify, account, "netA"},
		{"no network", rules.Login, account, ""},
		{"no account", rules.Login, "", "netA"},
	} {
		p := &plan.Plan{}
		loginlimits.Learn(p, rules.Default(), tt.flow, tt.account, tt.member)
		if n := len(p.Entries()); n != 0 {
			t.Errorf("%s: %d lessons, want none", tt.name, n)
		}
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
	got = loginlimits.ResetKeys(set, subject, []string{"netA", "netB"})
	want := []string{
		keys.StoreKey(subject, "per-account"),
		keys.StoreKey(subject, "per-account:challenged"),
		loginlimits.NetworkKey(subject, "per-account", "netA"),
		loginlimits.NetworkKey(subject, "per-account", "netB"),
		keys.StoreKey(subject, "hard-stop"),
		loginlimits.NetworkKey(subject, "hard-stop", "netA"),
		loginlimits.NetworkKey(subject, "hard-stop", "netB"),
		keys.StoreKey(subject, "per-account-next"),
		keys.StoreKey(subject, "per-account-next:challenged"),
		loginlimits.NetworkKey(subject, "per-account-next", "netA"),
		loginlimits.NetworkKey(subject, "per-account-next", "netB"),
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
