// Package rules owns guardian's rules file: its schema, validation with line
// numbers, the built-in defaults, and the immutable compiled Set that a
// Holder swaps atomically on reload.
package rules

import (
	"slices"
	"sync/atomic"
	"time"
)

// Flow is an authentication flow a check belongs to.
type Flow string

// The flows of the contract.
const (
	Login         Flow = "login"
	PasswordReset Flow = "password_reset"
	OTPSend       Flow = "otp_send"
	OTPVerify     Flow = "otp_verify"
)

// Flows lists every flow, in the contract's order.
var Flows = []Flow{Login, PasswordReset, OTPSend, OTPVerify}

// ParseFlow returns the Flow named s, and whether there is one.
func ParseFlow(s string) (Flow, bool) {
	for _, f := range Flows {
		if string(f) == s {
			return f, true
		}
	}
	return "", false
}

// Key names what a rule counts by.
type Key string

// The keys of the contract.
const (
	KeyAccount   Key = "account"
	KeyIP        Key = "ip"
	KeyAccountIP Key = "account+ip"
	KeyRecipient Key = "recipient"
	KeyGlobal    Key = "global"
	// KeySecret counts a guessed secret across every account: the
	// check's secret_fingerprint. A rule keyed by it applies only to
	// checks that carry one.
	KeySecret Key = "secret"
)

// Type is a rule's algorithm.
type Type string

// The rule types of the contract.
const (
	Rate                Type = "rate"
	ConsecutiveFailures Type = "consecutive_failures"
	FailureRate         Type = "failure_rate"
	// Distinct counts, per key, the distinct values of Of seen over Per.
	Distinct Type = "distinct"
)

// Count says what a rate rule spends on.
type Count string

// The counts of a rate rule.
const (
	// Attempts spends on every allowed check and never gives back.
	Attempts Count = "attempts"
	// Failures reserves at check time and gives back on a success report.
	Failures Count = "failures"
)

// Action is the decision a rule gives when it trips.
type Action string

// The actions, and with Allow the decisions, of the contract.
const (
	Allow     Action = "allow"
	Challenge Action = "challenge"
	Slow      Action = "slow"
	Block     Action = "block"
)

// Severity orders decisions: block > slow > challenge > allow.
func (a Action) Severity() int {
	switch a {
	case Challenge:
		return 1
	case Slow:
		return 2
	case Block:
		return 3
	}
	return 0
}

// Mode says whether a rule decides or only reports what it would decide.
type Mode string

// The modes of the contract.
const (
	Enforce Mode = "enforce"
	Shadow  Mode = "shadow"
)

// OnStoreError is what a rule does when the store cannot answer for it.
type OnStoreError string

// The store-failure behaviours of the contract.
const (
	Local  OnStoreError = "local"
	Closed OnStoreError = "closed"
	Open   OnStoreError = "open"
)

// Rule is one validated rule with every default applied. Rules are shared by
// concurrent checks and must not be modified.
type Rule struct {
	Name  string
	Flows []Flow
	Key   Key
	Type  Type
	// Count is set for rate rules (default Attempts) and distinct rules
	// (default Failures) only.
	Count Count
	// Of is what a distinct rule counts distinct values of (KeyAccount);
	// empty for other types.
	Of Key
	// Limit is units per Per for rate rules, the threshold for others.
	Limit int64
	// Per is the rate period (rate, failure_rate) or the window
	// (distinct); zero otherwise.
	Per time.Duration
	// Burst is set for rate rules only (default Limit).
	Burst int64
	// Action defaults to slow (rate), block (consecutive_failures) and
	// challenge (failure_rate).
	Action       Action
	Mode         Mode
	OnStoreError OnStoreError
	// IPv4Prefix and IPv6Prefix are set for key ip only (defaults 32, 64).
	// Distinct rules are keyed by ip.
	IPv4Prefix int
	IPv6Prefix int
	// Hold is how long an idle consecutive-failure count is kept
	// (consecutive_failures only, default 90 days).
	Hold time.Duration
	// Hysteresis is how long a failure_rate rule stays in force after the
	// rate falls back under its limit (failure_rate only, default 30s).
	Hysteresis time.Duration
	// Line is the line of the rule in its file.
	Line int
}

