// Package fleet lets each guardian instance see the others sharing its
// store: every instance writes a heartbeat (its id, version, the hash of its
// rules, when they were loaded and whether its store answers) and GET
// /v1/fleet lists the heartbeats that are fresh.
//
// A heartbeat names nothing of users: no account, address or key. The
// instance's server calls Ride on a loop of its own, every 500ms, so an
// instance writes one every half second and the store sees two
// small calls a second per instance, whatever the traffic. An instance is
// listed while its last heartbeat is younger than TTL (10s by default) by
// the store's own clock: a killed instance drops out within TTL plus one
// heartbeat, and one that shuts down cleanly at once.
//
// On the embedded store, or when the store cannot be read, the view lists
// this instance alone and says it is partial.
package fleet

import (
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/version"
)

const (
	defaultTTL     = 10 * time.Second
	defaultTimeout = 500 * time.Millisecond
)

// The store states of an Instance.
const (
	StoreOK       = "ok"
	StoreDegraded = "degraded"
)

// Instance is one instance's heartbeat, as GET /v1/fleet lists it.
type Instance struct {
	// ID names the instance: its host name and a random suffix.
	ID      string `json:"id"`
	Version string `json:"version"`
	// RulesHash is rules.Set.Hash of the rules in force.
	RulesHash     string    `json:"rules_hash"`
	RulesLoadedAt time.Time `json:"rules_loaded_at"`
	// Store is StoreOK while the instance's store answers, StoreDegraded
	// while its fallback decides.
	Store string `json:"store"`
	// LastSeen is when the heartbeat was written, by the store's clock.
	LastSeen time.Time `json:"last_seen"`
}

// View is the fleet as one instance sees it.
type View struct {
	// Instances are sorted by ID; never nil.
	Instances []Instance `json:"instances"`
	// RulesConsistent reports that every instance listed runs rules of the
	// same hash.
	RulesConsistent bool `json:"rules_consistent"`
	// Partial reports that only this instance is listed: the store is the
	// embedded one, or it could not be read.
	Partial bool `json:"partial,omitempty"`
	// Unavailable reports that the store could not be read: the fleet
	// cannot be seen, so RulesConsistent is false, never a claim about
	// instances this one cannot see.
	Unavailable bool `json:"unavailable,omitempty"`
}

// Shared is the store where the heartbeats of a fleet meet. Package redisagg
// implements it on Redis.
type Shared interface {
	// Beat records in as seen now, by the store's clock, and forgets the
	// instances not seen for ttl.
	Beat(ctx context.Context, in Instance, ttl time.Duration) error
	// List returns the instances seen within the last ttl, by the store's
	// clock, with LastSeen set.
	List(ctx context.Context, ttl time.Duration) ([]Instance, error)
	// Leave forgets the instance called id.
	Leave(ctx context.Context, id string) error
}

// Config configures a Fleet. Rules is required.
type Config struct {
	// ID names this instance; empty means the host name and a random
	// suffix, so that instances on one host differ.
	ID string
	// Version is guardian's version; empty means the running binary's
	// (package version).
	Version string
	// Rules returns the rules in force.
	Rules func() *rules.Set
	// StoreHealthy reports whether the store answers; nil means always.
	StoreHealthy func() bool
	// Shared is where the heartbeats meet; nil means this instance alone,
	// as on the embedded store.
	Shared Shared
	// TTL is how long an instance is listed after its last heartbeat; 0
	// means 10s. Every instance of a fleet should use the same.
	TTL time.Duration
	// Timeout bounds the store call of View; 0 means 500ms.
	Timeout time.Duration
	// Now is the clock of this instance's own entry when the view is
	// partial; nil means time.Now.
	Now func() time.Time
	// Logger receives a line when heartbeats start failing and when they
	// recover; nil means slog.Default().
	Logger *slog.Logger
}

