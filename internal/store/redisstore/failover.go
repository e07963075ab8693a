package redisstore

import "github.com/redis/go-redis/v9"

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
