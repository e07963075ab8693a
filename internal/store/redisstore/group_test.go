package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// gate is a go-redis hook that holds the first EVALSHA until opened, so
// that a test can line up the batches that queue behind it.
type gate struct {
	once   sync.Once
	held   chan struct{}
	opened chan struct{}
}

func newGate() *gate { return &gate{held: make(chan struct{}), opened: make(chan struct{})} }

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			first := false
			g.once.Do(func() { first = true })
			if first {
				close(g.held)
				<-g.opened
			}
		}
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestGroupCommit: with its one lane busy, 49 checks against a budget of 20
// queue and go out as one script call; exactly 20 of the 50 are spent, a
// peek among them spends nothing and sees what the batches before it
// spent, and a check on a key that is not guardian's state fails alone.
func TestGroupCommit(t *testing.T) {
	srv := redistest.Start(t)
	node := srv.Client(t)
	g := newGate()
	node.AddHook(g)
	s := redisstore.New(node, redisstore.Config{Lanes: 1})
	ctx := context.Background()
	setState(t, node, "guardian:v3:{junk}:r", "garbage")

	const callers = 50
	budget := rate("guardian:v3:{acct}:login", 1, time.Hour, 20)
	type outcome struct {
		res store.Result
		err error
	}
	out := make([]outcome, callers)
	var wg sync.WaitGroup
	run := func(i int) {
		ops := []store.Op{budget}
		if i == callers-1 {
			ops = []store.Op{rate("guardian:v3:{junk}:r", 1, time.Hour, 20)}
		}
		res := make([]store.Result, 1)
		var err error
		if i == 30 {
			err = s.Peek(ctx, ops, res)
		} else {
			err = s.Do(ctx, ops, res)
		}
		out[i] = outcome{res[0], err}
	}
	before := redistest.CommandStats(t, node)
	wg.Go(func() { run(0) })
	<-g.held
	for i := 1; i < callers; i++ {
		wg.Go(func() { run(i) })
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Queued() < callers-1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d batches queued, want %d", s.Queued(), callers-1)
		}
		time.Sleep(time.Millisecond)
	}
	close(g.opened)
	wg.Wait()
	ran := redistest.Ran(before, redistest.CommandStats(t, node))
	if ran["evalsha"] != 2 || ran["time"] != 2 {
		t.Errorf("Redis ran %v: want 2 script calls (the first check, then the 49 queued), each reading the clock once", ran)
	}

	spent := 0
	for i, o := range out {
		switch {
		case i == callers-1:
			if o.err == nil || !strings.Contains(o.err.Error(), "redisstore: do: ") {
				t.Errorf("check on a garbage key: err %v, want a redisstore error", o.err)
			}
			continue
		case o.err != nil:
			t.Errorf("caller %d: %v", i, o.err)
		case i == 30 && o.res.Spent:
			t.Errorf("the peek spent: %+v", o.res)
		}
		if o.res.Spent {
			spent++
		}
	}
	if spent != 20 {
		t.Errorf("%d checks spent against a budget of 20", spent)
	}
	// The queue went out in arrival order, so what the peek saw is what
	// the batches ahead of it left: consistent with the store's end state.
	if p := out[30].res; p.Allowed != (p.Remaining > 0) {
		t.Errorf("peek: %+v", p)
	}
	res := peek(t, s, budget)
	if res[0].Allowed || res[0].Remaining != 0 {
		t.Errorf("after the group: %+v, want the budget spent", res[0])
	}
}

// TestGroupCommitIdle: one check at a time never waits for another: every
// check is a script call of its own.
func TestGroupCommitIdle(t *testing.T) {
	srv := redistest.Start(t)
	node := srv.Client(t)
	s := redisstore.New(node, redisstore.Config{})
	op := rate("guardian:v3:{acct}:login", 1, time.Microsecond, 1<<30)
	do(t, s, op)
	before := redistest.CommandStats(t, node)
	for range 20 {
		do(t, s, op)
	}
	if ran := redistest.Ran(before, redistest.CommandStats(t, node)); ran["evalsha"] != 20 {
		t.Errorf("20 checks one after another: Redis ran %v, want 20 script calls", ran)
	}
}

