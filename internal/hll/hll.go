// Package hll is the HyperLogLog arithmetic guardian's distinct counts
// share (Flajolet, Fusy, Gandouet and Meunier, 2007): which register a
// 64-bit hash sets and to what, and the estimate of a set of registers. The
// registers themselves, and how they are kept, belong to their users: the
// embedded store's distinct rules and replay's distinct keys.
package hll

import (
	"encoding/binary"
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
	h := histogram(regs)
	return h.estimate(len(regs))
}

// ranks counts registers by rank.
type ranks [256]int32

// histogram counts regs by rank, in four histograms so that neighbouring
// registers of one rank do not wait on each other's increment: cheaper per
// register than adding 2^-rank.
func histogram(regs []uint8) ranks {
	var hs [4]ranks
	i := 0
	for ; i+4 <= len(regs); i += 4 {
		hs[0][regs[i]]++
		hs[1][regs[i+1]]++
		hs[2][regs[i+2]]++
		hs[3][regs[i+3]]++
	}
	for ; i < len(regs); i++ {
		hs[0][regs[i]]++
	}
	for r := range hs[0] {
		hs[0][r] += hs[1][r] + hs[2][r] + hs[3][r]
	}
	return hs[0]
}

// estimate is Estimate of m registers counted by h.
func (h *ranks) estimate(m int) int64 {
	sum := 0.0
	for r, n := range h {
		if n > 0 {
			sum += float64(n) * math.Ldexp(1, -r)
		}
	}
	return estimate(m, sum, int(h[0]))
}

// estimate is Estimate of m registers whose 2^-rank add up to sum, zeros
// of them empty.
func estimate(m int, sum float64, zeros int) int64 {
	fm := float64(m)
	e := 0.7213 / (1 + 1.079/fm) * fm * fm / sum
	if e <= 2.5*fm && zeros > 0 {
		e = fm * math.Log(fm/float64(zeros))
	}
	return int64(math.Round(e))
}

// Union is the union of HyperLogLogs being merged into one set of
// registers. It keeps the registers' count by rank as sparse entries raise
// them, so a union of a few sparse HyperLogLogs costs what their entries
// do, not what its registers do; merging a dense one counts every register
// again at the next estimate. Its estimate is Estimate's of its registers,
// exactly.
type Union struct {
	regs  []uint8
	ranks ranks
	// stale is set once Merge raised registers without counting them.
	stale bool
}

// NewUnion returns the empty union over regs, all zero, which it then
// owns.
func NewUnion(regs []uint8) Union {
	u := Union{regs: regs}
	u.ranks[0] = int32(len(regs))
	return u
}

// Raise raises register i to rank, if it is lower.
func (u *Union) Raise(i uint64, rank uint8) {
	old := u.regs[i]
	if rank <= old {
		return
	}
	u.regs[i] = rank
	u.ranks[old]--
	u.ranks[rank]++
}

// Merge raises every register of u to dense's, which has as many, each
// below 128 (as every rank Register gives is).
func (u *Union) Merge(dense []uint8) {
	regs := u.regs[:len(dense)]
	i := 0
	for ; i+8 <= len(dense); i += 8 {
		a, b := binary.LittleEndian.Uint64(regs[i:]), binary.LittleEndian.Uint64(dense[i:])
		binary.LittleEndian.PutUint64(regs[i:], maxBytes(a, b))
	}
	for ; i < len(dense); i++ {
		regs[i] = max(regs[i], dense[i])
	}
	u.stale = true
}

// maxBytes is the byte-wise maximum of a and b, each of whose bytes is
// below 128 (a rank is at most 65): a byte of (a | 0x80…) − b keeps its
// high bit exactly where a's byte is at least b's, and no borrow crosses
// into the next byte.
func maxBytes(a, b uint64) uint64 {
	const high = 0x8080808080808080
	ge := ((a | high) - b) & high
	m := (ge >> 7) * 0xFF
	return a&m | b&^m
}

// Estimate is Estimate of the union's registers.
func (u *Union) Estimate() int64 {
	if u.stale {
		u.ranks, u.stale = histogram(u.regs), false
	}
	return u.ranks.estimate(len(u.regs))
}
