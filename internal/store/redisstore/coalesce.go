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
//
// A report's mark (Store.MarkOnce) goes out in a call of its own when a
// lane is free, beside the lanes, as it always did, and rides in the next
// grouped call when every lane is busy: one call, one round trip, for the
// checks and reports that arrived meanwhile, each check still all-or-nothing.
// A mark is never refused for a full queue nor dropped when its caller goes
// away: one the queue has no room for, or that the queue would keep past its
// deadline, goes out on its own at once. One whose own deadline passes while
// it waits ends with it, as a call of its own would time out. A key of
// another Redis type (a hash where a string belongs) fails the whole call,
// a report's keys as a check's always did.

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
	queued  int // the weight (pending.n) of what is waiting
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

// pending is a queued batch or mark: its script arguments, made when it
// was queued (so that its caller's ops may be reused as soon as it
// returns), and room for its answer. done is closed once res (or marked)
// and err are set.
type pending struct {
	keys []string
	args []any
	// n is its weight in the queue: a batch's ops, a mark's entries and
	// the mark.
	n        int
	res      []store.Result // a batch's results
	mark     bool           // a report's mark, not a batch
	marked   bool           // a mark's answer: whether this call set it
	err      error
	deadline time.Time       // zero: none
	gone     <-chan struct{} // its caller's end (store.CallerGone); nil for a mark
	done     chan struct{}
}

// width is how many integers of the do script's reply are p's.
func (p *pending) width() int {
	if p.mark {
		return 1
	}
	return replyWidth * len(p.res)
}

// answer reads p's part of the do script's reply.
func (p *pending) answer(vals []any) error {
	if !p.mark {
		return parseBatch(vals, p.res)
	}
	marked, err := parseMark(vals[0])
	p.marked = marked
	return err
}

// free reports whether a call may go out at once: a lane is free and
// nothing is queued. Under c.mu.
func (c *coalescer) free() bool {
	return c.busy < c.lanes && len(c.waiting) == 0
}

// queue puts p at the end of the queue. Under c.mu.
func (c *coalescer) queue(p *pending) {
	c.waiting = append(c.waiting, p)
	c.queued += p.n
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
	if c.free() {
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
	p := &pending{n: len(ops), res: make([]store.Result, len(ops)), deadline: deadline, gone: gone, done: make(chan struct{})}
	p.keys, p.args = appendOps(make([]string, 0, len(ops)), make([]any, 0, doArgsPerBatch+doArgsPerOp*len(ops)), mode, ops)
	c.queue(p)
	c.mu.Unlock()
	if answered, err := c.wait(ctx, p); !answered {
		return err
	}
	copy(res, p.res)
	return p.err
}

// mark sets a report's mark at key for ttl microseconds unless it is set
// and, when it set it, applies entries (Store.MarkOnce): in a call of its
// own unless every lane is busy and the queue has room for it before its
// deadline, when it rides in the next grouped call.
func (c *coalescer) mark(ctx context.Context, key string, ttl int64, entries []giveback) (bool, error) {
	n := 1 + len(entries)
	deadline, bounded := ctx.Deadline()
	c.mu.Lock()
	if c.free() || !c.fits(n, deadline, bounded) {
		c.mu.Unlock()
		return c.s.markOnce(ctx, c.s.nowArg(), key, ttl, entries)
	}
	p := &pending{n: n, mark: true, deadline: deadline, done: make(chan struct{})}
	p.keys, p.args = appendMark(make([]string, 0, n), make([]any, 0, doArgsPerBatch+1+2*len(entries)), key, ttl, entries)
	c.queue(p)
	c.mu.Unlock()
	if answered, err := c.wait(ctx, p); !answered {
		return false, err
	}
	return p.marked, p.err
}

// wait waits for p's answer and reports whether it came (p's answer may
// then be read); when it did not, the error says why: p's caller went
// away before it was sent (store.ErrAbandoned), or ctx ended.
func (c *coalescer) wait(ctx context.Context, p *pending) (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	case <-p.gone:
		if c.unqueue(p) {
			return false, store.ErrAbandoned
		}
		// Sent: finished, like every call that reached the store.
		select {
		case <-p.done:
			return true, p.err
		case <-ctx.Done():
			return false, ctx.Err()
		}
	case <-ctx.Done():
		c.unqueue(p)
		// Not sent, or sent and its answer no longer awaited: either way
		// the caller hears its own context's end.
		return false, ctx.Err()
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
			c.queued -= p.n
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
			c.queued -= p.n
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
	for n < len(c.waiting) && (n == 0 || ops+c.waiting[n].n <= maxGroupOps) {
		ops += c.waiting[n].n
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

	nkeys, nargs, width := 0, 0, 0
	for _, p := range group {
		nkeys, nargs, width = nkeys+len(p.keys), nargs+len(p.args), width+p.width()
	}
	keys := make([]string, 0, nkeys)
	args := appendDoHeader(make([]any, 0, 2+nargs), c.s.nowArg(), len(group))
	for _, p := range group {
		keys = append(keys, p.keys...)
		args = append(args, p.args...)
	}
	start := time.Now()
	reply, err := c.s.evalDo(ctx, keys, args)
	c.took(start)
	var vals []any
	if err == nil {
		vals, err = replyInts(reply, width)
	}
	at := 0
	for _, p := range group {
		p.err = err
		if err == nil {
			n := p.width()
			p.err = p.answer(vals[at : at+n])
			at += n
		}
		close(p.done)
	}
}
