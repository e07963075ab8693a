package redisstore

import (
	"context"
	"sync"
	"sync/atomic"
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

// Admission control. A batch that finds every lane busy is refused at once
// with store.ErrOverloaded, instead of queued, when what is queued ahead of
// it would take past its deadline to send (each grouped call taking what
// the last calls took, callTime), or when the queue holds Config.MaxQueued
// ops (default defaultMaxQueued). Its caller answers from its fallback now
// instead of waiting behind work it would time out behind, and a flood
// cannot make every check of the instance time out (and the store count as
// failing). A queued batch whose caller goes away (store.WithCaller)
// before it is sent leaves the queue and is never sent:
// store.ErrAbandoned. One that was sent is finished.

// defaultMaxQueued is Config.MaxQueued when it is not set: what a healthy
// Redis sends in tens of milliseconds, a bound on the memory of the queue
// when deadlines are long.
const defaultMaxQueued = 64 * maxGroupOps

// coalescer queues batches while every lane is busy.
type coalescer struct {
	s         *Store
	lanes     int
	maxQueued int

	mu      sync.Mutex
	busy    int
	waiting []*pending
	queued  int // ops in waiting
	// callTime is a moving average of how long a script call took, in
	// nanoseconds.
	callTime atomic.Int64
}

// took folds a script call's duration into callTime.
func (c *coalescer) took(since time.Time) {
	d := int64(time.Since(since))
	old := c.callTime.Load()
	c.callTime.Store(old + (d-old)/8)
}

// fits reports whether a batch of n ops, queued now, would be answered
// before deadline: what is left of the call in flight (half a call, on
// average) and one grouped call per maxGroupOps queued ahead of it and
// with it, each as long as callTime. Under c.mu.
func (c *coalescer) fits(n int, deadline time.Time, ok bool) bool {
	if c.queued+n > c.maxQueued {
		return c.queued == 0
	}
	if !ok {
		return true
	}
	halves := 1 + 2*((c.queued+n+maxGroupOps-1)/maxGroupOps)
	return 2*time.Until(deadline) > time.Duration(int64(halves)*c.callTime.Load())
}

// pending is a queued batch: its script arguments, made when it was queued
// (so that its caller's ops may be reused as soon as it returns), and room
// for its results. done is closed once res and err are set.
type pending struct {
	keys     []string
	args     []any
	res      []store.Result
	err      error
	deadline time.Time       // zero: none
	gone     <-chan struct{} // its caller's end (store.CallerGone)
	done     chan struct{}
}

// run evaluates one batch, at once when a lane is free, else in the next
// grouped call; it refuses one the queue has no room for
// (store.ErrOverloaded), and drops one whose caller goes away before it is
// sent (store.ErrAbandoned).
func (c *coalescer) run(ctx context.Context, mode string, ops []store.Op, res []store.Result) error {
	gone := store.CallerGone(ctx)
	if store.Gone(ctx) {
		return store.ErrAbandoned
	}
	c.mu.Lock()
	if c.busy < c.lanes && len(c.waiting) == 0 {
		c.busy++
		c.mu.Unlock()
		start := time.Now()
		err := c.s.call(ctx, mode, ops, res)
		c.took(start)
		c.release()
		return err
	}
	deadline, bounded := ctx.Deadline()
	if !c.fits(len(ops), deadline, bounded) {
		c.mu.Unlock()
		return store.ErrOverloaded
	}
	p := &pending{res: make([]store.Result, len(ops)), done: make(chan struct{})}
	p.keys, p.args = appendOps(make([]string, 0, len(ops)), make([]any, 0, doArgsPerBatch+doArgsPerOp*len(ops)), mode, ops)
	p.deadline = deadline
	p.gone = gone
	c.waiting = append(c.waiting, p)
	c.queued += len(ops)
	c.mu.Unlock()

	select {
	case <-p.done:
		copy(res, p.res)
		return p.err
	case <-gone:
		if c.unqueue(p) {
			return store.ErrAbandoned
		}
		// Sent: finished, like every call that reached the store.
		select {
		case <-p.done:
			copy(res, p.res)
			return p.err
		case <-ctx.Done():
			return ctx.Err()
		}
	case <-ctx.Done():
		c.unqueue(p)
		// Not sent, or sent and its answer no longer awaited: either way
		// the caller hears its own context's end.
		return ctx.Err()
	}
}

// unqueue takes p out of the queue and reports whether it was still there,
// not sent.
func (c *coalescer) unqueue(p *pending) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, q := range c.waiting {
		if q == p {
			c.waiting = append(c.waiting[:i], c.waiting[i+1:]...)
			c.queued -= len(p.res)
			return true
		}
	}
	return false
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
// staying busy, or nil, the lane freed, when nothing is queued. Batches
// whose caller has gone leave the queue unsent (store.ErrAbandoned).
func (c *coalescer) take() []*pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	live := c.waiting[:0]
	for _, p := range c.waiting {
		select {
		case <-p.gone:
			c.queued -= len(p.res)
			p.err = store.ErrAbandoned
			close(p.done)
		default:
			live = append(live, p)
		}
	}
	clear(c.waiting[len(live):])
	c.waiting = live
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
	c.queued -= ops
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
	start := time.Now()
	reply, err := doScript.Run(ctx, c.s.c, keys, args...).Result()
	c.took(start)
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
