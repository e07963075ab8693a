package server

import (
	"context"
	"time"
)

// The cadence of an instance's fleet work beside the failure counts: its
// heartbeat (package fleet), the flush of its shadow tallies (package
// shadow) and the read of the revoked tokens (package revocation) every
// beatEvery, each round of each bounded by beatTimeout.
const (
	beatEvery   = 500 * time.Millisecond
	beatTimeout = 200 * time.Millisecond
)

// rider is work a beat calls. It handles and logs its own errors.
type rider interface {
	// Ride does one round of the work; the final round comes on
	// shutdown, once.
	Ride(ctx context.Context, final bool)
}

// beat calls its riders, in order, once at start and then every interval
// until Close, which calls each once more with final set; every call has a
// deadline of timeout. It is the instance's own loop, apart from the
// global failure rate's, so neither waits on the other.
type beat struct {
	every, timeout time.Duration
	riders         []rider
	stop, done     chan struct{}
}

// newBeat returns a beat of riders, not started.
func newBeat(every, timeout time.Duration, riders ...rider) *beat {
	return &beat{every: every, timeout: timeout, riders: riders}
}

// start runs the loop in the background. A beat starts once.
func (b *beat) start() {
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.done)
		t := time.NewTicker(b.every)
		defer t.Stop()
		for {
			b.ride(false)
			select {
			case <-b.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Close stops the loop, waiting for a round in progress, and gives every
// rider its final round, started or not.
func (b *beat) Close() error {
	if b.stop != nil {
		close(b.stop)
		<-b.done
		b.stop = nil
	}
	b.ride(true)
	return nil
}

// ride calls every rider once, each within the timeout.
func (b *beat) ride(final bool) {
	for _, r := range b.riders {
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		r.Ride(ctx, final)
		cancel()
	}
}
