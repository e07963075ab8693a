package server

import (
	"context"
	"sync"
	"testing"
	"time"
)

// recordRider records the rounds it is given.
type recordRider struct {
	mu     sync.Mutex
	rounds []bool
	// deadline reports whether every round had a deadline.
	deadline bool
	called   chan struct{}
}

func (r *recordRider) Ride(ctx context.Context, final bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := ctx.Deadline()
	r.deadline = ok && (len(r.rounds) == 0 || r.deadline)
	r.rounds = append(r.rounds, final)
	if len(r.rounds) == 3 {
		close(r.called)
	}
}

func TestBeatCallsItsRidersThenAFinalRound(t *testing.T) {
	a, b := &recordRider{called: make(chan struct{})}, &recordRider{called: make(chan struct{})}
	bt := newBeat(10*time.Millisecond, time.Second, a, b)
	bt.start()
	<-a.called
	<-b.called
	if err := bt.Close(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*recordRider{a, b} {
		r.mu.Lock()
		n := len(r.rounds)
		if n < 4 || !r.rounds[n-1] || !r.deadline {
			t.Errorf("rounds %v, deadline on each %v: want at least 3 rounds, then a final one, each with a deadline", r.rounds, r.deadline)
		}
		for _, final := range r.rounds[:n-1] {
			if final {
				t.Errorf("rounds %v: a final round before Close", r.rounds)
			}
		}
		r.mu.Unlock()
	}
}

func TestBeatNeverStartedStillHasItsFinalRound(t *testing.T) {
	r := &recordRider{called: make(chan struct{})}
	if err := newBeat(time.Hour, time.Second, r).Close(); err != nil {
		t.Fatal(err)
	}
	if len(r.rounds) != 1 || !r.rounds[0] {
		t.Fatalf("rounds %v, want one final round", r.rounds)
	}
}
