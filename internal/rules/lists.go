package rules

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	netkeys "github.com/guardian-sec/guardian/internal/keys"
)

// DenyListRule is the rule a check answered by a deny list entry names: no
// rule of a file may be called it.
const DenyListRule = "deny-list"

// MaxStaticEntries bounds the entries a rules file's lists may hold, deny
// and allow together.
const MaxStaticEntries = 10_000

// MaxReasonLen bounds a list entry's reason, in bytes.
const MaxReasonLen = 256

// Lists are the static entries of a rules file's top-level lists mapping
// (contract 8.2): applied with the rules, reloaded with them, never
// expiring. The zero value holds none.
type Lists struct {
	Allow []ListEntry
	Deny  []ListEntry
}

// Len is how many entries l holds.
func (l Lists) Len() int { return len(l.Allow) + len(l.Deny) }

// ListEntry is one static entry: a network, the rules an allow entry
// exempts its checks from (none for a deny entry), a reason, and the line
// it is on.
type ListEntry struct {
	Network netip.Prefix
	Exempt  []string
	Reason  string
	Line    int
}

// Errors of Set.CheckExempt, which an allow list entry's exempt list is
// checked with.
var (
	// ErrUnknownRule reports a name no rule of the set has.
	ErrUnknownRule = errors.New("rules: unknown rule")
	// ErrNotExemptable reports a rule an allow list may not exempt from:
	// one that limits an account (key: account, account+ip, recipient or
	// secret) or counts consecutive failures.
	ErrNotExemptable = errors.New("rules: rule may not be exempted")
)

// Exemptable reports whether an allow list entry may exempt checks from r:
// a rule with key: ip, of type distinct, or with key: global, and never a
// consecutive-failure count, so that an allow list never lifts an
// account's limits or its hard stop.
func Exemptable(r *Rule) bool {
	if r.Type == ConsecutiveFailures {
		return false
	}
	return r.Key == KeyIP || r.Key == KeyGlobal || r.Type == Distinct
}

// CheckExempt reports whether every name is that of a rule of s an allow
// list entry may exempt from: an error wrapping ErrUnknownRule or
// ErrNotExemptable names the first that is not.
func (s *Set) CheckExempt(names []string) error {
	for _, name := range names {
		r, ok := s.Rule(name)
		switch {
		case !ok:
			return fmt.Errorf("%w: exempt: no rule is called %s", ErrUnknownRule, quote(name))
		case !Exemptable(r):
			return fmt.Errorf("%w: exempt: rule %s has key: %s and type: %s; an allow list exempts only from rules with key: ip, key: global or type: distinct, never from an account's limits or its hard stop", ErrNotExemptable, name, r.Key, r.Type)
		}
	}
	return nil
}

// ParseDuration parses a duration as a rules file writes one ("90s",
// "1h30m", "30d"): the form a list entry's ttl takes too.
func ParseDuration(s string) (time.Duration, error) {
	d, why := parseDuration(s)
	if why != "" {
		return 0, fmt.Errorf("invalid duration %s: %s", quote(s), why)
	}
	return d, nil
}

// staticLists reads the top-level lists mapping; rs are the file's valid
// rules, which exempt lists name.
func (p *parser) staticLists(f field, rs []Rule) {
	if f.value.Kind != yaml.MappingNode {
		p.errorf(f.key.Line, "lists: got %s, want a mapping like {allow: [{network, exempt, reason}], deny: [{network, reason}]}", describe(f.value))
		return
	}
	fs := p.fields(f.value, []string{"allow", "deny"}, " in lists (want allow and deny)")
	set := newSet(p.file, time.Time{}, rs, FamiliarNetworks{})
	if a, ok := fs["allow"]; ok {
		p.static.Allow = p.listEntries(a, "allow", set)
	}
	if d, ok := fs["deny"]; ok {
		p.static.Deny = p.listEntries(d, "deny", nil)
	}
	if n := p.static.Len(); n > MaxStaticEntries {
		p.errorf(f.key.Line, "lists: %d entries, want at most %d", n, MaxStaticEntries)
	}
}

// listEntries reads the entries of the allow or deny list f; set holds the
// rules an allow entry may exempt from, nil for the deny list.
func (p *parser) listEntries(f field, list string, set *Set) []ListEntry {
	if f.value.Kind != yaml.SequenceNode {
		p.errorf(f.key.Line, "lists: %s: got %s, want a list of entries like {network: 198.51.100.0/24, reason: \"…\"}", list, describe(f.value))
		return nil
	}
	known, hint := []string{"network", "reason"}, " in a deny entry (want network and reason)"
	if set != nil {
		known, hint = []string{"network", "exempt", "reason"}, " in an allow entry (want network, exempt and reason)"
	}
	var out []ListEntry
	for _, item := range f.value.Content {
		item = resolve(item)
		if item.Kind != yaml.MappingNode {
			p.errorf(item.Line, "lists: %s: got %s, want an entry like {network: 198.51.100.0/24, reason: \"…\"}", list, describe(item))
			continue
		}
		before := len(p.errs)
		e := ListEntry{Line: item.Line}
		fs := p.fields(item, known, hint)
		if n, ok := fs["network"]; !ok {
			p.errorf(item.Line, "lists: %s: network: required", list)
		} else if n.value.Kind != yaml.ScalarNode {
			p.errorf(n.key.Line, "lists: %s: network: got %s, want a network like 198.51.100.0/24 or an address", list, describe(n.value))
		} else if net, err := netkeys.Network(n.value.Value); err != nil {
			p.errorf(n.key.Line, "lists: %s: network: %s", list, detailOf(err, netkeys.ErrInvalidIP))
		} else {
			e.Network = net
		}
		if r, ok := fs["reason"]; ok {
			if r.value.Kind != yaml.ScalarNode || r.value.ShortTag() != "!!str" || len(r.value.Value) > MaxReasonLen {
				p.errorf(r.key.Line, "lists: %s: reason: got %s, want a text of at most %d bytes", list, describe(r.value), MaxReasonLen)
			}
			e.Reason = r.value.Value
		}
		if set != nil {
			e.Exempt = p.exempt(fs, item.Line, set)
		}
		if len(p.errs) == before {
			out = append(out, e)
		}
	}
	return out
}

// exempt reads an allow entry's exempt list, which names at least one rule
// of set the entry may exempt from (Set.CheckExempt).
func (p *parser) exempt(fs map[string]field, line int, set *Set) []string {
	f, ok := fs["exempt"]
	if !ok {
		p.errorf(line, "lists: allow: exempt: required, want the rules the network skips, like [login-ip]")
		return nil
	}
	if f.value.Kind != yaml.SequenceNode || len(f.value.Content) == 0 {
		p.errorf(f.key.Line, "lists: allow: exempt: got %s, want a list of rule names like [login-ip]", describe(f.value))
		return nil
	}
	var names []string
	for _, n := range f.value.Content {
		n = resolve(n)
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			p.errorf(n.Line, "lists: allow: exempt: got %s, want a rule name", describe(n))
			continue
		}
		if err := set.CheckExempt([]string{n.Value}); err != nil {
			p.errorf(n.Line, "lists: allow: %s", detailOf(err, ErrUnknownRule, ErrNotExemptable))
			continue
		}
		if !slices.Contains(names, n.Value) {
			names = append(names, n.Value)
		}
	}
	return names
}

// detailOf is err's message without the sentinel's text it starts with.
func detailOf(err error, sentinels ...error) string {
	msg := err.Error()
	for _, s := range sentinels {
		msg = strings.TrimPrefix(msg, s.Error()+": ")
	}
	return msg
}
