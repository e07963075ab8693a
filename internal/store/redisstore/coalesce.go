package redisstore

import (
	"context"
	"sync"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// Group commit on a single Redis. While fewer than lanes do-script calls are
// in flight, a batch is sent at once, alone, exactly as it would be without
// grouping: an idle store adds no wait. A batch that finds every lane busy
// joins the queue, and when a call returns, everything queued goes out
// together as one script call carrying each batch on its own (do.lua). A
// batch is one check's ops and stays all-or-nothing by itself; it is one
// round trip, the one it rides in. The script takes the batches in queue
// order, so one that arrived later sees what an earlier one spent.

// defaultLanes is Config.Lanes when it is not set: one call in flight,
// everything that arrives meanwhile in the next. Measured against two
// (docs/performance.md), two lanes left nearly every call alone under
// load, so nothing was shared.
const defaultLanes = 1

// maxGroupOps bounds the ops of one grouped call; what does not fit goes
// out in the next.
const maxGroupOps = 96

// coalescer queues batches while every lane is busy.
type coalescer struct {
	s     *Store
	lanes int

	mu      sync.Mutex
	busy    int
	waiting []*pending
}

// pending is a queued batch: its script arguments, made when it was queued
// (so that its caller's ops may be reused as soon as it returns), and room
// for its results. done is closed once res and err are set.
type pending struct {
	keys     []string
	args     []any
	res      []store.Result
	err      error
	deadline time.Time // zero: none
	done     chan struct{}
}

// run evaluates one batch, at once when a lane is free, else in the next
// grouped call.
func (c *coalescer) run(ctx context.Context, mode string, ops []store.Op, res []store.Result) error {
	c.mu.Lock()
	if c.busy < c.lanes && len(c.waiting) == 0 {
		c.busy++
		c.mu.Unlock()
		err := c.s.call(ctx, mode, ops, res)
		c.release()
		return err
	}
	p := &pending{res: make([]store.Result, len(ops)), done: make(chan struct{})}
	p.keys, p.args = appendOps(make([]string, 0, len(ops)), make([]any, 0, doArgsPerBatch+doArgsPerOp*len(ops)), mode, ops)
	p.deadline, _ = ctx.Deadline()
	c.waiting = append(c.waiting, p)
	c.mu.Unlock()

	select {
	case <-p.done:
		copy(res, p.res)
		return p.err
	case <-ctx.Done():
		c.mu.Lock()
		for i, q := range c.waiting {
			if q == p {
				c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		// Not sent, or sent and its answer no longer awaited: either way
		// the caller hears its own context's end.
		return ctx.Err()
	}
}

// release frees the lane of a call that returned, or hands it to what is
// queued: a goroutine sends grouped calls until the queue is empty.
func (c *coalescer) release() {
	group := c.take()
	if group == nil {
		return
	}
	go func() {
		for ; group != nil; group = c.take() {
			c.send(group)
		}
	}()
}

// take returns the queued batches of the next grouped call, the lane
// staying busy, or nil, the lane freed, when nothing is queued.
func (c *coalescer) take() []*pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiting) == 0 {
		c.busy--
		return nil
	}
	n, ops := 0, 0
	for n < len(c.waiting) && (n == 0 || ops+len(c.waiting[n].res) <= maxGroupOps) {
		ops += len(c.waiting[n].res)
		n++
	}
	group := make([]*pending, n)
	copy(group, c.waiting)
	c.waiting = append(c.waiting[:0], c.waiting[n:]...)
	return group
}

// send makes one script call of group's batches and hands each its
// results. The call runs until the latest deadline of the group: each
// caller stops waiting at its own.
func (c *coalescer) send(group []*pending) {
	ctx := context.Background()
	latest, bounded := time.Time{}, true
	for _, p := range group {
		if p.deadline.IsZero() {
			bounded = false
		} else if p.deadline.After(latest) {
			latest = p.deadline
		}
	}
	cancel := context.CancelFunc(func() {})
	if bounded {
		ctx, cancel = context.WithDeadline(ctx, latest)
	}
	defer cancel()

	var keys []string
	args := appendDoHeader(make([]any, 0, 2+doArgsPerBatch*len(group)+doArgsPerOp*maxGroupOps), c.s.nowArg(), len(group))
	ops := 0
	for _, p := range group {
		keys = append(keys, p.keys...)
		args = append(args, p.args...)
		ops += len(p.res)
	}
	reply, err := doScript.Run(ctx, c.s.c, keys, args...).Result()
	var vals []any
	if err == nil {
		vals, err = replyInts(reply, ops)
	}
	at := 0
	for _, p := range group {
		p.err = err
		if err == nil {
			n := replyWidth * len(p.res)
			p.err = parseBatch(vals[at:at+n], p.res)
			at += n
		}
		close(p.done)
	}
}
