package store

import (
	"context"
	"errors"
)

// ErrOverloaded reports a batch a store refused at once, without sending
// it, because the work already queued towards it is at its bound
// (admission control): the caller answers from its fallback instead of
// waiting behind a queue it would time out in. It is no store failure.
var ErrOverloaded = errors.New("store: overloaded")

// ErrAbandoned reports a batch that was never sent because its caller went
// away while it waited its turn (WithCaller). Nothing of it was spent. It
// is no store failure, and there is no one left to answer.
var ErrAbandoned = errors.New("store: abandoned by its caller")

// callerKey is the context key WithCaller sets.
type callerKey struct{}

// WithCaller returns ctx carrying caller's end as a signal a store reads
// before it sends a batch (CallerGone): a request runs on a context its
// caller cannot cancel, so that what reached the store is finished and no
// caller's going away counts as a store failure, but what has not reached
// it yet need not be sent for no one.
func WithCaller(ctx, caller context.Context) context.Context {
	return context.WithValue(ctx, callerKey{}, caller.Done())
}

// CallerGone is closed once the caller WithCaller recorded in ctx has gone
// away; nil, which never fires, when ctx carries none.
func CallerGone(ctx context.Context) <-chan struct{} {
	done, _ := ctx.Value(callerKey{}).(<-chan struct{})
	return done
}

// Gone reports whether the caller recorded in ctx (WithCaller) has gone
// away.
func Gone(ctx context.Context) bool {
	select {
	case <-CallerGone(ctx):
		return true
	default:
		return false
	}
}
