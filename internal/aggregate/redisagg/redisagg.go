// Package redisagg shares what the instances of a fleet pool through Redis:
// the global failure counts (package aggregate, Shared), each instance's
// heartbeat (package fleet, Fleet), shadow tallies (Shadow) and revoked
// service tokens (package revocation, Revocations).
//
// A bucket is two keys with the hash tag {agg}, so that every bucket of
// every flow lives in one Redis Cluster slot and a sync is one script call:
//
//	guardian:v1:{agg}:<flow>:<width>:<index>     the fleet total (a string)
//	guardian:v1:{agg}:<flow>:<width>:<index>:by  each instance's total (a hash)
//
// Each sync is one call of a Lua script (sync.lua) that raises the
// instance's totals, adds the differences to the fleet totals and reads the
// fleet totals asked for, whatever the traffic behind it. Keys expire the
// Batch's TTL after they last changed. Flows are the contract's flow names
// and instances random ids: no account, address or key reaches Redis.
//
// Heartbeats live under the hash tag {fleet}: a sorted set of instance ids
// by the time each was last seen (InstancesKey) and a hash of their
// heartbeats (HeartbeatsKey). A heartbeat is one script call (beat.lua)
// that also forgets the instances not seen for the TTL, so neither key
// grows with restarts; a listing is one more (instances.lua). Times are
// Redis's own clock.
//
// Revoked tokens live under the hash tag {revoked}: a sorted set of jtis by
// until when each is refused (RevokedKey) and a version that changes with
// each revocation (RevokedVersionKey). A revocation is one script call
// (revoke.lua) that also forgets the revocations whose tokens expired; an
// instance's read, every half second, is a GET of the version, and the set
// only when the version it holds is out of date. A jti is a random token
// id, never a person's.
package redisagg

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/store"
)

var (
	//go:embed sync.lua
	syncLua    string
	syncScript = redis.NewScript(syncLua)
)

// ErrBadReply reports a script reply that is not one non-negative integer
// per bucket read: a wrong script or a wrong server, never a count.
var ErrBadReply = fmt.Errorf("redisagg: %w", store.ErrBadReply)

// ErrBadBatch reports a batch Sync cannot send: sets without an instance,
// a negative total, or a width or TTL under a millisecond.
var ErrBadBatch = errors.New("redisagg: bad batch")

// Shared is an aggregate.Shared on Redis. It holds no state: any number of
// them, in any number of processes, may share one Redis. It is safe for
// concurrent use.
type Shared struct {
	c redis.UniversalClient
}

var _ aggregate.Shared = (*Shared)(nil)

// New returns a Shared on c: a *redis.Client, a failover client or a
// *redis.ClusterClient. c should honour context deadlines, as the clients
// of redisstore.Open do, or a sync against a stalled Redis outlasts the
// Aggregate's SyncTimeout (it blocks the Aggregate's loop, never a check).
// The caller keeps ownership of c and closes it.
func New(c redis.UniversalClient) *Shared {
	return &Shared{c: c}
}

// Key returns the key of the fleet total of bucket index of flow, for
// buckets of the given width; the instances' totals are under Key + ":by".
func Key(flow string, width time.Duration, index int64) string {
	return "guardian:v1:{agg}:" + flow + ":" + width.String() + ":" + strconv.FormatInt(index, 10)
}

// Sync applies b.Sets and reads b.Reads into b.Totals in one script call.
// A batch with neither makes no call.
func (s *Shared) Sync(ctx context.Context, b *aggregate.Batch) error {
	b.Totals = b.Totals[:0]
	if len(b.Sets) == 0 && len(b.Reads) == 0 {
		return nil
	}
	if err := validate(b); err != nil {
		return err
	}
	keys := make([]string, 0, 2*len(b.Sets)+len(b.Reads))
	args := make([]any, 0, 3+len(b.Sets))
	args = append(args, b.Instance, b.TTL.Milliseconds(), len(b.Sets))
	for _, t := range b.Sets {
		k := Key(t.Flow, b.Width, t.Index)
		keys = append(keys, k, k+":by")
		args = append(args, t.N)
	}
	for _, r := range b.Reads {
		keys = append(keys, Key(r.Flow, b.Width, r.Index))
	}
	reply, err := syncScript.Run(ctx, s.c, keys, args...).Result()
	if err != nil {
		return fmt.Errorf("redisagg: %w", err)
	}
	b.Totals, err = parseTotals(reply, len(b.Reads), b.Totals)
	return err
}

// validate checks b for what ErrBadBatch names.
func validate(b *aggregate.Batch) error {
	if len(b.Sets) > 0 && b.Instance == "" {
		return fmt.Errorf("%w: sets without an instance", ErrBadBatch)
	}
	if b.Width < time.Millisecond || (len(b.Sets) > 0 && b.TTL < time.Millisecond) {
		return fmt.Errorf("%w: width %v, ttl %v: want at least 1ms", ErrBadBatch, b.Width, b.TTL)
	}
	for _, t := range b.Sets {
		if t.N < 0 {
			return fmt.Errorf("%w: negative total %d", ErrBadBatch, t.N)
		}
	}
	return nil
}

// parseTotals appends to dst the want non-negative integers of reply.
func parseTotals(reply any, want int, dst []int64) ([]int64, error) {
	vals, ok := reply.([]any)
	if !ok {
		return dst, fmt.Errorf("%w: want an array, got %T", ErrBadReply, reply)
	}
	if len(vals) != want {
		return dst, fmt.Errorf("%w: want %d totals, got %d", ErrBadReply, want, len(vals))
	}
	for i, v := range vals {
		n, ok := v.(int64)
		if !ok || n < 0 {
			return dst[:0], fmt.Errorf("%w: total %d: want a non-negative integer, got %v (%T)", ErrBadReply, i, v, v)
		}
		dst = append(dst, n)
	}
	return dst, nil
}
