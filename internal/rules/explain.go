package rules

import (
	"fmt"
	"math/big"
	"time"
)

// Bound is what one rule allows an attacker per key, in the rule's own
// window and per day, once enforced: the figure a rule change moves, so
// that its effect reads before it ships, and a candidate in shadow mode
// reads before it is promoted.
type Bound struct {
	// Rule is the rule's name.
	Rule string `json:"rule"`
	// Key is what the rule counts by.
	Key Key `json:"key"`
	// Mode is the rule's mode: a shadow rule decides nothing yet, and
	// PerDay is what it would bound once promoted.
	Mode Mode `json:"mode"`
	// PerDay is, for a rate rule, the most units one key can spend in a
	// day, burst + floor(24h·limit/per); for a distinct rule the most
	// distinct accounts one key can count in a day, its limit when per is
	// a day or more, limit·ceil(24h/per) otherwise; for any other rule its
	// limit.
	PerDay int64 `json:"per_day"`
	// Most is what the rule bounds in its own Window: PerDay for a rate
	// rule, whose window is a day; the limit for any other rule.
	Most int64 `json:"bound"`
	// Window is the span Most counts in: "a day" for a rate rule, "in a
	// row" for consecutive failures, "in " and the rule's per for a
	// failure rate or a distinct count ("in 1m", "in 1d").
	Window string `json:"window"`
	// What says in words what the rule bounds; for a shadow rule it starts
	// with shadowWhat.
	What string `json:"what"`
}

// String is the bound in its window: "1445 a day", "100 in a row",
// "1000 in 1m".
func (b Bound) String() string { return fmt.Sprintf("%d %s", b.Most, b.Window) }

// shadowWhat starts the words of a shadow rule's bound.
const shadowWhat = "shadow, deciding nothing until promoted; then "

// Bound returns what r allows per key, once enforced.
func (r *Rule) Bound() Bound {
	b := r.bound()
	b.Mode = r.Mode
	if r.Mode == Shadow {
		b.What = shadowWhat + b.What
	}
	return b
}

// bound is Bound as if r were enforced.
func (r *Rule) bound() Bound {
	b := Bound{Rule: r.Name, Key: r.Key, PerDay: r.Limit, Most: r.Limit, Window: "in " + FormatDuration(r.Per)}
	subject := r.subject()
	switch r.Type {
	case Rate:
		b.PerDay = r.Burst + perDay(r.Limit, r.Per)
		b.Most, b.Window = b.PerDay, "a day"
		b.What = fmt.Sprintf("at most %d %s per %s a day (%d back to back, then %s); past that, %s",
			b.PerDay, r.units(), subject, r.Burst, rate(r.Limit, r.Per), r.Action)
	case ConsecutiveFailures:
		b.Window = "in a row"
		b.What = fmt.Sprintf("at most %d failures in a row per %s; then %s", r.Limit, subject, r.Action)
		if r.Key == KeyAccount {
			b.What += " until the account is reset"
		}
	case FailureRate:
		b.What = fmt.Sprintf("at most %d failed or unreported checks of %s across every key per %s; past that, %s every check without a trusted device or a passed challenge",
			r.Limit, flowList(r.Flows), FormatDuration(r.Per), r.Action)
	case Distinct:
		if windows := int64((day + r.Per - 1) / r.Per); r.Per > 0 && windows > 1 {
			b.PerDay = mulCapped(r.Limit, windows)
		}
		b.What = fmt.Sprintf("at most %d distinct accounts with %s per %s in %s (as a HyperLogLog estimates them); past that, %s that network's checks",
			r.Limit, r.units(), subject, FormatDuration(r.Per), r.Action)
	default:
		b.What = fmt.Sprintf("at most %d per %s; past that, %s", r.Limit, subject, r.Action)
	}
	return b
}

// Explain returns the Bound of every rule of s, in file order: shadow
// rules too, marked so, with what they would bound once promoted.
func (s *Set) Explain() []Bound {
	out := make([]Bound, 0, len(s.Rules))
	for i := range s.Rules {
		out = append(out, s.Rules[i].Bound())
	}
	return out
}

// perDay is floor(24h·limit/per), computed without overflow for any limit
// and period a rules file accepts.
func perDay(limit int64, per time.Duration) int64 {
	if per <= 0 {
		return 0
	}
	n := new(big.Int).Mul(big.NewInt(int64(day)), big.NewInt(limit))
	n.Quo(n, big.NewInt(int64(per)))
	if !n.IsInt64() {
		return 1<<63 - 1
	}
	return n.Int64()
}

// mulCapped is a·b, or the largest int64 when that overflows.
func mulCapped(a, b int64) int64 {
	n := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	if !n.IsInt64() {
		return 1<<63 - 1
	}
	return n.Int64()
}

// units names what a rate rule spends.
func (r *Rule) units() string {
	if r.Count == Failures {
		return "failed or unreported checks"
	}
	return "checks"
}

// subject names the key a rule counts by, in words.
func (r *Rule) subject() string {
	switch r.Key {
	case KeyIP:
		return fmt.Sprintf("IPv4 /%d or IPv6 /%d", r.IPv4Prefix, r.IPv6Prefix)
	case KeyAccountIP:
		return "account and address"
	case KeySecret:
		return "guessed secret (secret_fingerprint), across all accounts,"
	}
	return string(r.Key)
}

// rate writes limit per period, "1 per 1m" or "30 per 10m".
func rate(limit int64, per time.Duration) string {
	return fmt.Sprintf("%d per %s", limit, FormatDuration(per))
}

// flowList joins flows with "or": "login or password_reset".
func flowList(fs []Flow) string {
	s := ""
	for i, f := range fs {
		switch {
		case i == 0:
		case i == len(fs)-1:
			s += " or "
		default:
			s += ", "
		}
		s += string(f)
	}
	return s
}
