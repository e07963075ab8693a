package engine

import (
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/plan"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// Repeat guesses. A check may carry a secret_fingerprint, the auth
// service's keyed hash of the secret it is about to verify; guardian keeps
// 64 bits of its own keyed hash of it, the check's guess
// (keys.Guesser). Each account remembers its last rememberedGuesses failed
// guesses in a store key of its own beside its rules' keys, evaluated in
// the check's own store call: a reported failure for guessHold, a check not
// (yet) reported, like any state only unreported checks leave, for twice
// the attempt TTL. A check whose guess the account remembers teaches an
// attacker nothing new, so it spends nothing on the rules freeOnRepeat
// names; it still counts on ip, recipient and secret rules, and a rule
// whose cost does not fit still denies it. A new guess is remembered when
// its check is spent, before it is reported: a check never reported stays
// a failed guess. A success report, or an account reset, forgets them all.
//
// Two concurrent first tries of one new guess spend the account once: the
// memory and the account's own keys (its key: account rules and hard stop)
// share the account's subject, so they are evaluated in one atomic step
// (one script on Redis, in one slot of a Cluster; the shards locked
// together in the embedded store), and one try records the guess while
// every other finds it. An account+ip pair or a trusted device's bucket has
// a subject of its own: on a single Redis or the embedded store it is in
// the same step too; on a Redis Cluster it lives in another slot, where
// every try spends it and the tries that found the guess give that back in
// the same call, so it also ends up spent once, though while the tries are
// in flight a pair with less room than them may slow some. A check that
// another rule denies records nothing: a guess no one verified never
// becomes free. On a Cluster, where the memory cannot see that denial, the
// guess is forgotten again, which may forget one that concurrent tries
// found; it then costs again, the strict side.
//
// A repeat is free at most freeRepeats times per account and day (a rate
// of its own, burst freeRepeats, refilling over freeRepeatsPer): past that
// it spends and counts like any failure, and the answer says so
// (Decision.RepeatCapped). So an auth service that sends a constant or
// wrong fingerprint, which makes every guess look like a repeat, cannot
// remove an account's limits: an attacker gets at most 20 more guesses a
// day than the account's rules allow.
const (
	rememberedGuesses = 3
	guessHold         = 24 * time.Hour
	freeRepeats       = 20
	freeRepeatsPer    = 24 * time.Hour
	// repeatsName names the store key of the account's allowance of free
	// repeats, in the memory's slot.
	repeatsName = "_repeats"
	// guessesName names the memory's store key beside the account's
	// rules: '_' is in no rule name. The memory is no rule: its op names
	// none, in metrics or anywhere else.
	guessesName = "_guesses"
)

// Fingerprint bounds: a secret_fingerprint is 16 to 128 characters of
// base64url.
const (
	minFingerprint = 16
	maxFingerprint = 128
)

// CheckFingerprint reports whether fp is a secret_fingerprint a check may
// carry: 16 to 128 of [A-Za-z0-9_-]. The error wraps ErrInvalidField and
// never echoes fp.
func CheckFingerprint(fp string) error {
	if len(fp) < minFingerprint || len(fp) > maxFingerprint {
		return fmt.Errorf("%w: secret_fingerprint: want %d to %d characters, got %d", ErrInvalidField, minFingerprint, maxFingerprint, len(fp))
	}
	for i := 0; i < len(fp); i++ {
		c := fp[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("%w: secret_fingerprint: character %d is not one of A-Z, a-z, 0-9, '-' and '_'", ErrInvalidField, i+1)
		}
	}
	return nil
}

// freeOnRepeat reports whether a repeated guess spends nothing on rule r:
// key: account and key: account+ip rules, and consecutive_failures rules.
func freeOnRepeat(r *rules.Rule) bool {
	return r.Key == rules.KeyAccount || r.Key == rules.KeyAccountIP || r.Type == rules.ConsecutiveFailures
}

// guessesKey is the store key of the memory of the account with subject.
func guessesKey(account string) string { return keys.StoreKey(account, guessesName) }

// guessesOp is the op on an account's memory looking for guess, recording
// it when cost is 1.
func (e *Engine) guessesOp(account string, guess uint64, cost int64) store.Op {
	return store.Op{Key: guessesKey(account), Role: store.Soft, Cost: cost, Guess: guess, Limit: e.guesses}
}

// addGuesses adds to p the account's memory of the check's guess, and
// marks the entries a repeat of it does not spend (freeOnRepeat). A success
// report forgets every guess of the account; a failure report confirms the
// check's own, kept then for guessHold. A check without an account or a
// guess remembers nothing.
func (e *Engine) addGuesses(p *plan.Plan, s *subjects) {
	if s.guess == 0 {
		return
	}
	for i := range p.Entries() {
		en := &p.Entries()[i]
		if en.Kind == plan.Limit && freeOnRepeat(en.Rule) {
			en.Op.FreeOnRepeat = true
		}
	}
	p.Add(plan.Entry{
		Kind:    plan.Guesses,
		Op:      e.guessesOp(s.account, s.guess, 1),
		Subject: s.account,
		Bit:     guessBit,
		Success: store.Settlement{Action: store.Forget},
		Failure: store.Settlement{Action: store.Confirm, Guess: s.guess, Span: guessHold},
	})
	p.Add(plan.Entry{
		Kind: plan.Repeats,
		Op: store.Op{Key: repeatsKey(s.account), Role: store.Soft, Cost: 1, OnRepeat: true,
			Limit: store.Rate{Interval: freeRepeatsPer / freeRepeats, Burst: freeRepeats}},
		Subject: s.account,
		Bit:     plan.NoBit,
	})
}

// repeatsKey is the store key of the account's allowance of free repeats.
func repeatsKey(account string) string { return keys.StoreKey(account, repeatsName) }

// repeatGuess reports whether p's memory of guesses found the check's guess
// remembered and free, and whether it found it but the account's free
// repeats were spent (capped).
func repeatGuess(p *plan.Plan) (repeat, capped bool) {
	for i := range p.Entries() {
		if en := &p.Entries()[i]; en.Kind == plan.Guesses {
			r := p.Result(en)
			return r.Repeat, r.Capped
		}
	}
	return false, false
}
