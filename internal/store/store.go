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
	"math"
	"time"
)

// Op is one limit to evaluate for a check: a key held to a Limit, the Cost
// the check would spend on it, and the Role it plays in its batch. The zero
// value is not a valid Op: it has no key and no limit.
type Op struct {
	// Key is the full store key, already hashed (keys.StoreKey).
	Key string
	// Cost is the number of units to spend; 0 only evaluates.
	Cost int64
	// Role says how the op takes part in its batch's decision; the zero
	// value enforces.
	Role Role
	// Limit is what Key is held to, one of Rate, Counter, Guesses,
	// Familiar and Distinct.
	Limit Limit
	// When makes an op conditional on the batch's Familiar op
	// (familiar.go); the zero value counts always.
	When When
	// Member is the network a Familiar op looks for, the member a
	// Distinct op adds, or the source a Counter op's cost is attributed
	// to (attribute.go), "" for none. Familiar, Distinct and Counter only.
	Member string
	// Except is the key of a Distinct whose members a Distinct op does
	// not count (distinct.go): "" for none. It must share the op's
	// Redis Cluster slot. Distinct only.
	Except string
	// Guess is the guess a Guesses op looks for and records: a keyed hash
	// of a guessed secret, never the secret. Guesses only; never 0.
	Guess uint64
	// FreeOnRepeat ops are what a repeated guess does not pay for: when
	// the batch's Guesses op finds its guess remembered, the op is
	// evaluated as usual (it still denies when its cost does not fit) and
	// not spent.
	FreeOnRepeat bool
	// OnRepeat marks the batch's allowance of free repeats (see Guesses):
	// a soft Rate op that a repeat spends, and that bounds how often a
	// repeat is free.
	OnRepeat bool

	// Rule names the rule the op belongs to, "" for an op of a feature of
	// the check rather than of a rule (an account's memory of guesses, its
	// familiar list), and OnError says what to do with the op when the
	// store cannot answer. Stores ignore both; the fail-closed wrapper
	// (package failclosed) decides and counts by them.
	Rule    string
	OnError OnError
}

// Role says how an op takes part in its batch's all-or-nothing decision.
// The zero value is Enforce.
type Role uint8

const (
	// Enforce ops decide the batch: they are spent only when every
	// enforced op fits, and one that does not fit denies the batch.
	Enforce Role = iota
	// Soft ops are enforced ops that never deny the batch (a rule whose
	// action is challenge: the check goes ahead behind a challenge). A soft
	// op is spent with the batch when it fits, and left alone when it does
	// not.
	Soft
	// Toll ops are enforced ops that are spent, when every Toll op of the
	// batch fits, even if another op denies the batch: what a check that
	// keeps knocking on a slowed key pays, so that polling a drained key is
	// not free. A batch that a Toll op denies spends no Toll.
	Toll
	// Shadow ops are evaluated and spent on their own: they never take part
	// in the all-or-nothing decision of the enforced ops.
	Shadow
)

// Denies reports whether an op of role r denies its batch when it does not
// fit: Enforce and Toll ops do, Soft and Shadow ops never.
func (r Role) Denies() bool { return r == Enforce || r == Toll }

// Limit is what an op's key is held to, a value apart from the key (as
// go-redis/redis_rate keeps its Limit): one type per kind of state. Rate,
// Counter, Guesses, Familiar and Distinct are the limits; no other package
// implements it. Limits are values, safe to share between ops and
// goroutines.
type Limit interface {
	// Divided returns the limit each of n deciders that decide alone
	// applies so that together they stay within this one (n ≥ 1): what
	// the fail-closed fallback holds a key to while a fleet of n instances
	// cannot reach the store. Every number stays at least 1.
	Divided(n int64) Limit
	// valid reports whether op, whose limit it is, is one a store can
	// evaluate (ErrBadBatch).
	valid(op *Op) bool
}

// Rate is a GCRA bucket: the state is one theoretical arrival time. Cost
// units fit when the key, after spending them, stays within the tolerance
// Interval×Burst; over any span t a key admits at most Burst + t/Interval
// units.
type Rate struct {
	// Interval is the emission interval, per/limit.
	Interval time.Duration
	// Burst is how many units fit back to back after idle.
	Burst int64
}

// Divided spreads the burst over n deciders and slows each n times.
func (l Rate) Divided(n int64) Limit {
	return Rate{Interval: l.Interval * time.Duration(n), Burst: max(1, l.Burst/n)}
}

func (l Rate) valid(*Op) bool { return l.Interval > 0 && l.Burst > 0 }

// Counter is a consecutive-failure count: Cost units fit while the count
// plus Cost stays at or below Max. Each spend keeps the key for Hold at
// least; a Confirm settlement keeps it longer. A spend of an op with a
// Member attributes its cost to that member (attribute.go), so that a Lift
// of the member takes back what it spent and nothing else.
type Counter struct {
	Max  int64
	Hold time.Duration
}

// Divided divides Max among n deciders.
func (l Counter) Divided(n int64) Limit { return Counter{Max: max(1, l.Max/n), Hold: l.Hold} }

