// Package redisstore is guardian's security store on Redis, shared by every
// guardian instance of a fleet.
//
// Every batch is evaluated by a Lua script (do.lua) in one round trip, against
// the store's own clock (Redis TIME), so guardian nodes with skewed clocks
// agree. Every store key is a Redis key of its own (prelude.lua): a plain
// string holding a GCRA theoretical arrival time, a counter's count and
// deadline, or a mark's deadline, with an expiry (PX) just past that
// deadline. One op is a GET and, when spent, a SET: no hash sweeps and no
// TTL reads, and under maxmemory with maxmemory-policy volatile-ttl a full
// Redis evicts single keys, those that expire soonest (the least confirmed
// state), never a group of subjects at once.
//
// On a single Redis (a *redis.Client, including a Sentinel failover client) a
// batch is one script call and exactly all-or-nothing: when every hard
// enforced op fits, the enforced ops that fit are spent together (a Soft op
// that does not fit is left alone and denies nothing); when one does not,
// none is.
//
// On Redis Cluster (a *redis.ClusterClient) one script can only touch keys of
// one hash slot. A subject's keys are tagged by the subject ({subject}), so
// all of one subject's rules share a slot, but a check usually spans several
// subjects (account, IP prefix). Such a batch runs one script per slot, all
// pipelined in one round trip; each slot spends its own enforced ops when
// its hard ones fit. If some slot denied, a second pipelined step gives back
// the enforced ops the other slots spent, and the results report them not
// spent (cluster.go). Between the two steps a concurrent check can see a
// spend that is about to be given back, and be denied for it: the cluster
// errs towards denying, never towards admitting more than a limit allows. A
// counter given back keeps the later deadline its spend set. A member a
// Distinct op added to a HyperLogLog cannot be taken out: it stays counted,
// the strict side again. Toll ops stay paid unless a toll denied. Shadow ops
// are spent on their own, as on a single Redis. A batch within one slot (one
// subject) is one script call and exactly all-or-nothing.
//
// Keys reach the store already hashed (package keys); this package never
// sees a subject in clear.
package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/store"
)

var (
	//go:embed prelude.lua
	preludeLua string
	//go:embed do.lua
	doLua string
	//go:embed giveback.lua
	givebackLua string
	//go:embed once.lua
	onceLua string
	//go:embed familiar.lua
	familiarLua string
	//go:embed distinct.lua
	distinctLua string
	//go:embed members.lua
	membersLua string

	// doBody is the do script's text without scriptHead: the script's and
	// the function library's (functions.go).
	doBody         = preludeLua + familiarLua + distinctLua + doLua
	doScript       = redis.NewScript(scriptHead + doBody + "return main(callKeys, callArgs)\n")
	givebackScript = redis.NewScript(scriptHead + preludeLua + familiarLua + distinctLua + givebackLua)
	onceScript     = redis.NewScript(scriptHead + preludeLua + familiarLua + distinctLua + onceLua)
	membersScript  = redis.NewScript(scriptHead + preludeLua + familiarLua + membersLua)

	// The command that runs the do script by its SHA1, boxed once (evalDo).
	argEvalSha, doHash any = "evalsha", doScript.Hash()
)

// scriptHead starts every script's text: the call's KEYS and ARGV, kept
// before prelude.lua's locals of those names hide them.
const scriptHead = "local callKeys, callArgs = KEYS, ARGV\n"

// ErrBadReply reports a script reply that does not have the shape the
// scripts promise. It means a wrong script or a wrong server, never a limit
// decision.
var ErrBadReply = fmt.Errorf("redisstore: %w", store.ErrBadReply)

// Config tunes a Store. The zero value is the production configuration.
type Config struct {
	// Now overrides the clock the scripts use. Nil, the default, makes each
	// script read Redis TIME, the one clock of the whole fleet. Only tests set
	// it, to run the conformance suite deterministically.
	Now func() time.Time
	// Lanes is how many do-script calls a single Redis may have in flight
	// before further checks and reports are grouped into one call
	// (coalesce.go); default 1. On Redis Cluster nothing is grouped.
	Lanes int
	// MaxQueued bounds the ops queued behind busy lanes, a report's mark
	// and its settlements counted as ops (admission control,
	// coalesce.go): a batch that does not fit, or that what is
	// queued ahead of it would keep past its deadline, is refused at once
	// with store.ErrOverloaded; a report's mark goes out on its own
	// instead. Default 64×96.
	MaxQueued int
	// Functions makes the Store call the do script as a library of Redis
	// functions where Redis takes it (functions.go): loaded at Warm, or in
	// the background after a script call succeeds. Only as Redis's default
	// user: a user of guardian's ACL may not load a library, and trying
	// would leave a denial in Redis's ACL LOG at every start.
	Functions bool
}

