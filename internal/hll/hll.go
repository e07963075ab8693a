// Package hll is the HyperLogLog arithmetic guardian's distinct counts
// share (Flajolet, Fusy, Gandouet and Meunier, 2007): which register a
// 64-bit hash sets and to what, and the estimate of a set of registers. The
// registers themselves, and how they are kept, belong to their users: the
// embedded store's distinct rules and replay's distinct keys.
package hll

import (
	"math"
	"math/bits"
)

// Hash returns a well-mixed 64-bit hash of s, the same in every process:
// FNV-1a followed by the splitmix64 finaliser. It is not keyed: give it
// members an attacker cannot choose (guardian's members are keyed hashes
// already), so that nobody can aim members at one register. Being fixed,
// it makes an estimate a function of its members alone, run after run.
func Hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// Register returns the register of 2^p that the 64-bit hash h sets, and
// its rank: one more than the leading zeros of the hash's other bits. h
// must be well mixed; p is from 4 to 16.
func Register(h uint64, p uint) (index uint64, rank uint8) {
	return h >> (64 - p), uint8(bits.LeadingZeros64(h<<p|1<<(p-1)) + 1)
}

// Estimate returns the estimated number of distinct hashes behind regs,
// whose length is the number of registers: linear counting while some are
// empty and the raw estimate is at most 2.5 times their number, the
// harmonic mean otherwise. 64-bit hashes need no large-range correction.
// The standard error is about 1.04/√len(regs).
func Estimate(regs []uint8) int64 {
	m := float64(len(regs))
	sum, zeros := 0.0, 0
	for _, r := range regs {
		if int(r) < len(inversePowers) {
			sum += inversePowers[r]
		} else {
			sum += math.Ldexp(1, -int(r))
		}
		if r == 0 {
			zeros++
		}
	}
	e := 0.7213 / (1 + 1.079/m) * m * m / sum
	if e <= 2.5*m && zeros > 0 {
		e = m * math.Log(m/float64(zeros))
	}
	return int64(math.Round(e))
}

// inversePowers holds 2^-r for every rank a 64-bit hash can give, so that
// Estimate, run on every check of a distinct rule, adds table entries
// instead of calling math.Ldexp per register.
var inversePowers = func() (t [66]float64) {
	for r := range t {
		t[r] = math.Ldexp(1, -r)
	}
	return t
}()
