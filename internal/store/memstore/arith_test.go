package memstore

import (
	"math"
	"testing"
	"time"
)

// Fixed instants and spans for the arithmetic tables, in microseconds.
const (
	t0     = int64(1_795_946_400_000_000) // 2026-11-29T10:00:00Z
	sec    = int64(1_000_000)
	minute = 60 * sec
)

func TestGCRA(t *testing.T) {
	const year1 = int64(-62_135_596_800_000_000) // time.Time{} in Unix µs
	tests := []struct {
		name                      string
		tat, now, interval, burst int64
		cost                      int64
		wantTAT                   int64
		wantOK                    bool
		wantRetry                 int64
	}{
		{"absent key", t0, t0, minute, 5, 1, t0 + minute, true, 0},
		{"fifth of a burst of five", t0 + 4*minute, t0, minute, 5, 1, t0 + 5*minute, true, 0},
		{"sixth of a burst of five", t0 + 5*minute, t0, minute, 5, 1, t0 + 6*minute, false, minute},
		{"one interval later", t0 + 5*minute, t0 + minute, minute, 5, 1, t0 + 6*minute, true, 0},
		{"half an interval later", t0 + 5*minute, t0 + 30*sec, minute, 5, 1, t0 + 6*minute, false, 30 * sec},
		{"arrival time in the past", t0 - time.Hour.Microseconds(), t0, minute, 5, 1, t0 + minute, true, 0},
		{"cost two", t0 + 2*minute, t0, minute, 5, 2, t0 + 4*minute, true, 0},
		{"cost two, one unit left", t0 + 4*minute, t0, minute, 5, 2, t0 + 6*minute, false, minute},
		{"cost above burst", t0, t0, minute, 5, 6, t0 + 6*minute, false, minute},
		{"cost zero, empty", t0, t0, minute, 5, 0, t0, true, 0},
		{"cost zero, exhausted", t0 + 5*minute, t0, minute, 5, 0, t0 + 5*minute, true, 0},
		{"cost zero, beyond tolerance", t0 + 10*minute, t0, minute, 5, 0, t0 + 10*minute, false, 5 * minute},
		{"one microsecond short", t0 + 5*minute, t0 + minute - 1, minute, 5, 1, t0 + 6*minute, false, 1},
		{"huge cost saturates", t0, t0, minute, 5, math.MaxInt64, t0 + maxSpan, false, maxSpan - 5*minute},
		{"huge tolerance saturates", t0, t0, 1 << 40, 1 << 40, 1, t0 + 1<<40, true, 0},
		{"clock before 1970", year1, year1, minute, 5, 1, year1 + minute, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotTAT, gotOK, gotRetry := gcra(tt.tat, tt.now, tt.interval, tt.burst, tt.cost)
			if gotTAT != tt.wantTAT || gotOK != tt.wantOK || gotRetry != tt.wantRetry {
				t.Errorf("gcra = (%d, %v, %d), want (%d, %v, %d)",
					gotTAT-tt.now, gotOK, gotRetry, tt.wantTAT-tt.now, tt.wantOK, tt.wantRetry)
			}
		})
	}
}

func TestGCRALeft(t *testing.T) {
	tests := []struct {
		name                      string
		tat, now, interval, burst int64
		wantRemaining, wantReset  int64
	}{
		{"absent key", t0, t0, minute, 5, 5, 0},
		{"arrival time in the past", t0 - minute, t0, minute, 5, 5, 0},
		{"one spent", t0 + minute, t0, minute, 5, 4, minute},
		{"all spent", t0 + 5*minute, t0, minute, 5, 0, 5 * minute},
		{"four spent and a microsecond", t0 + 4*minute + 1, t0, minute, 5, 0, 4*minute + 1},
		{"rounds down", t0 + 5*minute, t0 + 90*sec, minute, 5, 1, 3*minute + 30*sec},
		{"one microsecond from full", t0 + 5*minute, t0 + 5*minute - 1, minute, 5, 4, 1},
		{"beyond tolerance", t0 + 10*minute, t0, minute, 5, 0, 10 * minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotRemaining, gotReset := gcraLeft(tt.tat, tt.now, tt.interval, tt.burst)
			if gotRemaining != tt.wantRemaining || gotReset != tt.wantReset {
				t.Errorf("gcraLeft = (%d, %d), want (%d, %d)", gotRemaining, gotReset, tt.wantRemaining, tt.wantReset)
			}
		})
	}
}

func TestCount(t *testing.T) {
	tests := []struct {
		name             string
		cur, limit, cost int64
		wantNext         int64
		wantOK           bool
	}{
		{"absent key", 0, 3, 1, 1, true},
		{"reaching the limit", 2, 3, 1, 3, true},
		{"at the limit", 3, 3, 1, 4, false},
		{"cost zero at the limit", 3, 3, 0, 3, true},
		{"cost above what is left", 1, 3, 3, 4, false},
		{"huge cost saturates", 1, 3, math.MaxInt64, maxSpan, false},
		{"negative count reads as zero", -5, 3, 1, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotNext, gotOK := count(tt.cur, tt.limit, tt.cost)
			if gotNext != tt.wantNext || gotOK != tt.wantOK {
				t.Errorf("count = (%d, %v), want (%d, %v)", gotNext, gotOK, tt.wantNext, tt.wantOK)
			}
		})
	}
}

func TestMicros(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{time.Nanosecond, 1},
		{999 * time.Nanosecond, 1},
		{time.Microsecond, 1},
		{1001 * time.Nanosecond, 2},
		{10 * time.Second / 3, 3_333_334},
		{time.Minute, 60_000_000},
		{math.MaxInt64, 9_223_372_036_854_776},
	}
	for _, tt := range tests {
		if got := micros(tt.d); got != tt.want {
			t.Errorf("micros(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestDuration(t *testing.T) {
	tests := []struct {
		us   int64
		want time.Duration
	}{
		{0, 0},
		{1, time.Microsecond},
		{60_000_000, time.Minute},
		{math.MaxInt64 / 1000, 9_223_372_036_854_775_000},
		{math.MaxInt64/1000 + 1, math.MaxInt64},
		{maxSpan, math.MaxInt64},
	}
	for _, tt := range tests {
		if got := duration(tt.us); got != tt.want {
			t.Errorf("duration(%d) = %d, want %d", tt.us, got, tt.want)
		}
	}
}

// sink keeps benchmark results alive.
var sink int64

func BenchmarkGCRA(b *testing.B) {
	b.ReportAllocs()
	now := t0
	var tat, acc int64
	for b.Loop() {
		now += 7
		next, ok, retry := gcra(tat, now, minute, 5, 1)
		if ok {
			tat = next
		}
		remaining, reset := gcraLeft(tat, now, minute, 5)
		acc += retry + remaining + reset
	}
	sink = acc
}
