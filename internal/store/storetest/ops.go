package storetest

import (
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// Rate returns a Rate op on key, for the tests of a store.
func Rate(key string, cost int64, interval time.Duration, burst int64) store.Op {
	return store.Op{Key: key, Cost: cost, Limit: store.Rate{Interval: interval, Burst: burst}}
}

// Counter returns a Counter op on key, for the tests of a store.
func Counter(key string, cost, limit int64, hold time.Duration) store.Op {
	return store.Op{Key: key, Cost: cost, Limit: store.Counter{Max: limit, Hold: hold}}
}

// Shadow returns op in shadow mode.
func Shadow(op store.Op) store.Op {
	op.Role = store.Shadow
	return op
}

// Soft returns op as a soft enforced op.
func Soft(op store.Op) store.Op {
	op.Role = store.Soft
	return op
}

// ops shortens a batch literal.
func ops(o ...store.Op) []store.Op { return o }

// rs shortens a results literal.
func rs(r ...store.Result) []store.Result { return r }

// Guesses returns a Guesses op on key recording guess g, remembering 3
// guesses for hold, for the tests of a store.
func Guesses(key string, g uint64, hold time.Duration) store.Op {
	return store.Op{Key: key, Cost: 1, Limit: store.Guesses{Max: 3, Hold: hold}, Guess: g}
}

// FreeOnRepeat returns op as one a repeated guess does not spend.
func FreeOnRepeat(op store.Op) store.Op {
	op.FreeOnRepeat = true
	return op
}

// Familiar returns a Familiar op on key looking for member.
func Familiar(key, member string) store.Op {
	return store.Op{Key: key, Limit: store.Familiar{}, Member: member}
}

// When returns op counting only as w says.
func When(op store.Op, w store.When) store.Op {
	op.When = w
	return op
}

// Toll returns op as a toll: spent whenever it fits.
func Toll(op store.Op) store.Op {
	op.Role = store.Toll
	return op
}

// Distinct returns a Distinct op on key adding member (cost 1) or only
// counting (cost 0), with sub-windows of step and limit.
func Distinct(key, member string, cost int64, step time.Duration, limit int64) store.Op {
	return store.Op{Key: key, Member: member, Cost: cost, Limit: store.Distinct{Step: step, Max: limit}}
}

// From returns the Counter op op with its cost attributed to member.
func From(op store.Op, member string) store.Op {
	op.Member = member
	return op
}
