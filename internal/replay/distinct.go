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
// Fingerprints come from a fixed hash, so a replay is deterministic even
// when it estimates. The zero value is ready to use.
type distinct struct {
	exact map[uint64]struct{}
	// hll is nil while the count is exact.
	hll []uint8
}

// add counts key, and reports whether it was certainly not seen before:
// always false once the count is an estimate.
func (d *distinct) add(key string) bool {
	h := fingerprint(key)
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

// fingerprint is FNV-1a of key followed by the splitmix64 finaliser, whose
// well-mixed bits the sketch needs.
func fingerprint(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}