func (l Counter) valid(op *Op) bool {
	return l.Max > 0 && l.Hold > 0 && (op.Member == "" || ValidMember(op.Member))
}

// Guesses is an account's memory of its last failed guesses: up to Max
// guesses (Op.Guess values), each remembered for Hold at least from the last
// check that made it, and longer once a Confirm settlement keeps it. An op
// finds whether its Guess is remembered (Result.Repeat) and never denies the
// batch, whatever its role. When the batch is spent, a Cost of 1 records
// the guess as the most recent, forgetting the oldest beyond Max. When it
// finds its guess remembered, every FreeOnRepeat op of the batch is
// evaluated and not spent. A batch holds at most one Guesses op.
//
// A batch may also hold one allowance of free repeats, a soft Rate op
// marked OnRepeat: when the guess is remembered and the allowance fits, the
// repeat is free as above and the allowance is spent with the batch; when
// it does not fit, the repeat is not free (the Guesses op's Result is
// Capped, not Repeat) and nothing is waived; when the guess is not
// remembered, the allowance is evaluated and not spent. So a constant or
// wrong fingerprint cannot make every guess free: at most the allowance's
// burst and refill of them.
type Guesses struct {
	Max  int64
	Hold time.Duration
}

// Divided is l itself: a memory of guesses is not shared out.
func (l Guesses) Divided(int64) Limit { return l }

func (l Guesses) valid(op *Op) bool {
	return l.Max > 0 && l.Max <= MaxGuesses && l.Hold > 0 && op.Cost <= 1 && op.Guess != 0 && op.When == Always
}

// MaxGuesses is the most guesses a Guesses op may remember (its Max).
const MaxGuesses = 8

// Distinct counts the distinct members a key saw over a sliding window of
// DistinctSlots steps of Step (distinct.go): it fits while the count is at
// most Max. A spend makes the sub-window it adds to end at most Hold from
// now (at least 7/8 of it, distinct.go), never past the window; a
// ConfirmDistinct settlement keeps the key's sub-windows until they leave
// it. A Hold of 0 keeps them until they leave the window from the start.
type Distinct struct {
	Step time.Duration
	Max  int64
	Hold time.Duration
}

// Divided divides Max among n deciders.
func (l Distinct) Divided(n int64) Limit {
	return Distinct{Step: l.Step, Max: max(1, l.Max/n), Hold: l.Hold}
}

func (l Distinct) valid(op *Op) bool {
	return ValidMember(op.Member) && l.Step > 0 && l.Max > 0 && l.Hold >= 0 && op.Cost <= 1 && op.Role != Toll &&
		op.Except != op.Key
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
	// Capped reports that a Guesses op found its guess remembered but the
	// batch's allowance of free repeats (Op.OnRepeat) was spent: the
	// repeat is not free, Repeat is false, and nothing was waived.
	Capped bool
}

// Settlement is what a report does to one key its check spent on, once the
// attempt's outcome is known: built beside the op that spent (as
// rate.Reservation cancels from the object that reserved), and named for
// what it does.
type Settlement struct {
	Key    string
	Action Action
	// Span is how much a GiveBack takes off a Rate key's arrival time, how
	// long a Confirm keeps a count (see Max) or a guess at least from now,
	// and how long a Learn keeps its member familiar.
	Span time.Duration
	// Max, on the Confirm of a Counter, makes the time it is kept grow
	// with its count: ConfirmedHold(Span, Max, count). 0 keeps it for Span.
	Max int64
	// Guess is the guess a Confirm keeps on a Guesses key; 0 confirms a
	// Counter.
	Guess uint64
	// Member is the network a Learn makes familiar to its key's account
	// (familiar.go), or the source whose failures a Lift takes off a
	// Counter (attribute.go). Learn and Lift only.
	Member string
	// Local reports that the fail-closed fallback made the spend, so the
	// wrapper settles it there. Stores ignore it.
	Local bool
}

// Action is what a Settlement does to its key. A key that no longer exists
// is left alone by every action but Learn, which creates it.
type Action uint8

const (
	// GiveBack takes Span off a Rate key's arrival time: a count: failures
	// reservation given back, never beyond full, so that what others spent
	// on the key stays spent. Span counts as the next whole microsecond,
	// as an Interval does: a GiveBack of Cost×Interval gives back exactly
	// what a spend of one unit took, and never more than a spend of Cost.
	GiveBack Action = iota + 1
	// Reset removes a Counter key: the run of failures it counted ends.
	Reset
	// Confirm records that what a key counts was reported a failure: a
	// Counter (Guess 0) keeps its count and lives at least
	// ConfirmedHold(Span, Max, count) from now, count being the one it
	// holds then; a Guesses key keeps Guess for Span at least. So confirmed
	// state outlasts what only unreported checks left.
	Confirm
	// Learn puts Member on its key's familiar list for Span from now
	// (familiar.go).
	Learn
	// Forget removes a key: every guess of a Guesses key.
	Forget
	// Lift takes off a Counter key the count attributed to Member, and
	// forgets the attribution; the key goes once its count is 0
	// (attribute.go). A Counter whose count is not attributed to Member
	// keeps it.
	Lift
	// Add puts Member in the current sub-window of a Distinct key whose
	// Step is Span (distinct.go), creating the key: how a success names
	// an account that a Distinct op with that key as its Except stops
	// counting.
	Add
	// ConfirmDistinct records that what a Distinct key whose Step is Span
	// counts was reported a failure: each sub-window it holds is kept until
	// it leaves the window, instead of for its spends' Hold (distinct.go).
	// So a network's confirmed failures outlast what only unreported checks
	// left.
	ConfirmDistinct
)

