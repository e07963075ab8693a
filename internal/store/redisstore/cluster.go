package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/store"
)

// runSlots evaluates a batch whose keys span several cluster slots: one
// script per slot in one pipeline, then, if an enforced op was denied, a
// second pipeline giving back the enforced ops other slots spent: every one
// but the Toll ops, unless a Toll op denied.
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
	readGuesses(ops, res)

	denied, tollDenied := firstErr != nil, firstErr != nil
	for i := range ops {
		// A Familiar op that did not find its member denies nothing.
		if _, familiar := ops[i].Limit.(store.Familiar); ops[i].Role.Denies() && !familiar && !res[i].Allowed {
			denied = true
			tollDenied = tollDenied || ops[i].Role == store.Toll
		}
	}
	_, repeat := store.RepeatOf(ops, res)
	if !denied && !repeat {
		return nil
	}

	// Give back what slots which did answer spent and the batch does not
	// keep (slotGiveback).
	var entries []giveback
	var spent []int
	for gi, g := range groups {
		if errs[gi] != nil {
			continue
		}
		for _, i := range g {
			e, ok := slotGiveback(&ops[i], &res[i], denied, tollDenied, repeat)
			if !ok {
				continue
			}
			spent = append(spent, i)
			entries = append(entries, e)
		}
	}
	if len(entries) > 0 {
		if err := s.giveBack(ctx, now, entries, false); err != nil {
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

// evalSlots runs the do script once per group in one pipeline.
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
	switch op.Limit.(type) {
	case store.Rate:
		r.Remaining = min(r.Remaining+p.cost, p.burst)
		r.ResetAfter = max(r.ResetAfter-time.Duration(p.cost*p.interval)*time.Microsecond, 0)
	case store.Guesses:
		// Its Count and ResetAfter are what it found already.
	case store.Counter:
		r.Count -= p.cost
		r.Remaining = max(p.limit-r.Count, 0)
		if r.Count <= 0 {
			r.Count = 0
			r.ResetAfter = 0 // the key was deleted
		}
	}
}

// giveBackSlots runs the give-back script once per group of entries, in one
// pipeline.
func (s *Store) giveBackSlots(ctx context.Context, now any, entries []giveback, announce any, groups [][]int) error {
	keys := make([][]string, len(groups))
	args := make([][]any, len(groups))
	for gi, g := range groups {
		es := make([]giveback, len(g))
		for j, i := range g {
			es[j] = entries[i]
		}
		keys[gi], args[gi] = appendGiveback(nil, []any{now, announce}, es)
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

// groupBySlot groups the indexes 0..n-1 by the cluster slot of key(i), in
// the order each slot first appears.
func groupBySlot(n int, key func(i int) string) [][]int {
	var groups [][]int
	var slots []int
	for i := range n {
		sl := slot(key(i))
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
