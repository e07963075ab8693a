// Package redisstore is guardian's security store on Redis, shared by every
// guardian instance of a fleet.
//
// Every batch is evaluated by a Lua script (do.lua) in one round trip, against
// the store's own clock (Redis TIME), so guardian nodes with skewed clocks
// agree. State lives in hashes shared by subjects (prelude.lua): the store
// key guardian:v2:{subject}:rule is a field of guardian:v2:{su}:rule, the
// two first characters of the subject naming the hash. A rate field holds a
// GCRA theoretical arrival time, a counter field its count and the deadline
// at which it is forgotten; a field past its deadline reads as absent and is
// swept out by new neighbours, and a hash expires after its latest deadline,
// so idle state costs nothing for long.
//
// On a single Redis (a *redis.Client, including a Sentinel failover client) a
// batch is one script call and exactly all-or-nothing: when every hard
// enforced op fits, the enforced ops that fit are spent together (a Soft op
// that does not fit is left alone and denies nothing); when one does not,
// none is.
//
// On Redis Cluster (a *redis.ClusterClient) one script can only touch keys of
// one hash slot. A subject's hashes are tagged by its first two characters,
// so all of one subject's rules share a slot, but a check usually spans
// several subjects
// (account, IP prefix). Such a batch runs one script per slot, all pipelined
// in one round trip; each slot spends its own enforced ops when its hard
// ones fit. If some slot denied, a second pipelined step gives back the
// enforced ops the other slots spent, and the results report them not
// spent. Between the two steps a concurrent check can see a spend that is
// about to be given back, and be denied for it: the cluster errs towards
// denying, never towards admitting more than a limit allows. A counter given
// back keeps the later deadline its spend set. Shadow ops are spent on their
// own, as on a single Redis. A batch within one slot (one subject) is one
// script call and exactly all-or-nothing.
//
// Keys reach the store already hashed (package keys); this package never
// sees a subject in clear.
package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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

	doScript       = redis.NewScript(preludeLua + doLua)
	givebackScript = redis.NewScript(preludeLua + givebackLua)
	onceScript     = redis.NewScript(preludeLua + onceLua)
)

// ErrBadReply reports a script reply that does not have the shape the
// scripts promise. It means a wrong script or a wrong server, never a limit
// decision.
var ErrBadReply = fmt.Errorf("redisstore: %w", store.ErrBadReply)

// maxSpan caps every span and count handed to the scripts, 2^50 µs (about
// 35 years), far beyond any real limit. Lua numbers are doubles, exact up to
// 2^53: the time since the epoch (about 2^50.7 µs) plus two capped spans
// stays exact. A larger interval, burst, cost, limit or hold saturates: it
// denies, or holds, as long as any guardian rule could ask.
const maxSpan = 1 << 50

// Config tunes a Store. The zero value is the production configuration.
type Config struct {
	// Now overrides the clock the scripts use. Nil, the default, makes each
	// script read Redis TIME, the one clock of the whole fleet. Only tests set
	// it, to run the conformance suite deterministically.
	Now func() time.Time
}

// Store is guardian's security store on Redis. It is safe for concurrent use
// and holds no state of its own: any number of Stores, in any number of
// processes, may share one Redis.
type Store struct {
	c       redis.UniversalClient
	cluster *redis.ClusterClient
	now     func() time.Time
}

var _ store.Store = (*Store)(nil)

