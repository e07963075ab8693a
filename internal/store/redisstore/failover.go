package redisstore

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

// InFailover reports whether err is a reply Redis gives while a failover or
// a slot move is under way, never a lasting fault:
//
//   - READONLY: the node was a master and is now a replica (Sentinel or
//     Cluster promoted another). The client drops the connection; the next
//     one goes to the master the Sentinels name.
//   - LOADING: a restarted or newly promoted node is still loading its data.
//   - MASTERDOWN: a replica that lost its master.
//   - MOVED, ASK: a Cluster slot lives, or is moving, elsewhere; the Cluster
//     client follows and refreshes its slot map.
//   - TRYAGAIN: a multi-key call met a slot half-migrated.
//   - CLUSTERDOWN: the Cluster is electing a new master for a slot.
//
// A call that fails so is decided by the fallback like any store failure,
// and guardian keeps trying the store: it comes back once the failover ends.
func InFailover(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	if _, ok := redis.IsAskError(err); ok {
		return true
	}
	return redis.IsReadOnlyError(err) || redis.IsLoadingError(err) ||
		redis.IsMasterDownError(err) || redis.IsTryAgainError(err) ||
		redis.IsClusterDownError(err)
}

// followCluster is a hook of a Cluster client that makes it follow a
// failover at once. The client learns where slots live from MOVED replies,
// and otherwise reloads its slot map only when the map is ten seconds old;
// a master that died answers no MOVED, so for those ten seconds every call
// of its slots would fail on the dead address. After any call that failed
// for another reason than an error reply (a refused dial, a timeout), or
// for a failover reply, the hook asks for a reload: go-redis runs one at a
// time, at most one every 200 ms, in the background.
type followCluster struct {
	c *redis.ClusterClient
}

var _ redis.Hook = followCluster{}

func (followCluster) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h followCluster) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.after(err)
		return err
	}
}

func (h followCluster) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil {
				err = e
				break
			}
		}
		h.after(err)
		return err
	}
}

// after asks for a reload of the slot map when err says a node may be
// gone or a slot may have moved.
func (h followCluster) after(err error) {
	if err == nil || errors.Is(err, redis.Nil) {
		return
	}
	var reply redis.Error
	if errors.As(err, &reply) && !InFailover(err) {
		return // the node answered: it is there
	}
	h.c.ReloadState(context.Background())
}
