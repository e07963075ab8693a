package redisagg

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/fleet"
)

// The keys of the fleet's heartbeats, in one Cluster slot.
const (
	// InstancesKey is a sorted set of instance ids by when each was last
	// seen, in milliseconds of the store's clock.
	InstancesKey = "guardian:v1:{fleet}:instances"
	// HeartbeatsKey is a hash of each instance's last heartbeat, JSON.
	HeartbeatsKey = "guardian:v1:{fleet}:heartbeats"
)

var (
	//go:embed beat.lua
	beatLua    string
	beatScript = redis.NewScript(beatLua)
	//go:embed instances.lua
	instancesLua    string
	instancesScript = redis.NewScript(instancesLua)
)

// Fleet is a fleet.Shared on Redis: two keys hold every instance's last
// heartbeat, each instance writes its own in one script call, and a listing
// is one more. It holds no state and is safe for concurrent use.
type Fleet struct {
	c redis.UniversalClient
}

var _ fleet.Shared = (*Fleet)(nil)

// NewFleet returns a Fleet on c, which the caller keeps and closes.
func NewFleet(c redis.UniversalClient) *Fleet { return &Fleet{c: c} }

// heartbeat is what the store keeps of an Instance: LastSeen is the score.
type heartbeat struct {
	Version       string    `json:"version"`
	RulesHash     string    `json:"rules_hash"`
	RulesLoadedAt time.Time `json:"rules_loaded_at"`
	Store         string    `json:"store"`
}

// Beat records in as seen now by Redis's clock, and forgets every instance
// not seen for ttl; both keys expire ttl after the last heartbeat of any
// instance.
func (f *Fleet) Beat(ctx context.Context, in fleet.Instance, ttl time.Duration) error {
	if in.ID == "" || ttl < time.Millisecond {
		return fmt.Errorf("%w: heartbeat of id %q, ttl %v", ErrBadBatch, in.ID, ttl)
	}
	b, err := json.Marshal(heartbeat{Version: in.Version, RulesHash: in.RulesHash, RulesLoadedAt: in.RulesLoadedAt, Store: in.Store})
	if err != nil {
		return fmt.Errorf("redisagg: heartbeat: %w", err)
	}
	if err := beatScript.Run(ctx, f.c, []string{InstancesKey, HeartbeatsKey}, in.ID, b, ttl.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("redisagg: heartbeat: %w", err)
	}
	return nil
}

// List returns the instances seen within ttl by Redis's clock.
func (f *Fleet) List(ctx context.Context, ttl time.Duration) ([]fleet.Instance, error) {
	reply, err := instancesScript.Run(ctx, f.c, []string{InstancesKey, HeartbeatsKey}, ttl.Milliseconds()).Result()
	if err != nil {
		return nil, fmt.Errorf("redisagg: instances: %w", err)
	}
	return parseInstances(reply)
}

// Leave forgets the instance called id.
func (f *Fleet) Leave(ctx context.Context, id string) error {
	_, err := f.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, InstancesKey, id)
		p.HDel(ctx, HeartbeatsKey, id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisagg: leave: %w", err)
	}
	return nil
}

// parseInstances reads the reply of instances.lua: id, time seen, heartbeat,
// for each instance. An instance whose heartbeat is missing (removed between
// the two keys' updates) is left out.
func parseInstances(reply any) ([]fleet.Instance, error) {
	vals, ok := reply.([]any)
	if !ok || len(vals)%3 != 0 {
		return nil, fmt.Errorf("%w: want id, time, heartbeat triples, got %T of %v", ErrBadReply, reply, reply)
	}
	out := make([]fleet.Instance, 0, len(vals)/3)
	for i := 0; i < len(vals); i += 3 {
		id, ok1 := vals[i].(string)
		seen, ok2 := vals[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%w: instance %d: want an id and a time, got %T, %T", ErrBadReply, i/3, vals[i], vals[i+1])
		}
		ms, err := strconv.ParseFloat(seen, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: instance %d: time %q", ErrBadReply, i/3, seen)
		}
		raw, ok := vals[i+2].(string)
		if !ok {
			continue
		}
		var hb heartbeat
		if err := json.Unmarshal([]byte(raw), &hb); err != nil {
			// One instance's unreadable heartbeat (another version's
			// format) leaves out that instance, never the whole fleet.
			continue
		}
		out = append(out, fleet.Instance{
			ID:            id,
			Version:       hb.Version,
			RulesHash:     hb.RulesHash,
			RulesLoadedAt: hb.RulesLoadedAt,
			Store:         hb.Store,
			LastSeen:      time.UnixMilli(int64(ms)).UTC(),
		})
	}
	return out, nil
}
