package replay

import "github.com/guardian-sec/guardian/internal/hll"

const (
	// exactKeys is how many distinct keys a rule counts exactly; past it
	// the count becomes an estimate in fixed memory.
	exactKeys = 1 << 16
	// hllBits is the HyperLogLog precision: 2^14 registers, a standard
	// error of about 0.8%.
	hllBits = 14
)

// distinct counts the distinct keys a rule limited, in bounded memory: the
// 64-bit fingerprints of the first exactKeys keys are kept and counted
// exactly; from then on a HyperLogLog sketch of 16 KiB estimates the count.
// Fingerprints come from a fixed hash (hll.Hash), so a replay is
// deterministic even when it estimates. The zero value is ready to use.
type distinct struct {
	exact map[uint64]struct{}
	// hll is nil while the count is exact.
	hll []uint8
}

// add counts key, and reports whether it was certainly not seen before:
// always false once the count is an estimate.
func (d *distinct) add(key string) bool {
	h := hll.Hash(key)
	if d.hll != nil {
		d.addHLL(h)
		return false
	}
	if _, ok := d.exact[h]; ok {
		return false
	}
	if d.exact == nil {
		d.exact = make(map[uint64]struct{})
	}
	d.exact[h] = struct{}{}
	if len(d.exact) > exactKeys {
		d.hll = make([]uint8, 1<<hllBits)
		for f := range d.exact {
			d.addHLL(f)
		}
		d.exact = nil
	}
	return true
}

func (d *distinct) addHLL(h uint64) {
	i, rank := hll.Register(h, hllBits)
	d.hll[i] = max(d.hll[i], rank)
}

// count returns the number of distinct keys, and whether it is exact.
func (d *distinct) count() (n int64, exact bool) {
	if d.hll == nil {
		return int64(len(d.exact)), true
	}
	return hll.Estimate(d.hll), false
}
