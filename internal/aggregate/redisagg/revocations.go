package redisagg

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/revocation"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// The keys of the fleet's token revocations, in one Cluster slot.
const (
	// RevokedKey is a sorted set of revoked jtis by until when each is
	// refused, in milliseconds.
	RevokedKey = "guardian:v1:{revoked}:tokens"
	// RevokedVersionKey names the state of RevokedKey: it changes with
	// every revocation, so an instance reads the set only when it changed.
	RevokedVersionKey = "guardian:v1:{revoked}:version"
)

// revokedKeep is how long the keys outlive the last revocation: past the
// longest token life, so no revocation goes before its token.
const revokedKeep = tokens.MaxTTL + 24*time.Hour

var (
	//go:embed revoke.lua
	revokeLua    string
	revokeScript = redis.NewScript(revokeLua)
	//go:embed revoked.lua
	revokedLua    string
	revokedScript = redis.NewScript(revokedLua)
)

// Revocations is a revocation.Shared on Redis: RevokedKey holds every
// revocation in force and RevokedVersionKey its version; a revocation is
// one script call that also forgets the revocations whose tokens expired,
// and a read one more, which carries the set only when its version
// changed. It holds no state and is safe for concurrent use.
type Revocations struct {
	c redis.UniversalClient
}

var _ revocation.Shared = (*Revocations)(nil)

// NewRevocations returns Revocations on c, which the caller keeps and
// closes.
func NewRevocations(c redis.UniversalClient) *Revocations { return &Revocations{c: c} }

// Add records e.
func (r *Revocations) Add(ctx context.Context, e revocation.Entry) error {
	if e.JTI == "" || e.Until.IsZero() {
		return fmt.Errorf("%w: a revocation without a jti or an expiry", ErrBadBatch)
	}
	err := revokeScript.Run(ctx, r.c, []string{RevokedKey, RevokedVersionKey}, e.JTI, e.Until.UnixMilli(), revokedKeep.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("redisagg: revoke: %w", err)
	}
	return nil
}

// Load returns the revocations in force, unless version is theirs.
func (r *Revocations) Load(ctx context.Context, version string) (revocation.Snapshot, bool, error) {
	reply, err := revokedScript.Run(ctx, r.c, []string{RevokedKey, RevokedVersionKey}, version).Result()
	if err != nil {
		return revocation.Snapshot{}, false, fmt.Errorf("redisagg: revocations: %w", err)
	}
	return parseRevocations(reply, version)
}

// parseRevocations reads the reply of revoked.lua.
func parseRevocations(reply any, held string) (revocation.Snapshot, bool, error) {
	vals, ok := reply.([]any)
	if !ok || len(vals) < 1 || len(vals) > 2 {
		return revocation.Snapshot{}, false, fmt.Errorf("%w: want a version and the revocations, got %T of %v", ErrBadReply, reply, reply)
	}
	version, ok := vals[0].(string)
	if !ok {
		return revocation.Snapshot{}, false, fmt.Errorf("%w: version %T", ErrBadReply, vals[0])
	}
	snap := revocation.Snapshot{Version: version}
	if len(vals) == 1 {
		if version != held {
			return revocation.Snapshot{}, false, fmt.Errorf("%w: version %q without its revocations", ErrBadReply, version)
		}
		return snap, false, nil
	}
	pairs, ok := vals[1].([]any)
	if !ok || len(pairs)%2 != 0 {
		return revocation.Snapshot{}, false, fmt.Errorf("%w: want jti, until pairs, got %T of %v", ErrBadReply, vals[1], vals[1])
	}
	for i := 0; i < len(pairs); i += 2 {
		jti, ok1 := pairs[i].(string)
		until, ok2 := pairs[i+1].(string)
		ms, err := strconv.ParseFloat(until, 64)
		if !ok1 || !ok2 || err != nil {
			return revocation.Snapshot{}, false, fmt.Errorf("%w: revocation %d: %v, %v", ErrBadReply, i/2, pairs[i], pairs[i+1])
		}
		snap.Entries = append(snap.Entries, revocation.Entry{JTI: jti, Until: time.UnixMilli(int64(ms)).UTC()})
	}
	return snap, true, nil
}