// New returns a Store on c: a *redis.Client (or a failover client), or a
// *redis.ClusterClient, whose batches are split by hash slot. Other
// UniversalClients are used as a single Redis. The caller keeps ownership
// of c and closes it.
func New(c redis.UniversalClient, cfg Config) *Store {
	s := &Store{c: c, now: cfg.Now}
	if cc, ok := c.(*redis.ClusterClient); ok {
		s.cluster = cc
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

// Refund gives back what checks spent: a Rate key's arrival time moves back
// by Amount (deleted once back to full), a Counter key is reset. Keys that no
// longer exist are left alone. On Redis Cluster the refunds of each slot are
// applied atomically, all slots in one pipelined round trip.
func (s *Store) Refund(ctx context.Context, refunds []store.Refund) error {
	entries, err := refundEntries(refunds)
	if err != nil {
		return fmt.Errorf("redisstore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: refund: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	if err := s.giveBack(ctx, s.nowArg(), entries); err != nil {
		return fmt.Errorf("redisstore: refund: %w", err)
	}
	return nil
}

// refundEntries converts refunds to give-back entries.
func refundEntries(refunds []store.Refund) ([]giveback, error) {
	if err := store.ValidateRefunds(refunds); err != nil {
		return nil, err
	}
	entries := make([]giveback, len(refunds))
	for i, r := range refunds {
		entries[i] = giveback{loc: locate(r.Key), how: "x"}
		if r.Kind == store.Rate {
			// Truncated: a refund never gives back more than was spent.
			entries[i].how, entries[i].amount = "r", min(r.Amount.Microseconds(), maxSpan)
		}
	}
	return entries, nil
}

// Delete removes keys; absent keys are ignored. On Redis Cluster the keys are
// deleted per slot, in one pipelined round trip.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redisstore: delete: %w", err)
	}
	if len(keys) == 0 {
		return nil
	}
	entries := make([]giveback, len(keys))
	for i, k := range keys {
		entries[i] = giveback{loc: locate(k), how: "x"}
	}
	if err := s.giveBack(ctx, s.nowArg(), entries); err != nil {
		return fmt.Errorf("redisstore: delete: %w", err)
	}
	return nil
}

// MarkOnce sets key for ttl unless it is set, reports whether this call set
// it and, when it did, applies refunds. Expiry follows the store's clock,
// like every limit. On a single Redis the mark and the refunds are one
// script call; on Redis Cluster, where they live in different slots, the
// refunds follow the mark in a second round trip.
func (s *Store) MarkOnce(ctx context.Context, key string, ttl time.Duration, refunds ...store.Refund) (bool, error) {
	if key == "" || ttl <= 0 {
		return false, fmt.Errorf("redisstore: mark once: %w", store.ErrBadBatch)
	}
	entries, err := refundEntries(refunds)
	if err != nil {
		return false, fmt.Errorf("redisstore: mark once: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("redisstore: mark once: %w", err)
	}
	now, mark := s.nowArg(), locate(key)
	var first bool
	if s.cluster == nil {
		first, err = s.markOnce(ctx, now, mark, micros(ttl), entries)
	} else if first, err = s.markOnce(ctx, now, mark, micros(ttl), nil); err == nil && first && len(entries) > 0 {
		err = s.giveBack(ctx, now, entries)
	}
	if err != nil {
		// On a cluster, the mark may be set and its refunds not given back.
		return first, fmt.Errorf("redisstore: mark once: %w", err)
	}
	return first, nil
}

// markOnce runs the once script: it sets mark for ttl microseconds unless
// it is set and, when it did, applies entries, whose hashes must share
// mark's slot.
func (s *Store) markOnce(ctx context.Context, now any, mark loc, ttl int64, entries []giveback) (bool, error) {
	b := batches.Get().(*batch)
	defer b.release()
	b.keys = append(b.keys, mark.hash)
	b.args = append(b.args, now, mark.field)
	b.keys, b.args = appendEntryLocs(b.keys, b.args, entries)
	b.args = append(b.args, ttl)
	b.args = appendGiveback(b.args, entries)
	n, err := onceScript.Run(ctx, s.c, b.keys, b.args...).Int64()
	if err != nil {
		return false, err
	}
	switch n {
	case 0:
		return false, nil
	case 1:
		return true, nil
	default:
		return false, fmt.Errorf("%w: %d", ErrBadReply, n)
	}
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
	now := s.nowArg()
	if s.cluster != nil {
		groups := groupBySlot(len(ops), func(i int) string { return locate(ops[i].Key).hash })
		if len(groups) > 1 {
			if err := s.runSlots(ctx, mode, now, ops, res, groups); err != nil {
				return fmt.Errorf("redisstore: %s: %w", mode, err)
			}
			return nil
		}
	}
	b := batches.Get().(*batch)
	b.keys, b.args = appendOps(b.keys, b.args, mode, now, ops)
	reply, err := doScript.Run(ctx, s.c, b.keys, b.args...).Result()
	b.release()
	if err == nil {
		err = parseResults(reply, res)
	}
	if err != nil {
		return fmt.Errorf("redisstore: %s: %w", mode, err)
	}
	return nil
}

// runSlots evaluates a batch whose keys span several cluster slots: one
// script per slot in one pipeline, then, if an enforced op was denied, a
// second pipeline giving back the enforced ops other slots spent.
func (s *Store) runSlots(ctx context.Context, mode string, now any, ops []store.Op, res []store.Result, groups [][]int) error {
	replies, errs := s.evalSlots(ctx, mode, now, ops, groups)
	part := make([]store.Result, len(ops))
	var firstErr error
	for gi, g := range groups {
		if errs[gi] == nil {
			errs[gi] = parseResults(replies[gi], part[:len(g)])
		}
		if errs[gi] != nil {
			if firstErr == nil {
				firstErr = errs[gi]
			}
			continue
		}
		for j, i := range g {
			res[i] = part[j]
		}
	}

	denied := firstErr != nil
	for i := range ops {
		if !ops[i].Shadow && !ops[i].Soft && !res[i].Allowed {
			denied = true
		}
	}
	if !denied {
		return nil
	}

	// Give back the enforced ops that slots which did answer spent.
	var entries []giveback
	var spent []int
	for gi, g := range groups {
		if errs[gi] != nil {
			continue
		}
		for _, i := range g {
			op, r := &ops[i], &res[i]
			if op.Shadow || !r.Spent {
				continue
			}
			spent = append(spent, i)
			p := paramsOf(op)
			e := giveback{loc: locate(op.Key), how: "c", amount: p.cost}
			if op.Kind == store.Rate {
				e.how, e.amount = "r", p.cost*p.interval
			}
			entries = append(entries, e)
		}
	}
	if len(entries) > 0 {
		if err := s.giveBack(ctx, now, entries); err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("give back: %w", err)
			}
		}
	}
	if firstErr != nil {
		return firstErr
	}
	for _, i := range spent {
		unspend(&ops[i], &res[i])
	}
	return nil
}

