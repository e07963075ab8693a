package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/store"
)

var (
	//go:embed listput.lua
	listPutLua string
	//go:embed listdelete.lua
	listDeleteLua string
	//go:embed listload.lua
	listLoadLua string

	listPutScript    = redis.NewScript(listPutLua)
	listDeleteScript = redis.NewScript(listDeleteLua)
	listLoadScript   = redis.NewScript(listLoadLua)
)

var _ store.Lists = (*Store)(nil)

// listKeys are the Redis keys of the list set under key (listput.lua): key
// carries the hash tag that keeps them in one Cluster slot.
func listKeys(key string) []string {
	return []string{key + ":entries", key + ":expiry", key + ":version", key + ":count"}
}

// ListPut adds e to the set under key in one script call (listput.lua).
func (s *Store) ListPut(ctx context.Context, key string, e store.ListEntry, max int) error {
	if key == "" || e.ID == "" {
		return store.ErrBadBatch
	}
	exp := "+inf"
	if !e.Expires.IsZero() {
		exp = strconv.FormatInt(e.Expires.UnixMicro(), 10)
	}
	n, err := listPutScript.Run(ctx, s.c, listKeys(key), s.nowArg(), e.ID, e.Data, exp, max).Int64()
	switch {
	case err != nil:
		return fmt.Errorf("redisstore: list put: %w", err)
	case n == 0:
		return store.ErrFull
	}
	return nil
}

// ListDelete removes the entry of id from the set under key in one script
// call.
func (s *Store) ListDelete(ctx context.Context, key, id string) (bool, error) {
	n, err := listDeleteScript.Run(ctx, s.c, listKeys(key), id).Int64()
	if err != nil {
		return false, fmt.Errorf("redisstore: list delete: %w", err)
	}
	return n == 1, nil
}

// ListLoad reads the set under key in one script call, which answers with
// the version alone while version is the set's.
func (s *Store) ListLoad(ctx context.Context, key, version string) (store.ListSnapshot, bool, error) {
	reply, err := listLoadScript.Run(ctx, s.c, listKeys(key)[:3], s.nowArg(), version).StringSlice()
	if err != nil {
		return store.ListSnapshot{}, false, fmt.Errorf("redisstore: list load: %w", err)
	}
	if len(reply) == 0 || (len(reply)-1)%3 != 0 {
		return store.ListSnapshot{}, false, fmt.Errorf("%w: list load: %d values", ErrBadReply, len(reply))
	}
	snap := store.ListSnapshot{Version: reply[0]}
	if snap.Version == version {
		return snap, false, nil
	}
	for i := 1; i < len(reply); i += 3 {
		e := store.ListEntry{ID: reply[i], Data: []byte(reply[i+2])}
		if reply[i+1] != "inf" {
			us, err := strconv.ParseFloat(reply[i+1], 64)
			if err != nil || math.IsNaN(us) {
				return store.ListSnapshot{}, false, fmt.Errorf("%w: list load: expiry %q", ErrBadReply, reply[i+1])
			}
			e.Expires = time.UnixMicro(int64(us))
		}
		snap.Entries = append(snap.Entries, e)
	}
	slices.SortFunc(snap.Entries, func(a, b store.ListEntry) int { return strings.Compare(a.ID, b.ID) })
	return snap, true, nil
}
