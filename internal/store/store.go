// Package store defines guardian's security store: where limit state lives,
// and the one operation every check needs, a batch of limit ops evaluated and
// spent atomically in one call.
//
// Two implementations pass the same conformance suite (package storetest):
// the embedded in-memory store (package memstore), correct for one instance,
// and the Redis store (package redisstore), shared by a fleet.
//
// Keys reach a store already hashed (package keys): a store never sees an
// account, an address or a phone number in clear.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Kind says what state an Op works on.
type Kind uint8

const (
	// Rate is a GCRA bucket: the state is one theoretical arrival time.
	// Cost units fit when the key, after spending them, stays within the
	// tolerance Interval×Burst; over any span t a key admits at most
	// Burst + t/Interval units.
	Rate Kind = iota + 1
	// Counter is a consecutive-failure count: Cost units fit while the count
	// plus Cost stays at or below Limit. Each spend keeps the key for Hold
	// at least; a confirming Refund keeps it longer.
	Counter
	// Guesses is an account's memory of its last failed guesses: up to
	// Limit guesses (Guess values), each remembered for Hold at least from
	// the last check that made it, and longer once a confirming Refund
	// keeps it. An op finds whether its Guess is remembered
	// (Result.Repeat) and never denies the batch. When the batch is spent,
	// a Cost of 1 records the guess as the most recent, forgetting the
	// oldest beyond Limit. When it finds its guess remembered, every
	// FreeOnRepeat op of the batch is evaluated and not spent. A batch
	// holds at most one Guesses op.
	Guesses
	// Familiar reads an account's familiar networks (familiar.go): it never
	// spends or denies, and decides which of the batch's conditional ops
	// count.
	Familiar
	// Distinct counts the distinct members a key saw over a sliding window
	// (distinct.go): it fits while the count is at most Limit.
	Distinct
)

// MaxGuesses is the most guesses a Guesses op may remember (its Limit).
const MaxGuesses = 8

// Op is one limit to evaluate for a check. The zero value is not a valid Op.
type Op struct {
	// Key is the full store key, already hashed (keys.StoreKey).
	Key  string
	Kind Kind
	// Shadow ops are evaluated and spent on their own: they never take part
	// in the all-or-nothing decision of the enforced ops.
	Shadow bool
	// Soft ops are enforced ops that never deny the batch (a rule whose
	// action is challenge: the check goes ahead behind a challenge). A soft
	// op is spent with the batch when it fits, and left alone when it does
	// not.
	Soft bool
	// Cost is the number of units to spend; 0 only evaluates.
	Cost int64

	// Interval is the GCRA emission interval (per/limit) of a Rate, and
	// the step a Distinct window advances by.
	Interval time.Duration
	// Burst is how many units fit back to back after idle. Rate only.
	Burst int64

	// Limit is the count at which a Counter denies, or above which a
	// Distinct denies. Counter and Distinct only.
	Limit int64
	// Hold is how long a spend keeps the count at least: the key lives
	// until the later of its deadline and now + Hold. Counter only.
	Hold time.Duration

	// Member is the network a Familiar op looks for, or the member a
	// Distinct op adds. Familiar and Distinct only.
	Member string
	// When makes an op conditional on the batch's Familiar op
	// (familiar.go); the zero value counts always.
	When When
	// Toll ops are enforced ops that are spent, when every Toll op of the
	// batch fits, even if another op denies the batch: what a check that
	// keeps knocking on a slowed key pays, so that polling a drained key is
	// not free. A batch that a Toll op denies spends no Toll. A Toll op is
	// never Soft or Shadow.
	Toll bool

	// Rule names the rule the op belongs to, and OnError says what to do
	// with the op when the store cannot answer. Stores ignore both; the
	// fail-closed wrapper (package failclosed) decides by them.
	Rule    string
	OnError OnError

	// Guess is the guess a Guesses op looks for and records: a keyed hash
	// of a guessed secret, never the secret. Guesses only; never 0.
	Guess uint64
	// FreeOnRepeat ops are what a repeated guess does not pay for: when
	// the batch's Guesses op finds its guess remembered, the op is
	// evaluated as usual (it still denies when its cost does not fit) and
	// not spent.
	FreeOnRepeat bool
}

// OnError is what the fail-closed wrapper does with an op when the store
// cannot answer. The zero value is the strict local fallback.
type OnError uint8

const (
	// OnErrorLocal decides the op on an in-process store with the limit
	// divided by the fleet size.
	OnErrorLocal OnError = iota
	// OnErrorClosed denies the op (the check is slowed for a second).
	OnErrorClosed
	// OnErrorOpen allows the op without counting it.
	OnErrorOpen
)

// Result is what one Op found, and what it left behind.
type Result struct {
	// Allowed reports whether the op fits on its own. An enforced op that
	// fits is spent only when every enforced op of its batch fits.
	Allowed bool
	// Spent reports whether the op's cost was spent.
	Spent bool
	// Remaining is how many whole units are left after this call: after the
	// spend when Spent, as found otherwise. Never negative.
	Remaining int64
	// RetryAfter is how long until Cost units would fit. Zero when
	// Allowed; zero for a Counter, which only a reset lifts.
	RetryAfter time.Duration
	// ResetAfter is how long until the key is back to full (a Rate key) or
	// forgotten (a Counter key, its Hold).
	ResetAfter time.Duration
	// Count is a Counter's count after this call. Zero for a Rate.
	Count int64
	// Degraded reports that the op was decided by the fail-closed
	// fallback, not by the store itself.
	Degraded bool
	// Repeat reports that a Guesses op found its guess remembered. For a
	// Guesses op, Count is how many guesses it found remembered and
	// ResetAfter how long until the last of those is forgotten: what a
	// Peek of the account's memory reads.
	Repeat bool
}

