// Package revocation keeps the service tokens revoked before they expire
// (POST /v1/tokens/revoke), by jti, for every instance of a fleet.
//
// A revocation is written to the store the instances share and applied at
// once by the instance that took it; every other instance reads the
// store's set every half second (the instance's beat calls Ride) and
// applies what changed, so a revoked token is refused fleet-wide within
// about a second. Checks never wait on the store for it: Revoked answers
// from memory. While the store fails, each instance keeps applying the
// revocations it saw last, and a revocation it takes meanwhile is refused
// by it at once and sent to the store on every round until the store takes
// it. Without a shared store (the embedded store), a revocation applies to
// the instance that took it, until it restarts.
//
// A revocation is kept until the expiry of the token it names, after
// which the token is refused anyway; the set is bounded (MaxEntries).
package revocation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/guardian-sec/guardian/internal/tokens"
)

// MaxEntries is the most revocations in force at once, fleet-wide, unless
// Config.MaxEntries says otherwise.
const MaxEntries = 10_000

// Errors of Revoke.
var (
	// ErrFull reports a revocation refused because MaxEntries are in
	// force: they lapse as their tokens expire; a key rotation refuses
	// every token at once.
	ErrFull = errors.New("revocation: too many revocations in force")
	// ErrNotShared reports a revocation the store did not take: this
	// instance applies it, and sends it again on every round until the
	// store takes it; the other instances apply it once it has.
	ErrNotShared = errors.New("revocation: the store did not take the revocation")
)

// Entry is one revoked token: its jti, and until when it is refused (its
// expiry).
type Entry struct {
	JTI   string
	Until time.Time
}

// Snapshot is the fleet's revocations as the store holds them.
type Snapshot struct {
	// Version names this state of the set; it changes with every Add.
	Version string
	// Entries are the revocations whose Until has not passed.
	Entries []Entry
}

// Shared is the store the instances share their revocations through.
// Package redisagg implements it on Redis.
type Shared interface {
	// Add records e for every instance; a jti added twice is kept until
	// the later Until.
	Add(ctx context.Context, e Entry) error
	// Load returns the set in force; when version is still the set's, it
	// returns changed false and no entries.
	Load(ctx context.Context, version string) (snap Snapshot, changed bool, err error)
}

// Config configures a List.
type Config struct {
	// Shared is the fleet's store; nil keeps revocations in this instance
	// alone.
	Shared Shared
	// Now is the clock entries expire on (default time.Now).
	Now func() time.Time
	// Logger receives the first failure of a run of failing rounds and the
	// recovery (default slog.Default()).
	Logger *slog.Logger
	// MaxEntries bounds the revocations in force (default MaxEntries).
	MaxEntries int
	// Timeout bounds Revoke's write to the store (default 2s); the rounds
	// are bounded by the deadline of Ride's context.
	Timeout time.Duration
}

// defaultTimeout is Config.Timeout's default.
const defaultTimeout = 2 * time.Second

// List is an instance's view of the revoked tokens. It is a
// tokens.Revocations, read on every request from an immutable snapshot,
// which Ride, called on the instance's beat, refreshes from the store. It is
// safe for concurrent use; build one with New.
type List struct {
	shared  Shared
	now     func() time.Time
	log     *slog.Logger
	max     int
	timeout time.Duration

	// mu guards everything below but view.
	mu sync.Mutex
	// local holds the revocations taken here, kept until their Until
	// whatever the store answers; pending, those the store has not taken.
	local   map[string]time.Time
	pending map[string]time.Time
	// fleet is the store's set as last read, at version.
	fleet   map[string]time.Time
	version string
	failing bool
	// soonest is when the first entry of the view expires (zero: none).
	soonest time.Time

	// view is local and fleet together, what Revoked reads.
	view atomic.Pointer[map[string]time.Time]
}

var _ tokens.Revocations = (*List)(nil)

