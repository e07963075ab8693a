package engine

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/loginlimits"
	"github.com/guardian-sec/guardian/internal/otp"
	"github.com/guardian-sec/guardian/internal/rules"
)

// Identifiers are a check's fields normalised (keys.Normalizer), not yet
// hashed: what its rules count it by. CheckRequest.Normalise makes them; the
// zero value names nothing.
type Identifiers struct {
	// Account is the normalised account (keys.Normalizer.Account), ""
	// when absent.
	Account string
	// IP is the client address (keys.IP).
	IP netip.Addr
	// Recipient is the normalised recipient (keys.Normalizer.Recipient),
	// "" when absent.
	Recipient string
	// Guess is 64 bits of guardian's keyed hash of the check's
	// secret_fingerprint (keys.Guesser), 0 when absent. Normalise only
	// validates the fingerprint: the engine hashes it, and nothing else
	// ever sees it.
	Guess uint64
}

// The account+ip pair counts an IPv4 client by its address and an IPv6
// client by its /64, as key: ip rules do by default.
const (
	pairIPv4Bits = 32
	pairIPv6Bits = 64
)

// Key returns the key rule r counts a check with these identifiers by, and
// the zero Key when the check lacks the rule's fields. It is the one place a
// rule's key meets a check's fields: the engine hashes what it returns into
// the rule's subject, and replay shows it as the key a rule limited. A
// key: global rule counts no identifier: its Key names only its kind.
func (ids *Identifiers) Key(r *rules.Rule) keys.Key {
	kind := string(r.Key)
	switch r.Key {
	case rules.KeyAccount:
		if ids.Account != "" {
			return accountKey(ids.Account)
		}
	case rules.KeyIP:
		if ids.IP.IsValid() {
			return keys.Key{Kind: kind, Net: keys.Prefix(ids.IP, r.IPv4Prefix, r.IPv6Prefix)}
		}
	case rules.KeyAccountIP:
		if ids.Account != "" && ids.IP.IsValid() {
			return keys.Key{Kind: kind, ID: ids.Account, Net: keys.Prefix(ids.IP, pairIPv4Bits, pairIPv6Bits)}
		}
	case rules.KeyRecipient:
		if ids.Recipient != "" {
			return keys.Key{Kind: kind, ID: ids.Recipient}
		}
	case rules.KeyGlobal:
		return keys.Key{Kind: kind}
	case rules.KeySecret:
		if ids.Guess != 0 {
			return keys.GuessKey(ids.Guess)
		}
	}
	return keys.Key{}
}

// accountKey is the key of a normalised account: what key: account rules
// count an untrusted check by, and what device tokens are bound to once
// hashed (keys.AccountKey, whose kind is key: account's).
func accountKey(account string) keys.Key { return keys.AccountKey(account) }

// Validate reports whether guardian decides req, and if not why: each error
// is one guardian answers with a 400 (package httpapi maps it), and wraps
// rules.ErrUnknownFlow, rules.ErrInvalidCost (with ErrInvalidField),
// ErrMissingField, ErrInvalidField, keys.ErrInvalidIP,
// keys.ErrInvalidAccount or keys.ErrInvalidRecipient. Accounts and
// recipients are normalised with n (nil: the defaults), as the engine's
// Config.Normalizer: an engine validates every request it is given the same
// way.
func (req *CheckRequest) Validate(n *keys.Normalizer) error {
	_, err := req.Normalise(n)
	return err
}

