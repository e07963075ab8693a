package hll

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRegister(t *testing.T) {
	tests := []struct {
		h         uint64
		p         uint
		wantIndex uint64
		wantRank  uint8
	}{
		{0xFFF0_0000_0000_0000, 12, 0xFFF, 53}, // no bit set below the index
		{0x0008_0000_0000_0000, 12, 0, 1},      // the first bit below it set
		{0x0004_0000_0000_0000, 12, 0, 2},
		{0x8000_0000_0000_0001, 4, 8, 60},
	}
	for _, tt := range tests {
		if i, r := Register(tt.h, tt.p); i != tt.wantIndex || r != tt.wantRank {
			t.Errorf("Register(%#x, %d) = %d, %d; want %d, %d", tt.h, tt.p, i, r, tt.wantIndex, tt.wantRank)
		}
	}
}

// TestEstimate: exact for none, within 5% from 100 to a million for 4,096
// registers.
func TestEstimate(t *testing.T) {
	regs := make([]uint8, 1<<12)
	if got := Estimate(regs); got != 0 {
		t.Fatalf("Estimate of empty registers = %d, want 0", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 0
	for _, want := range []int{1, 10, 100, 1_000, 10_000, 100_000, 1_000_000} {
		for ; n < want; n++ {
			i, r := Register(rng.Uint64(), 12)
			regs[i] = max(regs[i], r)
		}
		got := Estimate(regs)
		if d := float64(got-int64(want)) / float64(want); (want >= 100 && (d > 0.05 || d < -0.05)) || (want < 100 && got != int64(want)) {
			t.Errorf("%d hashes: estimate %d", want, got)
		}
	}
}

// TestUnion: a union raised hash by hash, several times over the same
// registers (as merges of overlapping HyperLogLogs raise them), estimates
// exactly what Estimate does of its registers, at every size from none to
// a million for 16,384 registers; so does one raised to any rank a
// register can hold, where the sum of 2^-rank needs every bit.
func TestUnion(t *testing.T) {
	regs := make([]uint8, 1<<14)
	u := NewUnion(regs)
	if got := u.Estimate(); got != 0 {
		t.Fatalf("empty union's estimate = %d, want 0", got)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	n := 0
	for _, want := range []int{1, 10, 100, 1_000, 10_000, 100_000, 1_000_000} {
		for ; n < want; n++ {
			h := rng.Uint64()
			for range 1 + n%3 {
				u.Raise(Register(h, 14))
			}
		}
		if got, all := u.Estimate(), Estimate(regs); got != all {
			t.Errorf("%d hashes: the union estimates %d, Estimate of its registers %d", want, got, all)
		}
		if d := float64(u.Estimate()-int64(want)) / float64(want); (want >= 100 && (d > 0.03 || d < -0.03)) || (want < 100 && u.Estimate() != int64(want)) {
			t.Errorf("%d hashes: estimate %d", want, u.Estimate())
		}
	}
	high := NewUnion(make([]uint8, 1<<14))
	for i := range 100_000 {
		high.Raise(uint64(rng.IntN(1<<14)), uint8(1+rng.IntN(65)))
		if i%997 == 0 {
			if got, all := high.Estimate(), Estimate(high.regs); got != all {
				t.Fatalf("after %d raises to any rank: the union estimates %d, Estimate of its registers %d", i+1, got, all)
			}
		}
	}
}

// TestMaxBytes: every pair of bytes below 128, in every byte of a word,
// beside neighbours that would take a borrow.
func TestMaxBytes(t *testing.T) {
	for a := range uint64(128) {
		for b := range uint64(128) {
			for shift := uint(0); shift < 64; shift += 8 {
				// neighbours 0 in a and 127 in b: the subtraction's worst case
				x, y := a<<shift, b<<shift|0x7f7f7f7f7f7f7f7f&^(0xff<<shift)
				want := max(a, b)<<shift | 0x7f7f7f7f7f7f7f7f&^(0xff<<shift)
				if got := maxBytes(x, y); got != want {
					t.Fatalf("maxBytes(%#x, %#x) = %#x, want %#x", x, y, got, want)
				}
			}
		}
	}
}

// TestUnionMerge: merging dense registers raises each to the higher of the
// two, whatever their length's remainder by 8, and the estimate follows,
// through sparse raises before, between and after the merges and estimates
// in between.
func TestUnionMerge(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, m := range []int{16, 1 << 14, 1<<10 + 5} {
		regs, a, b := make([]uint8, m), make([]uint8, m), make([]uint8, m)
		for i := range m {
			a[i], b[i] = uint8(rng.IntN(66)), uint8(rng.IntN(66))
		}
		a[0], b[0] = 65, 0
		a[1], b[1] = 0, 65
		want := make([]uint8, m)
		u := NewUnion(regs)
		raise := func(i int, r uint8) {
			u.Raise(uint64(i), r)
			want[i] = max(want[i], r)
		}
		raise(3, 9)
		u.Merge(a)
		for i := range m {
			want[i] = max(want[i], a[i])
		}
		raise(2, 66)
		u.Merge(b)
		for i := range m {
			want[i] = max(want[i], b[i])
		}
		first := u.Estimate()
		raise(m-1, 66)
		raise(5, 1)
		if !slices.Equal(regs, want) {
			t.Fatalf("%d registers: %v, want %v", m, regs, want)
		}
		if got, all := u.Estimate(), Estimate(slices.Clone(regs)); got != all || got < first {
			t.Errorf("%d registers: the union estimates %d (%d before the last raises), Estimate of its registers %d", m, got, first, all)
		}
	}
}

func BenchmarkUnionMerge(b *testing.B) {
	regs, dense := make([]uint8, 1<<14), make([]uint8, 1<<14)
	rng := rand.New(rand.NewPCG(9, 10))
	for i := range dense {
		dense[i] = uint8(rng.IntN(8))
	}
	u := NewUnion(regs)
	for b.Loop() {
		u.Merge(dense)
	}
}

func BenchmarkEstimate(b *testing.B) {
	regs := make([]uint8, 1<<14)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 50 {
		i, r := Register(rng.Uint64(), 14)
		regs[i] = max(regs[i], r)
	}
	for b.Loop() {
		Estimate(regs)
	}
}
