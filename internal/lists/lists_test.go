package lists

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
)

var t0 = time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)

// hasher is every test's Hasher.
var hasher = keys.NewHasher(secret.Generate())

// newList returns a List on st at clock.
func newList(tb testing.TB, st store.Lists, clock *testclock.Clock) *List {
	tb.Helper()
	return New(Config{Store: st, Rules: rules.Default, Hasher: hasher, Now: clock.Now})
}

// add adds spec, failing the test on an error.
func add(tb testing.TB, l *List, spec Spec) Entry {
	tb.Helper()
	e, err := l.Add(context.Background(), spec, "ops")
	if err != nil {
		tb.Fatalf("Add(%+v): %v", spec, err)
	}
	return e
}

func TestSpecRefused(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want error
	}{
		{"nothing", Spec{List: Deny, TTL: "1h"}, ErrMissing},
		{"allow without network", Spec{List: Allow, Exempt: []string{"login-ip"}}, ErrMissing},
		{"both", Spec{List: Deny, Network: "198.51.100.0/24", Account: "a@example.com", TTL: "1h"}, ErrInvalid},
		{"allow of an account", Spec{List: Allow, Account: "a@example.com", Exempt: []string{"login-ip"}}, ErrInvalid},
		{"bad network", Spec{List: Deny, Network: "198.51.100.7/24", TTL: "1h"}, ErrInvalid},
		{"bad account", Spec{List: Deny, Account: "   ", TTL: "1h"}, ErrInvalid},
		{"deny without ttl", Spec{List: Deny, Network: "198.51.100.0/24"}, ErrMissing},
		{"bad ttl", Spec{List: Deny, Network: "198.51.100.0/24", TTL: "soon"}, ErrInvalid},
		{"zero ttl", Spec{List: Deny, Network: "198.51.100.0/24", TTL: "0s"}, ErrInvalid},
		{"ttl past a year", Spec{List: Deny, Network: "198.51.100.0/24", TTL: "366d"}, ErrInvalid},
		{"deny with exempt", Spec{List: Deny, Network: "198.51.100.0/24", TTL: "1h", Exempt: []string{"login-ip"}}, ErrInvalid},
		{"allow without exempt", Spec{List: Allow, Network: "198.51.100.0/24"}, ErrMissing},
		{"exempt from an account rule", Spec{List: Allow, Network: "198.51.100.0/24", Exempt: []string{"login-account"}}, rules.ErrNotExemptable},
		{"exempt from the hard stop", Spec{List: Allow, Network: "198.51.100.0/24", Exempt: []string{"login-ip", "login-hard-stop"}}, rules.ErrNotExemptable},
		{"exempt from a recipient rule", Spec{List: Allow, Network: "198.51.100.0/24", Exempt: []string{"otp-send-recipient"}}, rules.ErrNotExemptable},
		{"exempt from a secret rule", Spec{List: Allow, Network: "198.51.100.0/24", Exempt: []string{"login-secret-spray"}}, rules.ErrNotExemptable},
		{"exempt from an unknown rule", Spec{List: Allow, Network: "198.51.100.0/24", Exempt: []string{"login-ipp"}}, rules.ErrUnknownRule},
		{"long reason", Spec{List: Deny, Network: "198.51.100.0/24", TTL: "1h", Reason: string(make([]byte, 257))}, ErrInvalid},
	}
	clock := testclock.New(t0)
	l := newList(t, memstore.New(memstore.Config{Now: clock.Now}), clock)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.Add(context.Background(), tt.spec, "ops")
			if !errors.Is(err, tt.want) {
				t.Fatalf("Add = %v, want %v", err, tt.want)
			}
			if want := ErrInvalid; errors.Is(tt.want, rules.ErrNotExemptable) || errors.Is(tt.want, rules.ErrUnknownRule) {
				if !errors.Is(err, want) {
					t.Errorf("Add = %v, want it to wrap %v too", err, want)
				}
			}
		})
	}
	if deny, allow := l.Entries(context.Background(), t0); len(deny)+len(allow) != 0 {
		t.Errorf("entries after refusals = %v %v, want none", deny, allow)
	}
}

