// Package lists keeps guardian's deny and allow lists (contract 8.2): a
// deny entry blocks every check from a network or of an account before any
// rule spends anything; an allow entry exempts the checks from a network
// from named address, distinct and global rules, never from an account's
// limits or its hard stop.
//
// Entries come from the admin API, kept in the store every instance shares
// (store.Lists), and from the rules file (rules.Lists), which are static:
// applied with the rules and reloaded with them. Each instance matches
// checks against an index in memory (index.go), which its beat refreshes
// from the store (List.Ride); while the store fails it keeps the last
// entries it read.
//
// No account reaches the store or the API's answers in clear: an account
// entry holds the account's pseudonym (keys.Hasher.Pseudonym) and matches
// checks by it. Networks are kept as the operator wrote them: they name
// shared networks and ranges, configuration like the rules file's.
package lists

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
)

// The two lists.
const (
	Deny  = "deny"
	Allow = "allow"
)

// SourceAPI is the Source of an entry the admin API added; a static entry's
// is its rules file's path.
const SourceAPI = "api"

// Bounds of an entry.
const (
	// MaxTTL is the longest ttl an entry may have: a year.
	MaxTTL = 365 * 24 * time.Hour
	// StaticRetry is the retry_after a static deny entry, which has no
	// end, answers with: a day.
	StaticRetry = 24 * time.Hour
)

// Errors of an entry that cannot be made. Each wraps the field's message.
var (
	// ErrInvalid reports a field with a bad value, an exempt list naming
	// a rule an allow list may not exempt from included
	// (rules.ErrNotExemptable).
	ErrInvalid = errors.New("lists: invalid entry")
	// ErrMissing reports a required field left out.
	ErrMissing = errors.New("lists: missing field")
)