// Refund gives back what a check spent, once its attempt proved legitimate.
type Refund struct {
	Key  string
	Kind Kind
	// Amount is given back from a Rate key's arrival time (Cost×Interval);
	// the key never goes below full. A Counter is reset, unless Confirm is
	// set: then its count stays and it is kept for at least Amount from now.
	// A Guesses key is forgotten, every guess of it, unless Confirm is
	// set: then its Guess is remembered for at least Amount from now.
	Amount time.Duration
	// Confirm, on a Counter, records that the failures it counts were
	// reported: the key keeps its count and lives for Amount at least, so
	// that confirmed state outlasts what only unreported checks left.
	// On a Guesses key, it records that Guess failed: kept for Amount.
	// Ignored for a Rate.
	Confirm bool
	// Guess is the guess a confirming Guesses refund keeps. Guesses only.
	Guess uint64
	// Local reports that the fail-closed fallback made the spend, so the
	// wrapper gives it back there. Stores ignore it.
	Local bool
	// Member is the network a Familiar refund makes familiar to its key's
	// account for Amount (familiar.go). Familiar only.
	Member string
}

// Store is guardian's security store. Implementations are safe for
// concurrent use, and evaluate every batch against their own clock.
type Store interface {
	// Do evaluates ops and fills res (len(res) must equal len(ops)). If every
	// enforced op that is not Soft fits, every enforced op that fits is
	// spent; if any does not fit, no enforced op is. Shadow ops are spent
	// whenever they fit on their own. Keys within one batch must be
	// distinct.
	Do(ctx context.Context, ops []Op, res []Result) error
	// Peek evaluates ops like Do and spends nothing.
	Peek(ctx context.Context, ops []Op, res []Result) error
	// Refund applies refunds; a key that no longer exists is left alone.
	Refund(ctx context.Context, refunds []Refund) error
	// Delete removes keys; absent keys are ignored.
	Delete(ctx context.Context, keys ...string) error
	// MarkOnce sets key for ttl if it is not set, and reports whether this
	// call set it; when it did, it applies refunds as Refund does. It is how
	// an attempt id is accepted only once, and how a success report gives
	// back what its check spent without a second round trip. A bounded
	// store with no room for key returns ErrFull having applied refunds all
	// the same (they take no room): the caller decides whether an attempt
	// nothing could record counts.
	MarkOnce(ctx context.Context, key string, ttl time.Duration, refunds ...Refund) (bool, error)
}

// ErrBadBatch reports ops that no store can evaluate: an unknown kind, a
// non-positive interval, burst or limit, a negative cost, a Guesses op with
// a cost above 1, a zero guess, a limit above MaxGuesses or a second one in
// its batch, or len(res) != len(ops). It is a programming error in the caller, never a store failure.
var ErrBadBatch = errors.New("store: bad batch")

// ErrFull reports that a bounded store has no room for a new key, even after
// evicting what it may. Do and Peek never return it (an op on a new key is
// denied instead); MarkOnce does, since it cannot tell "marked before" from
// "no room".
var ErrFull = errors.New("store: full")

// ErrBadReply reports a store answer guardian cannot read: a malformed
// script reply. Implementations wrap it, so that the fail-closed wrapper
// counts it as a script error.
var ErrBadReply = errors.New("store: bad reply")

// ValidateRefunds checks refunds for what ErrBadBatch names: an empty key,
// a negative amount, an unknown kind, a confirming Guesses refund without
// a guess or a Familiar refund without a valid member.
func ValidateRefunds(refunds []Refund) error {
	for i := range refunds {
		r := &refunds[i]
		if r.Key == "" || r.Amount < 0 || (r.Kind != Rate && r.Kind != Counter && r.Kind != Guesses && r.Kind != Familiar) ||
			(r.Kind == Guesses && r.Confirm && r.Guess == 0) {
			return fmt.Errorf("refund %d: %w", i, ErrBadBatch)
		}
		if r.Kind == Familiar && !ValidMember(r.Member) {
			return fmt.Errorf("refund %d: %w", i, ErrBadBatch)
		}
	}
	return nil
}

// Validate checks ops and res for the errors ErrBadBatch names. Stores call
// it before touching any state.
func Validate(ops []Op, res []Result) error {
	if len(ops) != len(res) {
		return ErrBadBatch
	}
	if err := validateFamiliar(ops); err != nil {
		return err
	}
	guesses := 0
	for i := range ops {
		op := &ops[i]
		if op.Key == "" || op.Cost < 0 {
			return ErrBadBatch
		}
		switch op.Kind {
		case Familiar:
		case Distinct:
			if err := validateDistinct(op); err != nil {
				return err
			}
		case Rate:
			if op.Interval <= 0 || op.Burst <= 0 {
				return ErrBadBatch
			}
		case Counter:
			if op.Limit <= 0 || op.Hold <= 0 {
				return ErrBadBatch
			}
		case Guesses:
			guesses++
			if op.Limit <= 0 || op.Limit > MaxGuesses || op.Hold <= 0 || op.Cost > 1 || op.Guess == 0 || guesses > 1 || op.When != Always {
				return ErrBadBatch
			}
		default:
			return ErrBadBatch
		}
	}
	return nil
}

// RepeatOf returns the index of the Guesses op of ops and whether res says
// it found its guess remembered; -1 when ops has none. Stores call it to
// know which FreeOnRepeat ops a batch spends.
func RepeatOf(ops []Op, res []Result) (int, bool) {
	for i := range ops {
		if ops[i].Kind == Guesses {
			return i, res[i].Repeat
		}
	}
	return -1, false
}