// evalSlots runs the do script once per group in one pipeline. A group whose
// EVALSHA found no script (a restarted node, SCRIPT FLUSH) is sent again
// with EVAL, the only case that costs a second round trip.
func (s *Store) evalSlots(ctx context.Context, mode string, now any, ops []store.Op, groups [][]int) ([]any, []error) {
	keys := make([][]string, len(groups))
	args := make([][]any, len(groups))
	var buf []store.Op
	for gi, g := range groups {
		buf = buf[:0]
		for _, i := range g {
			buf = append(buf, ops[i])
		}
		keys[gi], args[gi] = encodeOps(mode, now, buf)
	}

	cmds := s.evalPipelined(ctx, doScript, keys, args)
	replies := make([]any, len(groups))
	errs := make([]error, len(groups))
	for gi, cmd := range cmds {
		replies[gi], errs[gi] = cmd.Result()
	}
	return replies, errs
}

// unspend turns the result of an enforced op that was spent and then given
// back into what the op found: nothing spent, the units it would have taken
// still there.
func unspend(op *store.Op, r *store.Result) {
	p := paramsOf(op)
	r.Spent = false
	switch op.Kind {
	case store.Rate:
		r.Remaining = min(r.Remaining+p.cost, p.burst)
		r.ResetAfter = max(r.ResetAfter-time.Duration(p.cost*p.interval)*time.Microsecond, 0)
	case store.Counter:
		r.Count -= p.cost
		r.Remaining = max(p.limit-r.Count, 0)
		if r.Count <= 0 {
			r.Count = 0
			r.ResetAfter = 0 // the key was deleted
		}
	}
}

