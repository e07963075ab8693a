package main

import (
	"context"
	"encoding/base64"
	"math/rand/v2"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/store"
)

// storeBatch sends w's next login batch straight to the store, as guardian's
// engine would for a new user under the built-in login rules: the
// account's and the address's rate, the account's hard-stop count. No HTTP,
// no engine: what is left is the store's round trip.
func (d *driver) storeBatch(w *worker) error {
	account, ip := randomSubject(w.rng), randomSubject(w.rng)
	ops := [3]store.Op{
		{Key: keys.StoreKey(account, "login-account"), Cost: 1, Limit: store.Rate{Interval: time.Minute, Burst: 5}},
		{Key: keys.StoreKey(ip, "login-ip"), Cost: 1, Limit: store.Rate{Interval: 20 * time.Second, Burst: 30}},
		{Key: keys.StoreKey(account, "login-hard-stop"), Cost: 1, Limit: store.Counter{Max: 100, Hold: 90 * 24 * time.Hour}},
	}
	var res [3]store.Result
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	defer cancel()
	return d.store.Do(ctx, ops[:], res[:])
}

// randomSubject returns a subject name shaped like guardian's hashed ones.
func randomSubject(rng *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}
