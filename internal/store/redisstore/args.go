package redisstore

import (
	"strconv"
	"sync"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// maxSpan caps every span and count handed to the scripts, 2^50 µs (about
// 35 years), far beyond any real limit. Lua numbers are doubles, exact up to
// 2^53: the time since the epoch (about 2^50.7 µs) plus two capped spans
// stays exact. A larger interval, burst, cost, limit or hold saturates: it
// denies, or holds, as long as any guardian rule could ask.
const maxSpan = 1 << 50

// The scripts' string arguments, boxed once: an interface holding a string
// variable costs an allocation each time it is made.
var (
	argDo, argPeek                          any = "do", "peek"
	argRate, argCounter, argFamiliar        any = "r", "c", "f"
	argEnforce, argToll, argSoft, argShadow any = "enforce", "toll", "soft", "shadow"
	// kindArgs are the kinds of conditional ops, by Kind and When.
	kindArgs = [...][3]any{
		store.Rate:     {argRate, "r+", "r-"},
		store.Counter:  {argCounter, "c+", "c-"},
		store.Distinct: {"d", "d+", "d-"},
	}
	// argSub is a distinct op's sub-window entry.
	argSub, argZero any = "h", int64(0)
	// The give-back entries: microseconds off a rate key, units off a
	// counter, keep a counter longer, forget, put on a familiar list.
	argRefundRate, argRefundCounter, argConfirm, argForget, argAddFamiliar any = "r", "c", "k", "x", "f"
)

// giveback is one entry of the give-back step: how is argRefundRate,
// argRefundCounter, argConfirm, argForget or argAddFamiliar, amount its
// microseconds or units, spec argAddFamiliar's "hold:member" instead.
type giveback struct {
	key    string
	how    any
	amount int64
	spec   string
}

// refundEntries converts refunds to give-back entries.
func refundEntries(refunds []store.Refund) ([]giveback, error) {
	if err := store.ValidateRefunds(refunds); err != nil {
		return nil, err
	}
	entries := make([]giveback, len(refunds))
	for i, r := range refunds {
		e := giveback{key: r.Key, how: argForget}
		switch {
		case r.Kind == store.Rate:
			// Truncated: a refund never gives back more than was spent.
			e.how, e.amount = argRefundRate, min(r.Amount.Microseconds(), maxSpan)
		case r.Kind == store.Familiar:
			e.how, e.spec = argAddFamiliar, strconv.FormatInt(micros(r.Amount), 10)+":"+r.Member
		case r.Confirm:
			e.how, e.amount = argConfirm, micros(r.Amount)
		}
		entries[i] = e
	}
	return entries, nil
}

// appendGiveback appends the key of each entry to keys and its how and
// amount to args, as the give-back and once scripts take them.
func appendGiveback(keys []string, args []any, entries []giveback) ([]string, []any) {
	for _, e := range entries {
		keys = append(keys, e.key)
		if e.how == argAddFamiliar {
			args = append(args, e.how, e.spec)
			continue
		}
		args = append(args, e.how, e.amount)
	}
	return keys, args
}

// encodeOps builds the do script's KEYS and ARGV for ops.
func encodeOps(mode string, now any, ops []store.Op) ([]string, []any) {
	return appendOps(make([]string, 0, len(ops)), make([]any, 0, 2+7*len(ops)), mode, now, ops)
}

// appendOps appends the do script's KEYS and ARGV for ops to keys and args.
func appendOps(keys []string, args []any, mode string, now any, ops []store.Op) ([]string, []any) {
	m := argDo
	if mode != "do" {
		m = argPeek
	}
	args = append(args, now, m)
	for i := range ops {
		op := &ops[i]
		keys = append(keys, op.Key)
		role := argEnforce
		switch {
		case op.Shadow:
			role = argShadow
		case op.Soft:
			role = argSoft
		case op.Toll:
			role = argToll
		}
		switch op.Kind {
		case store.Familiar:
			args = append(args, argFamiliar, role, int64(0), int64(0), op.Member, int64(0), int64(0))
			continue
		case store.Distinct:
			args = append(args, kindArgs[op.Kind][op.When], role, op.Cost, micros(op.Interval), op.Member, min(op.Limit, maxSpan), int64(0))
			for j := range store.DistinctSlots {
				keys = append(keys, distinctSlotKey(op.Key, j))
				args = append(args, argSub, argEnforce, argZero, argZero, argZero, argZero, argZero)
			}
			continue
		}
		kind := kindArgs[op.Kind][op.When]
		p := paramsOf(op)
		args = append(args, kind, role, p.cost, p.interval, p.burst, p.limit, p.hold)
	}
	return keys, args
}

// distinctSlotKey is the key of sub-window j of the Distinct key k: k with
// a suffix, so in k's slot.
func distinctSlotKey(k string, j int) string {
	return k + ":" + strconv.Itoa(j)
}

// batch is the KEYS and ARGV of one script call, reused through batches:
// the client copies both into its command, so they are free again once the
// call returns.
type batch struct {
	keys []string
	args []any
}

var batches = sync.Pool{New: func() any { return &batch{} }}

// maxPooledOps bounds the batches kept for reuse.
const maxPooledOps = 64

// release clears b, so that it holds no key, and returns it to the pool.
func (b *batch) release() {
	if cap(b.keys) > maxPooledOps {
		return
	}
	clear(b.keys)
	clear(b.args)
	b.keys, b.args = b.keys[:0], b.args[:0]
	batches.Put(b)
}

// params are an op's numbers as the do script takes them: whole
// microseconds, capped at maxSpan.
type params struct {
	cost, interval, burst, limit, hold int64
}

// paramsOf converts op for the do script. An interval or hold that is not a
// whole number of microseconds counts as the next one, so a limit is never
// looser than configured; spans saturate at maxSpan, and a cost that could
// never fit stays one that never fits.
func paramsOf(op *store.Op) params {
	switch op.Kind {
	case store.Rate:
		t := micros(op.Interval)
		return params{
			cost:     min(op.Cost, maxSpan/t+1),
			interval: t,
			burst:    min(op.Burst, maxSpan/t),
		}
	default:
		return params{
			cost:  min(op.Cost, maxSpan+1),
			limit: min(op.Limit, maxSpan),
			hold:  micros(op.Hold),
		}
	}
}

// micros converts a positive duration to whole microseconds, rounding up,
// capped at maxSpan.
func micros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond != 0 {
		us++
	}
	return min(us, maxSpan)
}
