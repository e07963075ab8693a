package tokens

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// verified remembers verified tokens, keyed by the token itself, with what
// verifying them gave (V). Only a token whose signature and claims were
// checked is ever put in, so a hit only has to check again what can change
// while the token stays the same: its times, whether the keys it was
// verified under are still those in force (cacheEntry.keys), and, for a
// service token, whether it was revoked. It is bounded and safe for
// concurrent use.
type verified[V any] struct {
	mu   sync.RWMutex
	m    map[string]cacheEntry[V]
	max  int
	hits atomic.Uint64 // for tests: how many lookups the cache answered
}

// cacheEntry is one verified token.
type cacheEntry[V any] struct {
	val V
	exp *jwt.NumericDate
	nbf *jwt.NumericDate
	// keys are the keys it was verified under: once other keys are in
	// force, it is verified again.
	keys *keyList
}

func newVerified[V any](max int) verified[V] {
	return verified[V]{max: max, m: make(map[string]cacheEntry[V])}
}

// get returns the entry for token, if there is one.
func (v *verified[V]) get(token string) (cacheEntry[V], bool) {
	v.mu.RLock()
	e, ok := v.m[token]
	v.mu.RUnlock()
	if ok {
		v.hits.Add(1)
	}
	return e, ok
}

// put remembers a verified token. When the cache is full it first drops
// every expired token, then, if that was not enough, an arbitrary eighth of
// the entries, so that the cost of a sweep is spread over many puts.
func (v *verified[V]) put(token string, e cacheEntry[V], now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.m) >= v.max {
		for k, old := range v.m {
			if !now.Before(old.exp.Time) {
				delete(v.m, k)
			}
		}
		for k := range v.m {
			if len(v.m) < v.max-v.max/8 {
				break
			}
			delete(v.m, k)
		}
	}
	v.m[token] = e
}