// Interval is a rate rule's GCRA emission interval, Per/Limit.
func (r *Rule) Interval() time.Duration {
	if r.Limit <= 0 {
		return 0
	}
	return r.Per / time.Duration(r.Limit)
}

// GivesBack reports whether a report settles what a check spent on the
// rule: a rate rule with count: failures (a success gives its reservation
// back), a consecutive_failures rule (a success lifts its own failures, a
// failure confirms them) and a distinct rule with count: failures (a
// success stops its account counting).
func (r *Rule) GivesBack() bool {
	return r.Type == ConsecutiveFailures || (r.Type == Rate || r.Type == Distinct) && r.Count == Failures
}

// MaxSettlingRules is the most rules of one flow that GivesBack: the bound
// a rules file is held to (Parse), and the one the engine relies on. An
// attempt id records which of them its check spent in a 64-bit mask, one
// bit per rule in file order, its last bit left for the account's memory
// of guesses, so whatever the rules an attempt id stays small.
const MaxSettlingRules = 63

// Set is an immutable, validated rule set. Build one with Parse, Load or
// Default; a Set is safe for concurrent use.
type Set struct {
	// Source is "builtin" or the path the rules were read from.
	Source string
	// LoadedAt is when the set was built.
	LoadedAt time.Time
	// Rules are every rule in file order.
	Rules []Rule
	// Familiar is the file's familiar_networks; its zero value (the file
	// has none) learns no network.
	Familiar FamiliarNetworks
	// Lists are the file's static list entries (lists.go); they take no
	// part in Hash, since no attempt's settlement depends on them.
	Lists  Lists
	byFlow map[Flow][]*Rule
	// hash is Hash, computed once by newSet.
	hash string
}

// FamiliarNetworks is how guardian learns an account's own networks: a
// success report of a login or password_reset check makes the check's
// network, its address cut to IPv4Prefix or IPv6Prefix bits, familiar to
// the account for Hold. The zero value learns none.
type FamiliarNetworks struct {
	IPv4Prefix int
	IPv6Prefix int
	Hold       time.Duration
}

// On reports whether f learns networks at all.
func (f FamiliarNetworks) On() bool { return f.Hold > 0 }

// For returns the rules that apply to flow, in file order. The slice is
// shared: callers must not modify it.
func (s *Set) For(flow Flow) []*Rule { return s.byFlow[flow] }

// Rule returns the rule called name, if there is one.
func (s *Set) Rule(name string) (*Rule, bool) {
	for i := range s.Rules {
		if s.Rules[i].Name == name {
			return &s.Rules[i], true
		}
	}
	return nil, false
}

// ShadowNames returns the names of the rules in shadow mode, in file
// order: what a shadow.Book tallies.
func (s *Set) ShadowNames() []string {
	var names []string
	for i := range s.Rules {
		if s.Rules[i].Mode == Shadow {
			names = append(names, s.Rules[i].Name)
		}
	}
	return names
}

// InMode returns a copy of s with every rule in mode m, and s itself when
// they all are. A rule's mode constrains none of its other fields, so the
// copy is as valid as s.
func (s *Set) InMode(m Mode) *Set {
	if !slices.ContainsFunc(s.Rules, func(r Rule) bool { return r.Mode != m }) {
		return s
	}
	rs := slices.Clone(s.Rules)
	for i := range rs {
		rs[i].Mode = m
	}
	set := newSet(s.Source, s.LoadedAt, rs, s.Familiar)
	set.Lists = s.Lists
	return set
}

// newSet indexes rules by flow.
func newSet(source string, loadedAt time.Time, rs []Rule, fam FamiliarNetworks) *Set {
	s := &Set{Source: source, LoadedAt: loadedAt, Rules: rs, Familiar: fam, byFlow: make(map[Flow][]*Rule), hash: setHash(rs, fam)}
	for i := range s.Rules {
		r := &s.Rules[i]
		for _, f := range r.Flows {
			s.byFlow[f] = append(s.byFlow[f], r)
		}
	}
	return s
}

// Holder holds the current Set and swaps it atomically: a check that loaded
// a Set finishes on it even if a reload swaps in another. The zero value
// holds nil; Store a Set before use.
type Holder struct {
	p atomic.Pointer[Set]
}

// Load returns the current Set.
func (h *Holder) Load() *Set { return h.p.Load() }

// Store makes s the current Set.
func (h *Holder) Store(s *Set) { h.p.Store(s) }