// TestAdmissionControl: with the lane held, batches queue until MaxQueued
// ops wait; the next is refused at once with store.ErrOverloaded, sending
// nothing. Of the queued batches, those whose caller went away before the
// held call returned are never sent (store.ErrAbandoned) and spend
// nothing; the others are spent exactly once each, in one grouped call.
func TestAdmissionControl(t *testing.T) {
	srv := redistest.Start(t)
	node := srv.Client(t)
	g := newGate()
	node.AddHook(g)
	const maxQueued = 10
	s := redisstore.New(node, redisstore.Config{Lanes: 1, MaxQueued: maxQueued})
	budget := rate("guardian:v3:{acct}:login", 1, time.Hour, 100)

	var wg sync.WaitGroup
	wg.Go(func() { do(t, s, budget) })
	<-g.held
	before := redistest.CommandStats(t, node)

	// maxQueued batches of one op fill the queue; every other caller goes
	// away while its batch waits.
	errs := make([]error, maxQueued)
	cancels := make([]context.CancelFunc, maxQueued)
	for i := range maxQueued {
		caller, cancel := context.WithCancel(context.Background())
		cancels[i] = cancel
		ctx := store.WithCaller(context.WithoutCancel(caller), caller)
		wg.Go(func() { errs[i] = s.Do(ctx, []store.Op{budget}, make([]store.Result, 1)) })
		for s.Queued() < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	err := s.Do(context.Background(), []store.Op{budget}, make([]store.Result, 1))
	if !errors.Is(err, store.ErrOverloaded) {
		t.Fatalf("a batch past a full queue: err %v, want store.ErrOverloaded", err)
	}
	for i := 0; i < maxQueued; i += 2 {
		cancels[i]()
	}
	for s.Queued() > maxQueued/2 {
		time.Sleep(time.Millisecond)
	}
	close(g.opened)
	wg.Wait()

	abandoned := 0
	for i, err := range errs {
		switch {
		case i%2 == 0 && errors.Is(err, store.ErrAbandoned):
			abandoned++
		case i%2 == 1 && err != nil:
			t.Errorf("caller %d, still there: %v", i, err)
		case i%2 == 0:
			t.Errorf("caller %d, gone while queued: err %v, want store.ErrAbandoned", i, err)
		}
		cancels[i]()
	}
	if abandoned != maxQueued/2 {
		t.Errorf("%d batches abandoned, want %d", abandoned, maxQueued/2)
	}
	// The held call, then one grouped call of the 5 that stayed; the
	// refused batch and the abandoned ones sent nothing.
	if ran := redistest.Ran(before, redistest.CommandStats(t, node)); ran["evalsha"] != 2 {
		t.Errorf("Redis ran %v: want 2 script calls", ran)
	}
	if res := peek(t, s, budget); res[0].Remaining != 100-1-maxQueued/2 {
		t.Errorf("after: %d remaining, want %d: exactly the held check and the %d that stayed spent", res[0].Remaining, 100-1-maxQueued/2, maxQueued/2)
	}
}

// TestAbandonedBeforeSent: a caller already gone is never sent, even with a
// lane free.
func TestAbandonedBeforeSent(t *testing.T) {
	srv := redistest.Start(t)
	node := srv.Client(t)
	s := redisstore.New(node, redisstore.Config{})
	caller, cancel := context.WithCancel(context.Background())
	cancel()
	ctx := store.WithCaller(context.WithoutCancel(caller), caller)
	before := redistest.CommandStats(t, node)
	if err := s.Do(ctx, []store.Op{rate("guardian:v3:{acct}:login", 1, time.Hour, 5)}, make([]store.Result, 1)); !errors.Is(err, store.ErrAbandoned) {
		t.Fatalf("err %v, want store.ErrAbandoned", err)
	}
	if ran := redistest.Ran(before, redistest.CommandStats(t, node)); ran["evalsha"] != 0 {
		t.Errorf("Redis ran %v for a check whose caller was gone", ran)
	}
}

// TestAdmissionByDeadline: with the lane held and calls taking 10ms of
// late, a batch whose deadline is 5ms away is refused at once — what is
// left of the call in flight and its own call would outlast it — while one
// with a second to spare queues and is spent.
func TestAdmissionByDeadline(t *testing.T) {
	srv := redistest.Start(t)
	node := srv.Client(t)
	g := newGate()
	node.AddHook(g)
	s := redisstore.New(node, redisstore.Config{Lanes: 1})
	budget := rate("guardian:v3:{acct}:login", 1, time.Hour, 100)
	var wg sync.WaitGroup
	wg.Go(func() { do(t, s, budget) })
	<-g.held
	s.SetCallTime(10 * time.Millisecond)

	short, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if err := s.Do(short, []store.Op{budget}, make([]store.Result, 1)); !errors.Is(err, store.ErrOverloaded) {
		t.Fatalf("a batch due in 5ms behind a 10ms call: err %v, want store.ErrOverloaded", err)
	}
	long, cancelLong := context.WithTimeout(context.Background(), time.Second)
	defer cancelLong()
	var err error
	wg.Go(func() { err = s.Do(long, []store.Op{budget}, make([]store.Result, 1)) })
	for s.Queued() < 1 {
		time.Sleep(time.Millisecond)
	}
	close(g.opened)
	wg.Wait()
	if err != nil {
		t.Fatalf("a batch with a second to spare: %v", err)
	}
	if res := peek(t, s, budget); res[0].Remaining != 98 {
		t.Errorf("after: %d remaining, want 98: the held check and the queued one spent, the refused one not", res[0].Remaining)
	}
}
