package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrUnsupported reports a Redis older than guardian supports: 6.2, the
// oldest release its scripts and eviction settings are tested on.
var ErrUnsupported = errors.New("redisstore: Redis 6.2 or later needed")

// serverVersion returns redis_version from an INFO server reply, or "".
func serverVersion(info string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// supported reports whether Redis version v (major.minor.patch) is 6.2 or
// later.
func supported(v string) bool {
	major, rest, _ := strings.Cut(v, ".")
	minor, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > 6 || ma == 6 && mi >= 2
}

// Warm checks that Redis is recent enough (every master of a Cluster) and
// loads the scripts into it, opening a connection on the way, so that the
// first checks after a start meet neither a dial nor a NOSCRIPT round trip
// within their store deadline, and, with Config.Functions, the do script's
// library where Redis takes it (functions.go). An older Redis is
// ErrUnsupported.
func (s *Store) Warm(ctx context.Context) error {
	check := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("redisstore: INFO server: %w", err)
		}
		if v := serverVersion(info); !supported(v) {
			return fmt.Errorf("%w: %s at %s is %q", ErrUnsupported, "redis_version", c.Options().Addr, v)
		}
		return nil
	}
	var err error
	switch c := s.c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	}
	if err != nil {
		return err
	}
	for _, sc := range []*redis.Script{doScript, givebackScript, onceScript, membersScript} {
		if err := sc.Load(ctx, s.c).Err(); err != nil {
			return fmt.Errorf("redisstore: load scripts: %w", err)
		}
	}
	// The library is optional (functions.go): the script serves without
	// it.
	_ = s.loadFunctions(ctx)
	return nil
}