// loc is where the state of a store key lives in Redis: a field of a hash
// (see prelude.lua).
type loc struct {
	hash, field string
}

// bucketLen is how many characters of a key's hash tag name the hash its
// state lives in: with guardian's base64 subjects, 4,096 hashes per rule,
// each holding the subjects whose tag starts with those characters.
const bucketLen = 2

// locate returns where key's state lives. A key P{tag}S whose tag is longer
// than bucketLen is field tag[bucketLen:] of the hash P{tag[:bucketLen]}S,
// which keeps the key's cluster slot stable for all its rules; any other key
// is field "" of a hash of its own name.
func locate(key string) loc {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > bucketLen {
			return loc{
				hash:  key[:i+1+bucketLen] + key[i+1+j:],
				field: key[i+1+bucketLen : i+1+j],
			}
		}
	}
	return loc{hash: key}
}

// giveback is one entry of the give-back step: how is "r" (microseconds
// off a rate field), "c" (units off a counter) or "x" (forget).
type giveback struct {
	loc
	how    string
	amount int64
}

// giveBack runs the give-back script: one call on a single Redis, one call
// per slot in one pipeline on a cluster.
func (s *Store) giveBack(ctx context.Context, now any, entries []giveback) error {
	var groups [][]int
	if s.cluster != nil {
		groups = groupBySlot(len(entries), func(i int) string { return entries[i].hash })
	}
	if len(groups) <= 1 {
		b := batches.Get().(*batch)
		defer b.release()
		b.keys, b.args = appendGivebackCall(b.keys, b.args, now, entries)
		return givebackScript.Run(ctx, s.c, b.keys, b.args...).Err()
	}
	keys := make([][]string, len(groups))
	args := make([][]any, len(groups))
	for gi, g := range groups {
		es := make([]giveback, len(g))
		for j, i := range g {
			es[j] = entries[i]
		}
		keys[gi], args[gi] = appendGivebackCall(nil, nil, now, es)
	}
	for _, cmd := range s.evalPipelined(ctx, givebackScript, keys, args) {
		if err := cmd.Err(); err != nil {
			return err
		}
	}
	return nil
}

// evalPipelined runs sc once per element of keys and args, in one pipeline
// on the cluster. A call whose EVALSHA found no script (a restarted node,
// SCRIPT FLUSH) is sent again with EVAL, the only case that costs a second
// round trip. Errors are read per command.
func (s *Store) evalPipelined(ctx context.Context, sc *redis.Script, keys [][]string, args [][]any) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(keys))
	pipe := s.cluster.Pipeline()
	for i := range keys {
		cmds[i] = sc.EvalSha(ctx, pipe, keys[i], args[i]...)
	}
	_, _ = pipe.Exec(ctx)
	var retry []int
	for i, cmd := range cmds {
		if redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			retry = append(retry, i)
		}
	}
	if len(retry) > 0 {
		pipe := s.cluster.Pipeline()
		for _, i := range retry {
			cmds[i] = sc.Eval(ctx, pipe, keys[i], args[i]...)
		}
		_, _ = pipe.Exec(ctx)
	}
	return cmds
}

// appendGivebackCall appends the give-back script's KEYS and ARGV for
// entries to keys and args.
func appendGivebackCall(keys []string, args []any, now any, entries []giveback) ([]string, []any) {
	args = append(args, now)
	keys, args = appendEntryLocs(keys, args, entries)
	return keys, appendGiveback(args, entries)
}

// appendEntryLocs appends the hash of each entry to keys and its field to
// args, as every script takes them.
func appendEntryLocs(keys []string, args []any, entries []giveback) ([]string, []any) {
	for _, e := range entries {
		keys = append(keys, e.hash)
		args = append(args, e.field)
	}
	return keys, args
}

// appendGiveback appends how and amount of each entry to args.
func appendGiveback(args []any, entries []giveback) []any {
	for _, e := range entries {
		args = append(args, e.how, e.amount)
	}
	return args
}