// Store is guardian's security store on Redis. It is safe for concurrent use
// and holds no state of its own: any number of Stores, in any number of
// processes, may share one Redis.
type Store struct {
	c       redis.UniversalClient
	cluster *redis.ClusterClient
	now     func() time.Time
	group   *coalescer // nil on a cluster
	fn      functions
}

var _ store.Store = (*Store)(nil)

// New returns a Store on c: a *redis.Client (or a failover client), or a
// *redis.ClusterClient, whose batches are split by hash slot. Other
// UniversalClients are used as a single Redis. The caller keeps ownership
// of c and closes it.
func New(c redis.UniversalClient, cfg Config) *Store {
	s := &Store{c: c, now: cfg.Now}
	s.fn.wanted = cfg.Functions && defaultUser(c)
	if cc, ok := c.(*redis.ClusterClient); ok {
		s.cluster = cc
	} else {
		s.group = &coalescer{s: s, lanes: cfg.Lanes, maxQueued: cfg.MaxQueued}
		if s.group.lanes <= 0 {
			s.group.lanes = defaultLanes
		}
		if s.group.maxQueued <= 0 {
			s.group.maxQueued = defaultMaxQueued
		}
	}
	return s
}

// Do evaluates ops and spends them all-or-nothing; see the package comment
// for what that means on Redis Cluster.
func (s *Store) Do(ctx context.Context, ops []store.Op, res []store.Result) error {
	return s.run(ctx, "do", ops, res)
}

// Peek evaluates ops like Do and spends nothing.
func (s *Store) Peek(ctx context.Context, ops []store.Op, res []store.Result) error {
	return s.run(ctx, "peek", ops, res)
}

// Settle applies settlements: a GiveBack moves a Rate key's arrival time
// back (the key deleted once back to full), a Forget deletes its key and a
// Reset its counter, a Confirm keeps a counter or a guess longer, a Learn
// puts a member on a familiar list. Keys that no longer exist are left
// alone, but for a Learn, and so are keys that hold another kind's state
// than the settlement's. On Redis Cluster the settlements of each slot are
// applied atomically, all slots in one pipelined round trip.
func (s *Store) Settle(ctx context.Context, settlements []store.Settlement) error {
	entries, err := settlementEntries(settlements)
	if err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: settle: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	if err := s.giveBack(ctx, s.nowArg(), entries, false); err != nil {
		return fmt.Errorf("redisstore: settle: %w", err)
	}
	return nil
}

// Delete removes keys; absent keys are ignored. On Redis Cluster the keys are
// deleted per slot, in one pipelined round trip. The keys are published on
// ResetChannel in the same script, so every instance that listens
// (Listen) forgets what it remembers of them.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: delete: %w", err)
	}
	if len(keys) == 0 {
		return nil
	}
	entries := make([]giveback, len(keys))
	for i, k := range keys {
		entries[i] = giveback{key: k, how: argForget}
	}
	if err := s.giveBack(ctx, s.nowArg(), entries, true); err != nil {
		return fmt.Errorf("redisstore: delete: %w", err)
	}
	return nil
}

// Familiar returns the members of the familiar list at key that are not
// forgotten, by the store's clock.
func (s *Store) Familiar(ctx context.Context, key string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("redisstore: familiar: %w", err)
	}
	members, err := membersScript.Run(ctx, s.c, []string{key}, s.nowArg()).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("redisstore: familiar: %w", err)
	}
	return members, nil
}

