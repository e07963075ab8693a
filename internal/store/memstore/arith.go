package memstore

import (
	"math"
	"math/bits"
	"time"
)

// The arithmetic below is the whole of guardian's limit semantics, written as
// pure functions over integer microseconds so that the Redis scripts can
// mirror it line by line. Instants (tat, now) are Unix microseconds; spans
// (interval, tolerance, cost×interval) saturate at maxSpan, beyond any real
// limit, so that no product or sum can wrap around and make a huge cost fit.

// maxSpan caps every span, about 146,000 years in microseconds. An instant
// plus maxSpan still fits in an int64 for any clock within that range of 1970.
const maxSpan = 1 << 62

// gcra evaluates cost units against a Rate key whose theoretical arrival time
// is tat (pass now for an absent key), at now, with emission interval T and
// tolerance τ = T×burst:
//
//	base   = max(tat, now)
//	newTAT = base + cost×T
//	ok     = newTAT − now ≤ τ
//	retry  = 0 if ok, else newTAT − now − τ
//
// newTAT is the key's state if the cost is spent; the caller spends only when
// ok. With cost 0 the key is only evaluated, and ok holds whenever the key is
// within its tolerance. A cost above burst never fits.
func gcra(tat, now, interval, burst, cost int64) (newTAT int64, ok bool, retry int64) {
	tau := mulSpan(interval, burst)
	rel := min(max(tat-now, 0), maxSpan)
	newRel := addSpan(rel, mulSpan(cost, interval))
	if newRel <= tau {
		return now + newRel, true, 0
	}
	return now + newRel, false, newRel - tau
}

// gcraLeft reports what a Rate key whose theoretical arrival time is tat has
// left at now:
//
//	remaining = clamp(floor((now + τ − max(tat, now)) / T), 0, burst)
//	reset     = max(tat − now, 0)
//
// remaining is in whole units; reset is how long until the key is full again,
// which is also how long the key needs to be kept.
func gcraLeft(tat, now, interval, burst int64) (remaining, reset int64) {
	tau := mulSpan(interval, burst)
	rel := min(max(tat-now, 0), maxSpan)
	left := tau - rel
	if left <= 0 {
		return 0, rel
	}
	return min(left/interval, burst), rel
}

// count evaluates cost units against a Counter key holding count (0 for an
// absent key):
//
//	next = count + cost
//	ok   = next ≤ limit
//
// next is the key's count if the cost is spent. A Counter's remaining units
// are max(limit − count, 0) over the count after the call.
func count(cur, limit, cost int64) (next int64, ok bool) {
	next = addSpan(min(max(cur, 0), maxSpan), cost)
	return next, next <= limit
}

// micros converts a positive duration to whole microseconds, rounding up, so
// that an interval is never shorter than configured and never zero.
func micros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond != 0 {
		us++
	}
	return us
}

// duration converts microseconds to a Duration, saturating rather than
// overflowing.
func duration(us int64) time.Duration {
	if us > math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}

// mulSpan multiplies two non-negative spans, saturating at maxSpan.
func mulSpan(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > maxSpan {
		return maxSpan
	}
	return int64(lo)
}

// addSpan adds two spans in [0, maxSpan], saturating at maxSpan.
func addSpan(a, b int64) int64 {
	if a > maxSpan-b {
		return maxSpan
	}
	return a + b
}
