package incident

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
)

const (
	defaultTimeout = 500 * time.Millisecond
	// defaultWriteEvery is how often an instance writes its snapshot.
	defaultWriteEvery = 2 * time.Second
	// keep is how long the store keeps the snapshots after the last
	// write: as long as a hard stop is listed.
	keep = HardStopWindow
)

// Shared is the store where the fleet's snapshots meet. Package redisagg
// implements it on Redis.
type Shared interface {
	// Put stores snap, an encoded Snapshot, as instance's, replacing what
	// it stored before, and keeps every snapshot for keep after this
	// write.
	Put(ctx context.Context, instance string, snap []byte, keep time.Duration) error
	// Get returns every instance's stored snapshot.
	Get(ctx context.Context) (map[string][]byte, error)
}

// FleetConfig configures a Fleet. Book, Instance and Name are required.
type FleetConfig struct {
	Book *Book
	// Shared is where snapshots meet; nil means this instance alone, as
	// on the embedded store.
	Shared Shared
	// Instance names this instance, as package fleet does.
	Instance string
	// Name turns a hashed subject into the pseudonym a view shows
	// (keys.Hasher.SubjectPseudonym).
	Name func(subject string) string
	// Timeout bounds the store call of View (default 500ms).
	Timeout time.Duration
	// WriteEvery is how often Ride writes the snapshot (default 2s).
	WriteEvery time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// Fleet shares this instance's Book with the fleet and sums the fleet's.
// It is safe for concurrent use; build one with NewFleet.
type Fleet struct {
	cfg     FleetConfig
	log     *slog.Logger
	mu      sync.Mutex
	written time.Time
	failing atomic.Bool
}

// NewFleet returns a Fleet for cfg, with defaults for zero fields.
func NewFleet(cfg FleetConfig) *Fleet {
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if cfg.WriteEvery <= 0 {
		cfg.WriteEvery = defaultWriteEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	f := &Fleet{cfg: cfg, log: cfg.Logger}
	if f.log == nil {
		f.log = slog.Default()
	}
	return f
}

// Ride writes this instance's snapshot, every WriteEvery and on the final
// round; a server's beat calls it.
func (f *Fleet) Ride(ctx context.Context, final bool) {
	if f.cfg.Shared == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.Now()
	if !final && now.Sub(f.written) < f.cfg.WriteEvery {
		return
	}
	b, err := json.Marshal(f.cfg.Book.Snapshot(f.cfg.Instance))
	if err == nil {
		err = f.cfg.Shared.Put(ctx, f.cfg.Instance, b, keep)
	}
	switch {
	case err != nil && f.failing.CompareAndSwap(false, true):
		f.log.Warn("incident: could not share this instance's figures; the fleet's view lacks them while it goes on", "err", err)
	case err == nil:
		f.written = now
		if f.failing.CompareAndSwap(true, false) {
			f.log.Info("incident: figures shared again")
		}
	}
}

// View returns the incident view: the fleet's figures, this instance's
// as they are now. On the embedded store it is this instance's, the
// whole fleet; while the store cannot be read within Timeout, this
// instance's alone, marked unavailable. A call in a tenant's context
// (keys.TenantOf) lists that tenant's hard stops alone.
func (f *Fleet) View(ctx context.Context) View {
	v := f.view(ctx)
	if t := keys.TenantOf(ctx); t != "" {
		v.HardStops = slices.DeleteFunc(v.HardStops, func(h HardStopView) bool { return h.Tenant != t })
	}
	return v
}

// view is View for every tenant.
func (f *Fleet) view(ctx context.Context) View {
	now := f.cfg.Now()
	self := f.cfg.Book.Snapshot(f.cfg.Instance)
	if f.cfg.Shared == nil {
		v := merge([]Snapshot{self}, now, f.cfg.Name)
		v.Fleet.Available = true
		return v
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	stored, err := f.cfg.Shared.Get(ctx)
	if err != nil {
		f.log.Warn("incident: could not read the fleet's figures; showing this instance's alone", "err", err)
		v := merge([]Snapshot{self}, now, f.cfg.Name)
		v.Fleet.Shared = true
		return v
	}
	snaps := []Snapshot{self}
	for id, raw := range stored {
		var s Snapshot
		if id == f.cfg.Instance || json.Unmarshal(raw, &s) != nil || now.Sub(s.At) >= HardStopWindow {
			continue
		}
		snaps = append(snaps, s)
	}
	v := merge(snaps, now, f.cfg.Name)
	v.Fleet.Available, v.Fleet.Shared = true, true
	return v
}