// MarkOnce sets key for ttl unless it is set, reports whether this call set
// it and, when it did, applies settlements. Expiry follows the store's
// clock, like every limit. On a single Redis the mark and the settlements
// are one script call, shared with the checks queued meanwhile when the
// store is busy (coalesce.go); on Redis Cluster, where they live in
// different slots, the settlements follow the mark in a second round trip.
func (s *Store) MarkOnce(ctx context.Context, key string, ttl time.Duration, settlements ...store.Settlement) (bool, error) {
	if key == "" || ttl <= 0 {
		return false, fmt.Errorf("redisstore: mark once: %w", store.ErrBadBatch)
	}
	entries, err := settlementEntries(settlements)
	if err != nil {
		return false, fmt.Errorf("redisstore: mark once: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("redisstore: mark once: %w", err)
	}
	var first bool
	if s.cluster == nil {
		first, err = s.group.mark(ctx, key, micros(ttl), entries)
	} else {
		now := s.nowArg()
		if first, err = s.markOnce(ctx, now, key, micros(ttl), nil); err == nil && first && len(entries) > 0 {
			err = s.giveBack(ctx, now, entries, false)
		}
	}
	if err != nil {
		// On a cluster, the mark may be set and its settlements not applied.
		return first, fmt.Errorf("redisstore: mark once: %w", err)
	}
	return first, nil
}

// markOnce runs the once script: it sets mark for ttl microseconds unless
// it is set and, when it did, applies entries, whose keys must share mark's
// slot. On a single Redis a busy store carries the mark in a grouped call
// instead (coalescer.mark).
func (s *Store) markOnce(ctx context.Context, now any, mark string, ttl int64, entries []giveback) (bool, error) {
	b := batches.Get().(*batch)
	defer b.release()
	b.keys = append(b.keys, mark)
	b.args = append(b.args, now, ttl)
	b.keys, b.args = appendGiveback(b.keys, b.args, entries)
	n, err := onceScript.Run(ctx, s.c, b.keys, b.args...).Int64()
	if err != nil {
		return false, err
	}
	return parseMark(n)
}

// nowArg is the time argument of every script: empty, so that the script
// reads Redis TIME, unless a test overrides the clock.
func (s *Store) nowArg() any {
	if s.now == nil {
		return ""
	}
	return s.now().UnixMicro()
}

// run evaluates a batch in mode "do" or "peek".
func (s *Store) run(ctx context.Context, mode string, ops []store.Op, res []store.Result) error {
	if err := store.Validate(ops, res); err != nil {
		return fmt.Errorf("redisstore: %s: %w", mode, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: %s: %w", mode, err)
	}
	if len(ops) == 0 {
		return nil
	}
	if s.cluster != nil {
		now := s.nowArg()
		groups := groupBySlot(len(ops), func(i int) string { return ops[i].Key })
		if len(groups) > 1 {
			if err := s.runSlots(ctx, mode, now, ops, res, groups); err != nil {
				return fmt.Errorf("redisstore: %s: %w", mode, err)
			}
			return nil
		}
		if err := s.call(ctx, mode, ops, res); err != nil {
			return fmt.Errorf("redisstore: %s: %w", mode, err)
		}
		readGuesses(ops, res)
		return nil
	}
	if err := s.group.run(ctx, mode, ops, res); err != nil {
		return fmt.Errorf("redisstore: %s: %w", mode, err)
	}
	readGuesses(ops, res)
	return nil
}

// call evaluates one batch in a script call of its own.
func (s *Store) call(ctx context.Context, mode string, ops []store.Op, res []store.Result) error {
	b := batches.Get().(*batch)
	b.keys, b.args = appendOps(b.keys, appendDoHeader(b.args, s.nowArg(), 1), mode, ops)
	reply, err := s.evalDo(ctx, b.keys, b.args)
	b.release()
	if err != nil {
		return err
	}
	return parseResults(reply, res)
}

// giveBack runs the give-back script: one call on a single Redis, one call
// per slot in one pipeline on a cluster. announce publishes the keys on
// ResetChannel.
func (s *Store) giveBack(ctx context.Context, now any, entries []giveback, announce bool) error {
	var channel any = ""
	if announce {
		channel = ResetChannel
	}
	var groups [][]int
	if s.cluster != nil {
		groups = groupBySlot(len(entries), func(i int) string { return entries[i].key })
	}
	if len(groups) <= 1 {
		b := batches.Get().(*batch)
		defer b.release()
		b.args = append(b.args, now, channel)
		b.keys, b.args = appendGiveback(b.keys, b.args, entries)
		return givebackScript.Run(ctx, s.c, b.keys, b.args...).Err()
	}
	return s.giveBackSlots(ctx, now, entries, channel, groups)
}