func TestMatch(t *testing.T) {
	clock := testclock.New(t0)
	l := newList(t, memstore.New(memstore.Config{Now: clock.Now}), clock)
	add(t, l, Spec{List: Deny, Network: "198.51.100.0/24", TTL: "1h", Reason: "stuffing"})
	add(t, l, Spec{List: Deny, Network: "198.51.100.9", TTL: "2h"})
	add(t, l, Spec{List: Deny, Network: "2001:db8:bad::/48", TTL: "30m"})
	add(t, l, Spec{List: Deny, Account: "Victim@Example.com", TTL: "10m"})
	add(t, l, Spec{List: Allow, Network: "203.0.113.0/24", Exempt: []string{"login-ip-distinct-accounts"}})
	add(t, l, Spec{List: Allow, Network: "203.0.0.0/8", Exempt: []string{"login-ip", "login-ip-distinct-accounts"}, TTL: "1h"})
	add(t, l, Spec{List: Allow, Network: "2001:db8:0ff1::/48", Exempt: []string{"login-ip6-48"}})
	norm := func(a string) string {
		n, err := (*keys.Normalizer)(nil).Account(a)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	tests := []struct {
		at      time.Duration
		ip      string
		account string
		want    Match
	}{
		{0, "198.51.100.1", "", Match{Denied: true, RetryAfter: time.Hour}},
		{0, "198.51.100.9", "", Match{Denied: true, RetryAfter: 2 * time.Hour}},
		{0, "198.51.101.1", "", Match{}},
		{0, "::ffff:198.51.100.1", "", Match{Denied: true, RetryAfter: time.Hour}},
		{0, "2002:c633:6401::1", "", Match{Denied: true, RetryAfter: time.Hour}},                    // 6to4 of 198.51.100.1
		{0, "64:ff9b::c633:6401", "", Match{Denied: true, RetryAfter: time.Hour}},                   // NAT64 of 198.51.100.1
		{0, "2001:0:4136:e378:8000:63bf:39cc:9bfe", "", Match{Denied: true, RetryAfter: time.Hour}}, // Teredo client 198.51.100.1
		{0, "2001:db8:bad:1::1", "", Match{Denied: true, RetryAfter: 30 * time.Minute}},
		{0, "2001:db8:bae::1", "", Match{}},
		{0, "192.0.2.1", norm("victim@example.com"), Match{Denied: true, RetryAfter: 10 * time.Minute}},
		{0, "", norm("victim@example.com"), Match{Denied: true, RetryAfter: 10 * time.Minute}},
		{0, "192.0.2.1", norm("other@example.com"), Match{}},
		{0, "203.0.113.5", "", Match{Exempt: []string{"login-ip-distinct-accounts", "login-ip"}}},
		{0, "203.1.1.1", "", Match{Exempt: []string{"login-ip", "login-ip-distinct-accounts"}}},
		{0, "2001:db8:ff1:2::1", "", Match{Exempt: []string{"login-ip6-48"}}},
		{time.Hour, "198.51.100.1", "", Match{}},
		{time.Hour, "198.51.100.9", "", Match{Denied: true, RetryAfter: time.Hour}},
		{time.Hour, "203.0.113.5", "", Match{Exempt: []string{"login-ip-distinct-accounts"}}},
		{time.Hour, "203.1.1.1", "", Match{}},
	}
	for _, tt := range tests {
		var ip netip.Addr
		if tt.ip != "" {
			ip = netip.MustParseAddr(tt.ip)
		}
		got := l.Match(context.Background(), ip, tt.account, t0.Add(tt.at))
		exempt := slices.Sorted(slices.Values(got.Exempt))
		if got.Denied != tt.want.Denied || got.RetryAfter != tt.want.RetryAfter || !slices.Equal(exempt, slices.Sorted(slices.Values(tt.want.Exempt))) {
			t.Errorf("at t0+%v Match(%s, %q) = %+v, want %+v", tt.at, tt.ip, tt.account, got, tt.want)
		}
	}
}

// TestFleet: two instances sharing one store, a third started later (a
// restart), and an instance whose store stops answering.
func TestFleet(t *testing.T) {
	clock := testclock.New(t0)
	st := &flaky{Lists: memstore.New(memstore.Config{Now: clock.Now})}
	a, b := newList(t, st, clock), newList(t, st, clock)
	ip := netip.MustParseAddr("198.51.100.1")
	e := add(t, a, Spec{List: Deny, Network: "198.51.100.0/24", TTL: "1h"})
	if !a.Match(context.Background(), ip, "", t0).Denied {
		t.Fatal("the instance that added an entry does not apply it at once")
	}
	if b.Match(context.Background(), ip, "", t0).Denied {
		t.Fatal("the other instance applies the entry before its round")
	}
	b.Ride(context.Background(), false)
	if !b.Match(context.Background(), ip, "", t0).Denied {
		t.Fatal("the other instance does not apply the entry after its round")
	}
	restarted := newList(t, st, clock)
	restarted.Ride(context.Background(), false)
	if !restarted.Match(context.Background(), ip, "", t0).Denied {
		t.Fatal("an instance started later does not apply the entry")
	}

	st.fail = true
	if _, err := a.Add(context.Background(), Spec{List: Deny, Network: "192.0.2.0/24", TTL: "1h"}, "ops"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Add while the store fails = %v, want store.ErrUnavailable", err)
	}
	b.Ride(context.Background(), false)
	if !b.Match(context.Background(), ip, "", t0).Denied {
		t.Fatal("an instance whose store fails forgets the entries it read")
	}
	st.fail = false

	if _, err := a.Delete(context.Background(), e.ID); err != nil {
		t.Fatal(err)
	}
	b.Ride(context.Background(), false)
	if a.Match(context.Background(), ip, "", t0).Denied || b.Match(context.Background(), ip, "", t0).Denied {
		t.Fatal("a deleted entry still applies")
	}
	if _, err := a.Delete(context.Background(), e.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete = %v, want ErrNotFound", err)
	}
}

// flaky is a store.Lists that fails while fail is set.
type flaky struct {
	store.Lists
	fail bool
}

var errDown = errors.New("down")

func (f *flaky) ListPut(ctx context.Context, key string, e store.ListEntry, max int) error {
	if f.fail {
		return errDown
	}
	return f.Lists.ListPut(ctx, key, e, max)
}

func (f *flaky) ListLoad(ctx context.Context, key, version string) (store.ListSnapshot, bool, error) {
	if f.fail {
		return store.ListSnapshot{}, false, errDown
	}
	return f.Lists.ListLoad(ctx, key, version)
}

func TestBounded(t *testing.T) {
	clock := testclock.New(t0)
	l := New(Config{Store: memstore.New(memstore.Config{Now: clock.Now}), Rules: rules.Default, Hasher: hasher, Now: clock.Now, MaxEntries: 2})
	add(t, l, Spec{List: Deny, Network: "192.0.2.1", TTL: "1m"})
	add(t, l, Spec{List: Deny, Network: "192.0.2.2", TTL: "1h"})
	if _, err := l.Add(context.Background(), Spec{List: Deny, Network: "192.0.2.3", TTL: "1h"}, "ops"); !errors.Is(err, ErrFull) {
		t.Fatalf("Add beyond the bound = %v, want ErrFull", err)
	}
	clock.Advance(time.Minute)
	add(t, l, Spec{List: Deny, Network: "192.0.2.3", TTL: "1h"})
}

func TestStatic(t *testing.T) {
	set, err := rules.Parse("r.yaml", []byte(`version: 1
rules:
  - {name: login-ip, flows: [login], key: ip, type: rate, limit: 30, per: 10m}
lists:
  allow:
    - {network: 203.0.113.0/24, exempt: [login-ip], reason: office}
  deny:
    - {network: 198.51.100.0/24, reason: botnet}
`), t0)
	if err != nil {
		t.Fatal(err)
	}
	clock := testclock.New(t0)
	l := newList(t, memstore.New(memstore.Config{Now: clock.Now}), clock)
	l.SetStatic(set)
	deny, allow := l.Entries(context.Background(), t0)
	if len(deny) != 1 || deny[0].ID != "rules-deny-1" || deny[0].Source != "r.yaml" || !deny[0].ExpiresAt.IsZero() ||
		len(allow) != 1 || allow[0].ID != "rules-allow-1" || !slices.Equal(allow[0].Exempt, []string{"login-ip"}) {
		t.Fatalf("entries = %+v %+v", deny, allow)
	}
	if m := l.Match(context.Background(), netip.MustParseAddr("198.51.100.3"), "", t0); !m.Denied || m.RetryAfter != StaticRetry {
		t.Errorf("Match of a static deny = %+v, want denied for StaticRetry", m)
	}
	if _, err := l.Delete(context.Background(), "rules-deny-1"); !errors.Is(err, ErrStatic) {
		t.Errorf("Delete of a static entry = %v, want ErrStatic", err)
	}
	l.SetStatic(rules.Default())
	if deny, allow := l.Entries(context.Background(), t0); len(deny)+len(allow) != 0 {
		t.Errorf("entries after rules without lists = %v %v, want none", deny, allow)
	}
}

// TestNoAccountInStore: the store holds an account entry's pseudonym, never
// the account.
func TestNoAccountInStore(t *testing.T) {
	clock := testclock.New(t0)
	st := memstore.New(memstore.Config{Now: clock.Now})
	l := newList(t, st, clock)
	e := add(t, l, Spec{List: Deny, Account: "Victim@Example.com", TTL: "1h"})
	if e.Account != hasher.Pseudonym(keys.PseudonymAccount, "victim@example.com") {
		t.Fatalf("entry account = %q, want the pseudonym", e.Account)
	}
	snap, _, err := st.ListLoad(context.Background(), Key, "")
	if err != nil || len(snap.Entries) != 1 {
		t.Fatal(snap, err)
	}
	for _, bad := range []string{"victim", "Victim", "example"} {
		if strings.Contains(string(snap.Entries[0].Data), bad) {
			t.Errorf("the store holds %q: %s", bad, snap.Entries[0].Data)
		}
	}
}

// TestTenants: an account entry is its tenant's, matching, shown to and
// deleted by that tenant alone; network entries apply to every tenant and
// only a call without a tenant makes or removes one.
func TestTenants(t *testing.T) {
	clock := testclock.New(t0)
	l := newList(t, memstore.New(memstore.Config{Now: clock.Now}), clock)
	bg := context.Background()
	acme, other := keys.WithTenant(bg, "acme"), keys.WithTenant(bg, "other")
	if _, err := l.Add(acme, Spec{List: Deny, Network: "198.51.100.0/24", TTL: "1h"}, "ops"); !errors.Is(err, ErrShared) {
		t.Fatalf("a tenant's network deny = %v, want ErrShared", err)
	}
	if _, err := l.Add(acme, Spec{List: Allow, Network: "203.0.113.0/24", Exempt: []string{"login-ip"}}, "ops"); !errors.Is(err, ErrShared) {
		t.Fatalf("a tenant's allow = %v, want ErrShared", err)
	}
	mine, err := l.Add(acme, Spec{List: Deny, Account: "victim", TTL: "1h"}, "acme-ops")
	if err != nil || mine.Tenant != "acme" || mine.Account != hasher.Tenant("acme").Pseudonym(keys.PseudonymAccount, "victim") {
		t.Fatalf("a tenant's account deny = %+v, %v", mine, err)
	}
	shared := add(t, l, Spec{List: Deny, Network: "192.0.2.0/24", TTL: "1h"})
	ip := netip.MustParseAddr("198.51.100.1")
	for _, tt := range []struct {
		ctx  context.Context
		want bool
	}{{acme, true}, {bg, false}, {other, false}} {
		if got := l.Match(tt.ctx, ip, "victim", t0).Denied; got != tt.want {
			t.Errorf("Match of victim in tenant %q = %v, want %v", keys.TenantOf(tt.ctx), got, tt.want)
		}
	}
	for _, ctx := range []context.Context{acme, bg, other} {
		if !l.Match(ctx, netip.MustParseAddr("192.0.2.1"), "", t0).Denied {
			t.Errorf("the network entry does not apply in tenant %q", keys.TenantOf(ctx))
		}
	}
	if deny, _ := l.Entries(acme, t0); len(deny) != 2 {
		t.Errorf("acme sees %d deny entries, want its own and the network's", len(deny))
	}
	if deny, _ := l.Entries(bg, t0); len(deny) != 1 || deny[0].ID != shared.ID {
		t.Errorf("the default tenant sees %+v, want the network entry alone", deny)
	}
	if _, err := l.Delete(bg, mine.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("another tenant's delete = %v, want ErrNotFound", err)
	}
	if _, err := l.Delete(acme, shared.ID); !errors.Is(err, ErrShared) {
		t.Errorf("a tenant's delete of a network entry = %v, want ErrShared", err)
	}
	if _, err := l.Delete(acme, mine.ID); err != nil {
		t.Errorf("the tenant's own delete = %v", err)
	}
}
