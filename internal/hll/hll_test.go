package hll

import (
	"math/rand/v2"
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
