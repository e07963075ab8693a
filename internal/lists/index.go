package lists

import (
	"net/netip"
	"slices"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
)

// Match is what the lists say of one check.
type Match struct {
	// Denied reports that a deny entry blocks the check; RetryAfter is
	// then the entry's remaining time (StaticRetry for a static entry),
	// the longest of every deny entry that matches.
	Denied     bool
	RetryAfter time.Duration
	// Exempt are the rules the check skips, by the allow entries that
	// match it; nil when none does. The slice is shared: callers must not
	// modify it.
	Exempt []string
}

// Skips reports whether the check skips the rule called name.
func (m *Match) Skips(name string) bool { return slices.Contains(m.Exempt, name) }

// index is an immutable set of entries arranged for matching: networks by
// their masked prefix, with the prefix lengths in use per family, so a
// check's address is looked up once per length in use (at most 33 for
// IPv4, 129 for IPv6) whatever the number of entries; accounts by
// pseudonym.
type index struct {
	nets         map[netip.Prefix][]*Entry
	lens4, lens6 []int
	accounts     map[string][]*Entry
	// entries are every entry, for GET /v1/lists.
	entries []*Entry
}

// emptyIndex matches nothing.
var emptyIndex = newIndex(nil)

// newIndex indexes entries, which it keeps.
func newIndex(entries []*Entry) *index {
	ix := &index{nets: map[netip.Prefix][]*Entry{}, accounts: map[string][]*Entry{}, entries: entries}
	for _, e := range entries {
		if e.Account != "" {
			ix.accounts[e.Account] = append(ix.accounts[e.Account], e)
			continue
		}
		if !e.Network.IsValid() {
			continue
		}
		p := e.Network.Masked()
		if p.Addr().Is4() {
			ix.lens4 = addLen(ix.lens4, p.Bits())
		} else {
			ix.lens6 = addLen(ix.lens6, p.Bits())
		}
		ix.nets[p] = append(ix.nets[p], e)
	}
	return ix
}

// addLen adds n to lens, a set of lengths, keeping it sorted.
func addLen(lens []int, n int) []int {
	i, found := slices.BinarySearch(lens, n)
	if found {
		return lens
	}
	return slices.Insert(lens, i, n)
}

// match returns what the entries say of a check from ip (the zero Addr:
// none) of the account whose pseudonym account returns (called only when
// some entry names an account), at now.
func (ix *index) match(ip netip.Addr, account func() string, now time.Time) Match {
	var m Match
	if len(ix.entries) == 0 {
		return m
	}
	if len(ix.accounts) > 0 {
		if a := account(); a != "" {
			m.add(ix.accounts[a], now)
		}
	}
	if !ip.IsValid() {
		return m
	}
	// An IPv6 address that carries an IPv4 one (6to4, NAT64, mapped)
	// matches the IPv4 entries of that address, as keys.Prefix counts
	// it, and the IPv6 entries of its own.
	if v4 := keys.Embedded4(ip); v4.Is4() {
		ix.matchLens(&m, v4, ix.lens4, now)
	}
	if ip.Is6() && !ip.Is4In6() {
		ix.matchLens(&m, ip, ix.lens6, now)
	}
	return m
}

// matchLens adds to m the entries of ip's prefixes of lens.
func (ix *index) matchLens(m *Match, ip netip.Addr, lens []int, now time.Time) {
	for _, n := range lens {
		p, _ := ip.Prefix(n)
		if es := ix.nets[p]; es != nil {
			m.add(es, now)
		}
	}
}

// add folds the entries of es in force at now into m.
func (m *Match) add(es []*Entry, now time.Time) {
	for _, e := range es {
		if !e.live(now) {
			continue
		}
		if e.List == Deny {
			retry := StaticRetry
			if !e.ExpiresAt.IsZero() {
				retry = e.ExpiresAt.Sub(now)
			}
			m.Denied, m.RetryAfter = true, max(m.RetryAfter, retry)
			continue
		}
		switch {
		case m.Exempt == nil:
			m.Exempt = e.Exempt
		case !slices.ContainsFunc(e.Exempt, func(name string) bool { return !slices.Contains(m.Exempt, name) }):
			// Nothing new: m.Exempt stays shared.
		default:
			merged := slices.Clone(m.Exempt)
			for _, name := range e.Exempt {
				if !slices.Contains(merged, name) {
					merged = append(merged, name)
				}
			}
			m.Exempt = merged
		}
	}
}