// The do script's string arguments, boxed once: an interface holding a
// string variable costs an allocation each time it is made.
var (
	argDo, argPeek                 any = "do", "peek"
	argRate, argCounter            any = "r", "c"
	argEnforce, argSoft, argShadow any = "enforce", "soft", "shadow"
)

// encodeOps builds the do script's KEYS and ARGV for ops.
func encodeOps(mode string, now any, ops []store.Op) ([]string, []any) {
	return appendOps(make([]string, 0, len(ops)), make([]any, 0, 2+7*len(ops)), mode, now, ops)
}

// appendOps appends the do script's KEYS and ARGV for ops to keys and args.
func appendOps(keys []string, args []any, mode string, now any, ops []store.Op) ([]string, []any) {
	args = append(args, now)
	for i := range ops {
		l := locate(ops[i].Key)
		keys = append(keys, l.hash)
		args = append(args, l.field)
	}
	m := argDo
	if mode != "do" {
		m = argPeek
	}
	args = append(args, m)
	for i := range ops {
		op := &ops[i]
		kind, role := argCounter, argEnforce
		if op.Kind == store.Rate {
			kind = argRate
		}
		switch {
		case op.Shadow:
			role = argShadow
		case op.Soft:
			role = argSoft
		}
		p := paramsOf(op)
		args = append(args, kind, role, p.cost, p.interval, p.burst, p.limit, p.hold)
	}
	return keys, args
}

// batch is the KEYS and ARGV of one script call, reused through batches:
// the client copies both into its command, so they are free again once the
// call returns.
type batch struct {
	keys []string
	args []any
}

var batches = sync.Pool{New: func() any { return &batch{} }}

// maxPooledOps bounds the batches kept for reuse.
const maxPooledOps = 64

// release clears b, so that it holds no key, and returns it to the pool.
func (b *batch) release() {
	if cap(b.keys) > maxPooledOps {
		return
	}
	clear(b.keys)
	clear(b.args)
	b.keys, b.args = b.keys[:0], b.args[:0]
	batches.Put(b)
}

// params are an op's numbers as the do script takes them: whole
// microseconds, capped at maxSpan.
type params struct {
	cost, interval, burst, limit, hold int64
}

// paramsOf converts op for the do script. An interval or hold that is not a
// whole number of microseconds counts as the next one, so a limit is never
// looser than configured; spans saturate at maxSpan, and a cost that could
// never fit stays one that never fits.
func paramsOf(op *store.Op) params {
	switch op.Kind {
	case store.Rate:
		t := micros(op.Interval)
		return params{
			cost:     min(op.Cost, maxSpan/t+1),
			interval: t,
			burst:    min(op.Burst, maxSpan/t),
		}
	default:
		return params{
			cost:  min(op.Cost, maxSpan+1),
			limit: min(op.Limit, maxSpan),
			hold:  micros(op.Hold),
		}
	}
}

// micros converts a positive duration to whole microseconds, rounding up,
// capped at maxSpan.
func micros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond != 0 {
		us++
	}
	return min(us, maxSpan)
}

// groupBySlot groups the indexes 0..n-1 by the cluster slot of hash(i), in
// the order each slot first appears.
func groupBySlot(n int, hash func(i int) string) [][]int {
	var groups [][]int
	var slots []int
	for i := range n {
		sl := slot(hash(i))
		j := 0
		for j < len(slots) && slots[j] != sl {
			j++
		}
		if j == len(slots) {
			slots = append(slots, sl)
			groups = append(groups, nil)
		}
		groups[j] = append(groups[j], i)
	}
	return groups
}

// ErrUnsupported reports a Redis older than the scripts need: 6.2, the first
// with HRANDFIELD.
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
// within their store deadline. An older Redis is ErrUnsupported.
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
	for _, sc := range []*redis.Script{doScript, givebackScript, onceScript} {
		if err := sc.Load(ctx, s.c).Err(); err != nil {
			return fmt.Errorf("redisstore: load scripts: %w", err)
		}
	}
	return nil
}