// New returns an empty List for cfg.
func New(cfg Config) *List {
	l := &List{shared: cfg.Shared, now: cfg.Now, log: cfg.Logger, max: cfg.MaxEntries, timeout: cfg.Timeout,
		local: map[string]time.Time{}, pending: map[string]time.Time{}, fleet: map[string]time.Time{}}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.max <= 0 {
		l.max = MaxEntries
	}
	if l.timeout <= 0 {
		l.timeout = defaultTimeout
	}
	l.view.Store(&map[string]time.Time{})
	return l
}

// Revoked reports whether the token of jti is revoked.
func (l *List) Revoked(jti string) bool {
	_, ok := (*l.view.Load())[jti]
	return ok
}

// Len is how many revocations are in force.
func (l *List) Len() int { return len(*l.view.Load()) }

// Revoke refuses the token of jti until until, here at once and, through
// the store, on every instance. It returns ErrFull when the most
// revocations allowed (Config.MaxEntries) are in force and jti is not among
// them, and an error wrapping ErrNotShared when
// the store did not take it (this instance applies it all the same).
func (l *List) Revoke(ctx context.Context, jti string, until time.Time) error {
	l.mu.Lock()
	if _, known := (*l.view.Load())[jti]; !known && l.Len() >= l.max {
		l.mu.Unlock()
		return ErrFull
	}
	if until.After(l.local[jti]) {
		l.local[jti] = until
	}
	if l.shared != nil {
		l.pending[jti] = l.local[jti]
	}
	l.publish()
	l.mu.Unlock()
	if l.shared == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := l.shared.Add(ctx, Entry{JTI: jti, Until: until}); err != nil {
		return fmt.Errorf("%w: %w", ErrNotShared, err)
	}
	l.mu.Lock()
	if !l.pending[jti].After(until) {
		delete(l.pending, jti)
	}
	l.mu.Unlock()
	return nil
}

// Ride sends the revocations the store has not taken yet, then reads the
// store's set if it changed. A failure keeps the set last read.
func (l *List) Ride(ctx context.Context, _ bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shared == nil {
		l.publishIfExpired()
		return
	}
	err := l.push(ctx)
	changed := false
	if err == nil {
		var snap Snapshot
		snap, changed, err = l.shared.Load(ctx, l.version)
		if err == nil && changed {
			l.version = snap.Version
			l.fleet = make(map[string]time.Time, len(snap.Entries))
			for _, e := range snap.Entries {
				l.fleet[e.JTI] = e.Until
			}
		}
	}
	switch {
	case err != nil && !l.failing:
		l.failing = true
		l.log.Warn("revocations: the store is not answering: applying the revocations last seen", "err", err)
	case err == nil && l.failing:
		l.failing = false
		l.log.Info("revocations: the store answers again")
	}
	if changed {
		l.publish()
	} else {
		l.publishIfExpired()
	}
}

// push sends every pending revocation to the store; l.mu is held.
func (l *List) push(ctx context.Context) error {
	for jti, until := range l.pending {
		if err := l.shared.Add(ctx, Entry{JTI: jti, Until: until}); err != nil {
			return err
		}
		delete(l.pending, jti)
	}
	return nil
}

// publishIfExpired publishes when an entry of the view expired; l.mu is
// held.
func (l *List) publishIfExpired() {
	if !l.soonest.IsZero() && !l.now().Before(l.soonest) {
		l.publish()
	}
}

// publish makes local and fleet, without what expired, the view Revoked
// reads; l.mu is held.
func (l *List) publish() {
	now := l.now()
	l.soonest = time.Time{}
	view := make(map[string]time.Time, len(l.local)+len(l.fleet))
	for _, m := range []map[string]time.Time{l.fleet, l.local} {
		for jti, until := range m {
			if !now.Before(until) {
				delete(m, jti)
				delete(l.pending, jti)
				continue
			}
			if until.After(view[jti]) {
				view[jti] = until
			}
			if l.soonest.IsZero() || until.Before(l.soonest) {
				l.soonest = until
			}
		}
	}
	l.view.Store(&view)
}