// ConfirmedHold is how long a Confirm of span and max keeps a count of
// count: span × count ÷ max, so that a count is held longer the higher it
// is, and all of span at max or beyond (or when max is 0). Stores reckon it
// in whole microseconds, span rounded up, the quotient rounded down, as
// float64 arithmetic does it (so Redis's Lua agrees to the microsecond).
func ConfirmedHold(span time.Duration, max, count int64) time.Duration {
	us := span / time.Microsecond
	if span%time.Microsecond != 0 && us < math.MaxInt64/time.Microsecond {
		us++
	}
	if max > 0 && count < max {
		us = time.Duration(math.Floor(float64(us) * float64(count) / float64(max)))
	}
	return us * time.Microsecond
}

// Store is guardian's security store. Implementations are safe for
// concurrent use, and evaluate every batch against their own clock.
type Store interface {
	// Do evaluates ops and fills res (len(res) must equal len(ops)). If every
	// op whose role denies fits, every enforced op that fits is spent; if
	// any does not fit, no enforced op is but the tolls, as Toll says.
	// Shadow ops are spent whenever they fit on their own. Keys within one
	// batch must be distinct.
	Do(ctx context.Context, ops []Op, res []Result) error
	// Peek evaluates ops like Do and spends nothing.
	Peek(ctx context.Context, ops []Op, res []Result) error
	// Settle applies settlements.
	Settle(ctx context.Context, settlements []Settlement) error
	// Delete removes keys; absent keys are ignored.
	Delete(ctx context.Context, keys ...string) error
	// Familiar returns the members of the familiar list at key
	// (familiar.go) that are not forgotten, in no particular order; none
	// when the key is absent.
	Familiar(ctx context.Context, key string) ([]string, error)
	// MarkOnce sets key for ttl if it is not set, and reports whether this
	// call set it; when it did, it applies settlements as Settle does. It
	// is how an attempt id is accepted only once, and how a report settles
	// what its check spent without a second round trip. A bounded store
	// with no room for key returns ErrFull having applied settlements all
	// the same (they take no room): the caller decides whether an attempt
	// nothing could record counts.
	MarkOnce(ctx context.Context, key string, ttl time.Duration, settlements ...Settlement) (bool, error)
}

// ErrBadBatch reports ops or settlements that no store can evaluate: an op
// without a key or a limit, of an unknown role, a negative cost, a limit
// whose numbers are not positive, a Guesses op with a cost above 1, a zero
// guess, a Max above MaxGuesses or a second one in its batch, a settlement
// of an unknown action, or len(res) != len(ops). It is a programming error
// in the caller, never a store failure.
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

// ErrUnavailable reports a change the store could not take because it is
// not answering (the fail-closed wrapper's primary is failing): an admin
// call must not be reported done when it is not.
var ErrUnavailable = errors.New("store: unavailable")

// ValidateSettlements checks settlements for what ErrBadBatch names: an
// empty key, a negative span or max, an unknown action, a Learn, Lift or
// Add without a valid member, or an Add or a ConfirmDistinct without a
// span.
func ValidateSettlements(settlements []Settlement) error {
	for i := range settlements {
		s := &settlements[i]
		if s.Key == "" || s.Span < 0 || s.Max < 0 || s.Action < GiveBack || s.Action > ConfirmDistinct ||
			(s.Action == Learn || s.Action == Lift || s.Action == Add) && !ValidMember(s.Member) ||
			(s.Action == Add || s.Action == ConfirmDistinct) && s.Span <= 0 {
			return fmt.Errorf("settlement %d: %w", i, ErrBadBatch)
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
	guesses, allowances := 0, 0
	for i := range ops {
		op := &ops[i]
		if op.Key == "" || op.Cost < 0 || op.Role > Shadow || op.Limit == nil || !op.Limit.valid(op) {
			return ErrBadBatch
		}
		if _, ok := op.Limit.(Guesses); ok {
			guesses++
		}
		if op.OnRepeat {
			if _, rate := op.Limit.(Rate); !rate || op.Role != Soft || op.When != Always || op.FreeOnRepeat {
				return ErrBadBatch
			}
			allowances++
		}
	}
	if guesses > 1 || allowances > 1 || allowances > guesses {
		return ErrBadBatch
	}
	return nil
}

// RepeatOf returns the index of the Guesses op of ops and whether res says
// it found its guess remembered; -1 when ops has none. Stores call it to
// know which FreeOnRepeat ops a batch spends.
func RepeatOf(ops []Op, res []Result) (int, bool) {
	for i := range ops {
		if _, ok := ops[i].Limit.(Guesses); ok {
			return i, res[i].Repeat
		}
	}
	return -1, false
}