// Normalise validates req, as Validate does, and returns its identifiers,
// accounts and recipients normalised with n (nil: the defaults).
func (req *CheckRequest) Normalise(n *keys.Normalizer) (Identifiers, error) {
	var ids Identifiers
	if err := rules.CheckFlow(req.Flow); err != nil {
		return ids, err
	}
	if req.Cost != 0 {
		if err := rules.CheckCost(req.Cost); err != nil {
			return ids, fmt.Errorf("%w: %w", ErrInvalidField, err)
		}
	}
	var err error
	if ids.IP, err = keys.IP(req.IP); err != nil {
		return ids, err
	}
	if req.Account != "" {
		if ids.Account, err = n.Account(req.Account); err != nil {
			return ids, err
		}
	}
	switch {
	case req.Recipient != "":
		if ids.Recipient, err = n.Recipient(req.Recipient); err != nil {
			return ids, err
		}
	case otp.NeedsRecipient(req.Flow):
		return ids, fmt.Errorf("%w: recipient: required for flow %s", ErrMissingField, req.Flow)
	}
	if req.SecretFingerprint != "" {
		if err := CheckFingerprint(req.SecretFingerprint); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

// subjects are what a plan is built from besides the rules (build): a
// check's keys hashed, each once per check, and its trust. A check hashes
// them from its identifiers (Engine.resolve); a report restores them from
// its attempt id (Engine.restore), which seals the few a report needs: the
// account's, its trusted device's bucket, and for spent entries keyed by
// them the account+ip pair's, the recipient's and the address.
type subjects struct {
	ids Identifiers
	// h hashes the check's keys: the Hasher of the check's tenant
	// (keys.Hasher.Tenant), which namespaces every subject but those of
	// addresses and globals.
	h *keys.Hasher
	// account is the account's own subject, "" without an account: what
	// the attempt and device tokens are bound to. bucket is the subject
	// its key: account rules count on: the account's, or a trusted
	// device's (trusted).
	account, bucket string
	trusted         bool
	// guess is what the account's memory holds for the check's guess
	// (keys.Guesser.AccountGuess); 0 without an account or a guess.
	guess uint64
	// challenged and member say which other buckets the account rules
	// may count the check in (loginlimits.Buckets); passed that the check
	// says its end user passed a challenge, account or not.
	challenged, passed bool
	member             string
	// source is the check's address as the account's consecutive-failure
	// counts attribute it (loginlimits.Policy.Source), "" without an
	// account.
	source string
	// pair, recipient and secret are the subjects of the check's
	// account+ip pair, recipient and guess, "" until a rule asks.
	pair, recipient, secret string
	// prefixes are the subjects of the address cut to the prefixes of the
	// key: ip rules asked so far.
	prefixes [maxPrefixes]prefixSubject
	n        int
	// skip names the rules an allow list entry exempts the check from
	// (lists.go); nil for none, and on a report.
	skip []string
}

// maxPrefixes is how many address prefixes a check remembers the subject
// of; a rule set with more hashes the rest each time.
const maxPrefixes = 8

// prefixSubject is an address prefix and its subject.
type prefixSubject struct {
	net     netip.Prefix
	subject string
}

// of returns the subject rule r counts the check by, hashing it with s.h
// the first time, and "" when the check lacks the rule's fields.
func (s *subjects) of(r *rules.Rule) string {
	switch r.Key {
	case rules.KeyAccount:
		return s.bucket
	case rules.KeyAccountIP:
		return s.hashOnce(r, &s.pair)
	case rules.KeyRecipient:
		return s.hashOnce(r, &s.recipient)
	case rules.KeySecret:
		return s.hashOnce(r, &s.secret)
	}
	k := s.ids.Key(r)
	if k.IsZero() {
		return ""
	}
	for i := range s.n {
		if s.prefixes[i].net == k.Net {
			return s.prefixes[i].subject
		}
	}
	sub := s.h.KeySubject(k)
	if s.n < len(s.prefixes) {
		s.prefixes[s.n] = prefixSubject{net: k.Net, subject: sub}
		s.n++
	}
	return sub
}

// hashOnce returns *dst, hashing r's key of the check into it first when it
// is empty and the check has the key's fields.
func (s *subjects) hashOnce(r *rules.Rule, dst *string) string {
	if *dst == "" {
		if k := s.ids.Key(r); !k.IsZero() {
			*dst = s.h.KeySubject(k)
		}
	}
	return *dst
}

// buckets are the buckets loginlimits chooses among for the account rules
// of an untrusted check.
func (s *subjects) buckets() loginlimits.Buckets {
	return loginlimits.Buckets{Account: s.account, Challenged: s.challenged, Member: s.member, Source: s.source}
}

// accountSubject returns the subject of account in the tenant ctx carries
// (keys.TenantOf), for the calls that name an account without a check:
// status and reset.
func (e *Engine) accountSubject(ctx context.Context, account string) (string, error) {
	return e.hasher.ForContext(ctx).AccountSubject(e.norm, account)
}
