// Package server assembles a guardian instance from its configuration: the
// store, the rules, the engine and the HTTP API, with reload and graceful
// shutdown. cmd/guardian parses flags into a Config; end-to-end tests build a
// Config directly and run real instances on :0.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/aggregate/redisagg"
	"github.com/guardian-sec/guardian/internal/decisionlog"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/failclosed"
	"github.com/guardian-sec/guardian/internal/httpapi"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// Config is everything an instance is built from.
type Config struct {
	// Addr is the listen address (":8080"; ":0" picks a free port).
	Addr string
	// RulesPath is the rules file; empty uses the built-in rules.
	RulesPath string
	// RedisURL selects the Redis store; empty uses the embedded store.
	RedisURL string
	// Redis holds the Redis connection settings kept out of RedisURL: the
	// TLS files and the password file.
	Redis redisstore.Options
	// SigningKey signs service tokens, attempt ids and device tokens, and
	// keys the hashes of identifiers unless HashKey is set. Required.
	SigningKey secret.Key
	// PreviousSigningKeys are signing keys being rotated out: what they
	// signed still verifies; nothing is signed with them.
	PreviousSigningKeys []secret.Key
	// HashKey keys the hashes of accounts, addresses and recipients, the
	// names of every key in the store and the decision log's pseudonyms.
	// The zero Key derives it from SigningKey; a HashKey of its own lets the
	// signing key rotate without resetting every limit.
	HashKey secret.Key
	// StoreTimeout is the deadline of one store call (default 5ms).
	StoreTimeout time.Duration
	// FleetSize is how many instances share the store (default 1).
	FleetSize int
	// Logger receives guardian's logs (default slog.Default()).
	Logger *slog.Logger
	// Store, when set, is used as the primary store instead of the one
	// RedisURL selects (tests only).
	Store store.Store
	// Now is the clock for attempt ids, device tokens and the aggregate
	// (default time.Now; tests only).
	Now func() time.Time
	// DecisionLog, when set, receives the decision log: one line per
	// check and report in the replay format, identifiers pseudonymised
	// (package decisionlog). Shutdown writes what is buffered; closing the
	// writer is the caller's.
	DecisionLog io.Writer
	// PprofAddr, when set, serves Go's pprof profiles on its own listener,
	// apart from the API (bind it to loopback). Empty: off.
	PprofAddr string
}

// Server is one running guardian instance.
type Server struct {
	cfg      Config
	log      *slog.Logger
	registry *prometheus.Registry
	holder   rules.Holder
	shadow   *shadow.Book
	agg      *aggregate.Aggregate
	engine   *engine.Engine
	api      *httpapi.API
	http     *http.Server

	closers   []func() error
	pprofAddr string

	reloadMu sync.Mutex
	ln       net.Listener
	done     chan struct{}
	serveErr error
}

// New builds an instance from cfg; it loads the rules and opens the store but
// does not listen yet.
func New(cfg Config) (*Server, error) {
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = 5 * time.Millisecond
	}
	if cfg.FleetSize < 1 {
		cfg.FleetSize = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HashKey.IsZero() {
		cfg.HashKey = cfg.SigningKey
	}
	s := &Server{cfg: cfg, log: cfg.Logger, registry: prometheus.NewRegistry(), shadow: shadow.NewBook()}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(s.registry)

	set, err := s.loadRules()
	if err != nil {
		return nil, err
	}
	s.applyRules(nil, set)

	st := cfg.Store
	storeHealthy := func() bool { return true }
	var shared aggregate.Shared
	switch {
	case st != nil:
	case cfg.RedisURL != "":
		client, err := redisstore.OpenWith(cfg.RedisURL, cfg.Redis)
		if err != nil {
			return nil, fmt.Errorf("server: --redis-url: %w", err)
		}
		s.closers = append(s.closers, client.Close)
		primary := redisstore.New(client, redisstore.Config{})
		warm, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = primary.CheckAccess(warm)
		if err == nil {
			err = primary.Warm(warm)
		}
		cancel()
		switch {
		case errors.Is(err, redisstore.ErrUnsupported), errors.Is(err, redisstore.ErrAccess):
			return nil, fmt.Errorf("server: --redis-url: %w", err)
		case err != nil:
			s.log.Warn("redis not answering at start: the fallback decides until it does", "err", err)
		}
		fc := failclosed.New(failclosed.Config{
			Primary:   primary,
			Probe:     func(ctx context.Context) error { return client.Ping(ctx).Err() },
			Timeout:   cfg.StoreTimeout,
			FleetSize: cfg.FleetSize,
			Metrics:   m,
			Logger:    s.log,
		})
		st, storeHealthy = fc, fc.Healthy
		shared = redisagg.New(client)
	default:
		s.log.Warn("no --redis-url: limits live in this process only, correct for a single instance")
		st = memstore.New(memstore.Config{})
	}
	s.agg = aggregate.New(aggregate.Config{
		Now:       cfg.Now,
		Shared:    shared,
		FleetSize: cfg.FleetSize,
		Observe:   func(flow string, perSecond float64) { m.GlobalFailures.WithLabelValues(flow).Set(perSecond) },
		Logger:    s.log,
	})
	s.trackGlobal(set)
	// First among the closers: its last flush needs the Redis client.
	s.closers = append([]func() error{s.agg.Close}, s.closers...)
	s.engine = engine.New(engine.Config{
		Rules:     &s.holder,
		Store:     st,
		Hasher:    keys.NewHasher(cfg.HashKey),
		Attempts:  tokens.NewAttempts(cfg.SigningKey, cfg.PreviousSigningKeys...),
		Devices:   tokens.NewDevices(cfg.SigningKey, 0, cfg.PreviousSigningKeys...),
		Aggregate: s.agg,
		Shadow:    s.shadow,
		Metrics:   m,
		Now:       cfg.Now,
	})
	var decider httpapi.Decider = s.engine
	if cfg.DecisionLog != nil {
		dl := decisionlog.New(decisionlog.Config{Out: cfg.DecisionLog, Key: cfg.HashKey, Logger: s.log, Registerer: s.registry})
		s.closers = append(s.closers, dl.Close)
		decider = decisionlog.Wrap(s.engine, dl)
	}
	s.api = httpapi.New(httpapi.Config{
		Engine:       decider,
		Tokens:       tokens.NewService(cfg.SigningKey, cfg.PreviousSigningKeys...),
		Shadow:       s.shadow,
		Reload:       s.Reload,
		StoreHealthy: storeHealthy,
		Gatherer:     s.registry,
		Logger:       s.log,
		Now:          cfg.Now,
	})
	s.http = &http.Server{
		Handler:           s.api,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// Handler returns the instance's HTTP handler.
func (s *Server) Handler() http.Handler { return s.api }

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	s.ln = ln
	if s.cfg.PprofAddr != "" {
		if s.pprofAddr, err = s.startPprof(s.cfg.PprofAddr); err != nil {
			ln.Close()
			return err
		}
	}
	s.done = make(chan struct{})
	s.agg.Start()
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.serveErr = err
		}
	}()
	set := s.holder.Load()
	s.log.Info("guardian started", "addr", ln.Addr().String(), "rules", set.Source, "rule_count", len(set.Rules), "fleet_size", s.cfg.FleetSize)
	return nil
}