// Entry is one list entry. An entry names a network or an account, never
// both; only a deny entry may name an account.
type Entry struct {
	// ID names the entry (DELETE /v1/lists/{id}).
	ID string `json:"id"`
	// List is Deny or Allow.
	List string `json:"list"`
	// Network is the network the entry matches checks from; the zero
	// Prefix for an account entry.
	Network netip.Prefix `json:"network,omitzero"`
	// Account is the pseudonym of the account a deny entry matches, ""
	// for a network entry, and Tenant the account's tenant, "" for the
	// default tenant's: a pseudonym is its tenant's (keys.Hasher.Tenant),
	// so an entry matches its own tenant's checks alone. Network entries
	// apply to every tenant.
	Account string `json:"account,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	// Exempt are the rules an allow entry's checks skip.
	Exempt []string `json:"exempt,omitempty"`
	// Reason is the operator's why.
	Reason string `json:"reason"`
	// CreatedAt is when the entry was added (a static entry: when its
	// rules were loaded); ExpiresAt when it lapses, the zero time for an
	// entry without a ttl.
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Subject is the admin token's subject that added it; "" for a static
	// entry.
	Subject string `json:"subject,omitempty"`
	// Source is SourceAPI or the rules file of a static entry.
	Source string `json:"source"`
}

// live reports whether e is in force at now.
func (e *Entry) live(now time.Time) bool { return e.ExpiresAt.IsZero() || now.Before(e.ExpiresAt) }

// Spec is an entry as an admin asks for one: the fields of POST
// /v1/lists/deny and /v1/lists/allow, "" and nil for those left out.
type Spec struct {
	List    string
	Network string
	Account string
	Exempt  []string
	TTL     string
	Reason  string
}

// entry validates spec and returns the entry it makes at now, but for its
// ID and Subject: set holds the rules exempt may name, h and n hash an
// account into its pseudonym.
func (spec *Spec) entry(set *rules.Set, h *keys.Hasher, n *keys.Normalizer, now time.Time) (Entry, error) {
	e := Entry{List: spec.List, Reason: spec.Reason, CreatedAt: now, Source: SourceAPI}
	if len(spec.Reason) > rules.MaxReasonLen {
		return e, fmt.Errorf("%w: reason: %d bytes, want at most %d", ErrInvalid, len(spec.Reason), rules.MaxReasonLen)
	}
	switch {
	case spec.Network != "" && spec.Account != "":
		return e, fmt.Errorf("%w: network and account: an entry names one or the other", ErrInvalid)
	case spec.Account != "" && spec.List == Allow:
		return e, fmt.Errorf("%w: account: an allow entry names a network; an allow list never lifts an account's limits", ErrInvalid)
	case spec.Account != "":
		norm, err := n.Account(spec.Account)
		if err != nil {
			return e, fmt.Errorf("%w: account: %w", ErrInvalid, err)
		}
		e.Account = h.Pseudonym(keys.PseudonymAccount, norm)
	case spec.Network != "":
		net, err := keys.Network(spec.Network)
		if err != nil {
			return e, fmt.Errorf("%w: network: %s", ErrInvalid, detail(err, keys.ErrInvalidIP))
		}
		e.Network = net
	case spec.List == Deny:
		return e, fmt.Errorf("%w: network or account: required", ErrMissing)
	default:
		return e, fmt.Errorf("%w: network: required", ErrMissing)
	}
	if err := spec.exempt(&e, set); err != nil {
		return e, err
	}
	return e, spec.expiry(&e, now)
}

// exempt validates an allow entry's exempt list into e.
func (spec *Spec) exempt(e *Entry, set *rules.Set) error {
	switch {
	case spec.List == Deny && spec.Exempt != nil:
		return fmt.Errorf("%w: exempt: a deny entry exempts from nothing", ErrInvalid)
	case spec.List == Deny:
		return nil
	case len(spec.Exempt) == 0:
		return fmt.Errorf("%w: exempt: required, want the rules the network skips, like [\"login-ip\"]", ErrMissing)
	case len(spec.Exempt) > maxExempt:
		return fmt.Errorf("%w: exempt: %d rules, want at most %d", ErrInvalid, len(spec.Exempt), maxExempt)
	}
	if err := set.CheckExempt(spec.Exempt); err != nil {
		return &exemptError{msg: ErrInvalid.Error() + ": " + detail(err, rules.ErrUnknownRule, rules.ErrNotExemptable), errs: []error{ErrInvalid, err}}
	}
	for _, name := range spec.Exempt {
		if !slices.Contains(e.Exempt, name) {
			e.Exempt = append(e.Exempt, name)
		}
	}
	return nil
}

// exemptError is an exempt list refused: ErrInvalid, and the rules error
// that says why (rules.ErrUnknownRule, rules.ErrNotExemptable), read as one
// message.
type exemptError struct {
	msg  string
	errs []error
}

func (e *exemptError) Error() string   { return e.msg }
func (e *exemptError) Unwrap() []error { return e.errs }

// maxExempt bounds an allow entry's exempt list.
const maxExempt = 64

// expiry validates spec's ttl into e's ExpiresAt: required for a deny
// entry, optional for an allow entry, at most MaxTTL.
func (spec *Spec) expiry(e *Entry, now time.Time) error {
	if spec.TTL == "" {
		if spec.List == Deny {
			return fmt.Errorf("%w: ttl: required for a deny entry, like \"1h\"", ErrMissing)
		}
		return nil
	}
	ttl, err := rules.ParseDuration(spec.TTL)
	switch {
	case err != nil:
		return fmt.Errorf("%w: ttl: %w", ErrInvalid, err)
	case ttl <= 0 || ttl > MaxTTL:
		return fmt.Errorf("%w: ttl: %q, want more than 0s and at most %s", ErrInvalid, spec.TTL, rules.FormatDuration(MaxTTL))
	}
	e.ExpiresAt = now.Add(ttl)
	return nil
}

// detail is err's message without the texts of the sentinels it starts
// with.
func detail(err error, sentinels ...error) string {
	msg := err.Error()
	for _, s := range sentinels {
		if p := s.Error() + ": "; len(msg) >= len(p) && msg[:len(p)] == p {
			msg = msg[len(p):]
		}
	}
	return msg
}
