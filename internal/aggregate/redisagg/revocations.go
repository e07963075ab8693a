package redisagg

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
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
)

// Revocations is a revocation.Shared on Redis: RevokedKey holds every
// revocation in force and RevokedVersionKey its version; a revocation is
// one script call that also forgets the revocations whose tokens expired.
// A read is one GET of the version, and only when it changed one MULTI of
// the version and the set, so an instance polling a set that does not
// change costs Redis a GET a round. It holds no state and is safe for
// concurrent use.
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

// Load returns the revocations stored, unless version is theirs. Those
// whose tokens expired since the last revocation are among them; the
// caller drops them by its clock.
func (r *Revocations) Load(ctx context.Context, version string) (revocation.Snapshot, bool, error) {
	held, err := r.c.Get(ctx, RevokedVersionKey).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return revocation.Snapshot{}, false, fmt.Errorf("redisagg: revocations: %w", err)
	}
	if held == version {
		return revocation.Snapshot{Version: version}, false, nil
	}
	// The version and the set of one moment: a revocation between the GET
	// above and here shows as a version this caller reads again next time.
	var v *redis.StringCmd
	var set *redis.ZSliceCmd
	_, err = r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		v = p.Get(ctx, RevokedVersionKey)
		set = p.ZRangeByScoreWithScores(ctx, RevokedKey, &redis.ZRangeBy{Min: "-inf", Max: "+inf"})
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return revocation.Snapshot{}, false, fmt.Errorf("redisagg: revocations: %w", err)
	}
	snap := revocation.Snapshot{Version: v.Val()}
	for _, z := range set.Val() {
		jti, ok := z.Member.(string)
		if !ok {
			return revocation.Snapshot{}, false, fmt.Errorf("%w: revocation member %T", ErrBadReply, z.Member)
		}
		snap.Entries = append(snap.Entries, revocation.Entry{JTI: jti, Until: time.UnixMilli(int64(z.Score)).UTC()})
	}
	return snap, snap.Version != version, nil
}