// PprofAddr is the address profiles are served on, once started with
// Config.PprofAddr; empty otherwise.
func (s *Server) PprofAddr() string { return s.pprofAddr }

// Addr is the address the instance listens on, once started.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops accepting requests and waits for in-flight ones to finish,
// or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.Shutdown(ctx)
	if s.done != nil {
		<-s.done
	}
	for _, c := range s.closers {
		_ = c()
	}
	s.log.Info("guardian stopped")
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return s.serveErr
}

// Reload re-reads the rules file. An invalid file is refused and the rules in
// force stay; in-flight checks finish on the set they started with.
func (s *Server) Reload() (*rules.Set, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	set, err := s.loadRules()
	if err != nil {
		s.log.Warn("rules reload refused, previous rules kept", "err", err)
		return nil, err
	}
	s.applyRules(s.holder.Load(), set)
	s.log.Info("rules reloaded", "source", set.Source, "rule_count", len(set.Rules))
	return set, nil
}

func (s *Server) loadRules() (*rules.Set, error) {
	if s.cfg.RulesPath == "" {
		return rules.Default(), nil
	}
	set, err := rules.Load(s.cfg.RulesPath, s.cfg.Now())
	if err != nil && !errors.Is(err, rules.ErrInvalid) {
		// An unreadable file is as unusable as an invalid one.
		return nil, rules.Errors{{File: s.cfg.RulesPath, Line: 0, Msg: err.Error()}}
	}
	return set, err
}

// applyRules makes set current and carries over the shadow tallies of shadow
// rules that did not change.
func (s *Server) applyRules(old, set *rules.Set) {
	var names []string
	for i := range set.Rules {
		r := &set.Rules[i]
		if r.Mode != rules.Shadow {
			continue
		}
		names = append(names, r.Name)
		if old == nil || !sameRule(old, r) {
			s.shadow.Reset(r.Name)
		}
	}
	s.shadow.Sync(names)
	if s.agg != nil {
		s.trackGlobal(set)
	}
	s.holder.Store(set)
}

// trackGlobal keeps the aggregate's state of set's failure_rate rules only,
// and has it read their flows from the fleet before the first check.
func (s *Server) trackGlobal(set *rules.Set) {
	var global []string
	for i := range set.Rules {
		r := &set.Rules[i]
		if r.Type != rules.FailureRate {
			continue
		}
		global = append(global, r.Name)
		for _, f := range r.Flows {
			s.agg.Watch(string(f), r.Per)
		}
	}
	s.agg.Forget(global)
}

// sameRule reports whether old holds a rule identical to r, its position in
// the file aside.
func sameRule(old *rules.Set, r *rules.Rule) bool {
	o, ok := old.Rule(r.Name)
	if !ok {
		return false
	}
	a, b := *o, *r
	a.Line, b.Line = 0, 0
	return reflect.DeepEqual(a, b)
}