// Fleet writes this instance's heartbeat and reads the fleet's. It is safe
// for concurrent use; build one with New.
type Fleet struct {
	cfg Config
	log *slog.Logger
	// failing is set while heartbeats fail, so that an outage logs once.
	failing atomic.Bool
}

// New returns a Fleet for cfg, with defaults for zero fields.
func New(cfg Config) *Fleet {
	if cfg.ID == "" {
		cfg.ID = defaultID()
	}
	if cfg.Version == "" {
		cfg.Version = version.Get().Version
	}
	if cfg.StoreHealthy == nil {
		cfg.StoreHealthy = func() bool { return true }
	}
	if cfg.TTL <= 0 {
		cfg.TTL = defaultTTL
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
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

// defaultID is the host name (a pod's name on Kubernetes) and six random
// characters.
func defaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "guardian"
	}
	return host + "-" + strings.ToLower(rand.Text()[:6])
}

// ID returns this instance's id.
func (f *Fleet) ID() string { return f.cfg.ID }

// Self returns this instance's heartbeat as of now, by its own clock.
func (f *Fleet) Self() Instance {
	set := f.cfg.Rules()
	in := Instance{
		ID:       f.cfg.ID,
		Version:  f.cfg.Version,
		Store:    StoreOK,
		LastSeen: f.cfg.Now().UTC().Truncate(time.Millisecond),
	}
	if set != nil {
		in.RulesHash, in.RulesLoadedAt = set.Hash(), set.LoadedAt.UTC().Truncate(time.Second)
	}
	if !f.cfg.StoreHealthy() {
		in.Store = StoreDegraded
	}
	return in
}

// Ride writes this instance's heartbeat, or on the final round removes it,
// so that an instance that shuts down cleanly leaves the list at once.
func (f *Fleet) Ride(ctx context.Context, final bool) {
	if f.cfg.Shared == nil {
		return
	}
	if final {
		if err := f.cfg.Shared.Leave(ctx, f.cfg.ID); err != nil {
			f.log.Warn("fleet: could not remove this instance's heartbeat", "err", err)
		}
		return
	}
	err := f.cfg.Shared.Beat(ctx, f.Self(), f.cfg.TTL)
	switch {
	case err != nil && f.failing.CompareAndSwap(false, true):
		f.log.Warn("fleet: heartbeat failed; the other instances stop listing this one if it goes on", "err", err)
	case err == nil && f.failing.CompareAndSwap(true, false):
		f.log.Info("fleet: heartbeat written again")
	}
}

// View returns the instances sharing the store. On the embedded store, or
// when the store does not answer within Timeout, it lists this instance
// alone and is Partial. This instance is always listed, as it is now, even
// before its first heartbeat reached the store.
func (f *Fleet) View(ctx context.Context) View {
	self := f.Self()
	if f.cfg.Shared == nil {
		return newView([]Instance{self}, true)
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	list, err := f.cfg.Shared.List(ctx, f.cfg.TTL)
	if err != nil {
		f.log.Warn("fleet: could not read the fleet's heartbeats; listing this instance alone", "err", err)
		v := newView([]Instance{self}, true)
		v.RulesConsistent, v.Unavailable = false, true
		return v
	}
	i := slices.IndexFunc(list, func(in Instance) bool { return in.ID == self.ID })
	if i < 0 {
		list = append(list, self)
	} else {
		// This instance's own state is fresher than its last heartbeat.
		self.LastSeen = list[i].LastSeen
		list[i] = self
	}
	return newView(list, false)
}

// newView sorts list and tells whether its rules agree.
func newView(list []Instance, partial bool) View {
	slices.SortFunc(list, func(a, b Instance) int { return strings.Compare(a.ID, b.ID) })
	consistent := true
	for _, in := range list[1:] {
		if in.RulesHash != list[0].RulesHash {
			consistent = false
		}
	}
	return View{Instances: list, RulesConsistent: consistent, Partial: partial}
}
