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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/aggregate/redisagg"
	"github.com/guardian-sec/guardian/internal/audit"
	"github.com/guardian-sec/guardian/internal/decisionlog"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/failclosed"
	"github.com/guardian-sec/guardian/internal/fleet"
	"github.com/guardian-sec/guardian/internal/httpapi"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/requestid"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
	"github.com/guardian-sec/guardian/internal/tokens"
	"github.com/guardian-sec/guardian/internal/tracing"
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
	// Normalizer says how accounts and recipients compare: accent folding
	// and the default region of phone numbers (nil: the defaults, accents
	// kept and no default region).
	Normalizer *keys.Normalizer
	// StoreTimeout is the deadline of one store call (default 5ms).
	StoreTimeout time.Duration
	// FleetSize is how many instances share the store (default 1).
	FleetSize int
	// AttemptTTL is how long an attempt id can be reported (default
	// tokens.AttemptTTL); a count only unreported checks made is kept twice
	// as long at most.
	AttemptTTL time.Duration
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
	// Version is guardian's version as GET /v1/fleet shows it (default:
	// the running binary's, package version).
	Version string
	// InstanceID names the instance in GET /v1/fleet (default: the host
	// name and a random suffix).
	InstanceID string
	// OTLPEndpoint, when set, traces checks and reports, their store calls
	// as child spans, to this OTLP/HTTP collector ("http://collector:4318").
	// Empty: off.
	OTLPEndpoint string
}

// memoryEvery is how often the Redis memory ratio is read.
const memoryEvery = 5 * time.Second

// Server is one running guardian instance.
type Server struct {
	cfg      Config
	log      *slog.Logger
	registry *prometheus.Registry
	metrics  *metrics.Metrics
	holder   rules.Holder
	shadow   *shadow.Book
	tallies  *shadow.Fleet
	agg      *aggregate.Aggregate
	fleet    *fleet.Fleet
	engine   *engine.Engine
	api      *httpapi.API
	http     *http.Server

	closers   []func() error
	pprofAddr string
	// invalidate, when set, stops the store's memory of its last answers
	// deciding checks on rules a reload replaced.
	invalidate func()

	reloadMu  sync.Mutex
	stopWatch context.CancelFunc
	watchDone chan struct{}
	ln        net.Listener
	done      chan struct{}
	serveErr  error
}

// New builds an instance from cfg; it loads the rules and opens the store but
// does not listen yet.
func New(cfg Config) (*Server, error) {
	cfg = withDefaults(cfg)
	s := &Server{cfg: cfg, log: cfg.Logger, registry: prometheus.NewRegistry(), shadow: shadow.NewBook().WithClock(cfg.Now)}
	if s.log == nil {
		s.log = slog.Default()
	}
	// Every line logged with a request's context carries its id and trace.
	s.log = slog.New(requestid.NewHandler(s.log.Handler()))
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(s.registry)
	s.metrics = m

	set, err := s.loadRules()
	if err != nil {
		return nil, err
	}
	s.applyRules(set)

	st, storeHealthy, sh, err := s.openStore(m)
	if err != nil {
		return nil, err
	}
	s.fleet = fleet.New(fleet.Config{
		ID:           cfg.InstanceID,
		Version:      cfg.Version,
		Rules:        s.holder.Load,
		StoreHealthy: storeHealthy,
		Shared:       sh.fleet,
		Now:          cfg.Now,
		Logger:       s.log,
	})
	s.tallies = shadow.NewFleet(shadow.FleetConfig{
		Book:     s.shadow,
		Shared:   sh.shadow,
		Instance: s.fleet.ID(),
		Logger:   s.log,
	})
	s.agg = aggregate.New(aggregate.Config{
		Now:       cfg.Now,
		Shared:    sh.agg,
		FleetSize: cfg.FleetSize,
		Observe:   func(flow string, perSecond float64) { m.GlobalFailures.WithLabelValues(flow).Set(perSecond) },
		Logger:    s.log,
		Riders:    []aggregate.Rider{s.fleet, s.tallies},
	})
	s.trackGlobal(set)
	// First among the closers: its last flush needs the Redis client.
	s.closers = append([]func() error{s.agg.Close}, s.closers...)
	trail := audit.New(audit.Config{Key: cfg.HashKey, Metrics: m, Normalizer: cfg.Normalizer, Logger: s.log})
	var tracer trace.Tracer
	if cfg.OTLPEndpoint != "" {
		tp, err := tracing.New(cfg.OTLPEndpoint)
		if err != nil {
			return nil, fmt.Errorf("server: --otlp-endpoint: %w", err)
		}
		s.closers = append(s.closers, tp.Close)
		tracer = tp.Tracer()
		st = tracing.WrapStore(st, tracer)
	}
	s.engine = engine.New(engine.Config{
		Rules:        &s.holder,
		Store:        st,
		Key:          cfg.SigningKey,
		PreviousKeys: cfg.PreviousSigningKeys,
		HashKey:      cfg.HashKey,
		Normalizer:   cfg.Normalizer,
		AttemptTTL:   cfg.AttemptTTL,
		Aggregate:    s.agg,
		Shadow:       s.shadow,
		Metrics:      m,
		Now:          cfg.Now,
		Events:       trail,
	})
	s.api = httpapi.New(httpapi.Config{
		Engine:       s.decider(),
		Tokens:       tokens.NewService(cfg.SigningKey, cfg.PreviousSigningKeys...),
		Shadow:       s.tallies,
		Fleet:        s.fleet,
		Audit:        trail,
		Reload:       s.reload,
		Normalizer:   cfg.Normalizer,
		StoreHealthy: storeHealthy,
		Gatherer:     s.registry,
		Metrics:      m,
		Tracer:       tracer,
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

// withDefaults returns cfg with its defaults filled in.
func withDefaults(cfg Config) Config {
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
	return cfg
}

// shared is what the fleet's instances share through the store: the
// failure counts of the global rate, heartbeats and shadow tallies. Each is
// nil on an instance that shares nothing.
type shared struct {
	agg    aggregate.Shared
	fleet  fleet.Shared
	shadow shadow.Shared
}

// openStore returns the instance's store, what /readyz asks of its health,
// and what the instance shares with the fleet: Config.Store, Redis behind
// the fail-closed fallback, or the embedded store alone.
func (s *Server) openStore(m *metrics.Metrics) (store.Store, func() bool, shared, error) {
	always := func() bool { return true }
	switch {
	case s.cfg.Store != nil:
		return s.cfg.Store, always, shared{}, nil
	case s.cfg.RedisURL == "":
		s.log.Warn("no --redis-url: limits live in this process only, correct for a single instance")
		return memstore.New(memstore.Config{}), always, shared{}, nil
	}
	client, err := redisstore.OpenWith(s.cfg.RedisURL, s.cfg.Redis)
	if err != nil {
		return nil, nil, shared{}, fmt.Errorf("server: --redis-url: %w", err)
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
		return nil, nil, shared{}, fmt.Errorf("server: --redis-url: %w", err)
	case err != nil:
		s.log.Warn("redis not answering at start: the fallback decides until it does", "err", err)
	}
	s.closers = append(s.closers, primary.WatchMemory(memoryEvery, func(r float64) { m.StoreMemoryRatio.WithLabelValues().Set(r) }))
	fc := failclosed.New(failclosed.Config{
		Primary:   primary,
		Probe:     primary.Probe,
		Timeout:   s.cfg.StoreTimeout,
		FleetSize: s.cfg.FleetSize,
		Metrics:   m,
		Logger:    s.log,
	})
	s.invalidate = fc.Invalidate
	// Resets anywhere in the fleet reach this instance's memory.
	s.closers = append(s.closers, primary.Listen(fc.Forgotten, fc.Listening))
	return fc, fc.Healthy, shared{agg: redisagg.New(client), fleet: redisagg.NewFleet(client), shadow: redisagg.NewShadow(client)}, nil
}

// decider is what the HTTP API decides with: the engine, through the
// decision log when one is configured.
func (s *Server) decider() httpapi.Decider {
	if s.cfg.DecisionLog == nil {
		return s.engine
	}
	dl := decisionlog.New(decisionlog.Config{Out: s.cfg.DecisionLog, Key: s.cfg.HashKey, Normalizer: s.cfg.Normalizer, Logger: s.log, Registerer: s.registry})
	s.closers = append(s.closers, dl.Close)
	return decisionlog.Wrap(s.engine, dl)
}

// InstanceID returns the id the instance has in GET /v1/fleet.
func (s *Server) InstanceID() string { return s.fleet.ID() }

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
	s.watchRules()
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.serveErr = err
		}
	}()
	set := s.holder.Load()
	s.log.Info("guardian started", "instance", s.fleet.ID(), "addr", ln.Addr().String(), "rules", set.Source, "rule_count", len(set.Rules), "rules_hash", set.Hash(), "fleet_size", s.cfg.FleetSize)
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
	if s.stopWatch != nil {
		s.stopWatch()
		<-s.watchDone
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

// Reload re-reads the rules file, as SIGHUP asks. An invalid file is
// refused and the rules in force stay; in-flight checks finish on the set
// they started with.
func (s *Server) Reload() (*rules.Set, error) {
	return s.reload(context.Background(), "signal")
}

// reload is Reload for one who asked, by: logged once, whatever the outcome,
// with ctx's request id when an admin call asked.
func (s *Server) reload(ctx context.Context, by string) (*rules.Set, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	set, err := s.loadRules()
	if err != nil {
		s.metrics.RulesReloads.WithLabelValues("error").Inc()
		s.log.WarnContext(ctx, "rules reload refused, previous rules kept", "by", by, "err", err, "hash", s.holder.Load().Hash())
		return nil, err
	}
	changes := rules.Diff(s.holder.Load(), set)
	s.applyRules(set)
	if s.invalidate != nil {
		s.invalidate()
	}
	s.metrics.RulesReloads.WithLabelValues("ok").Inc()
	attrs := append([]slog.Attr{slog.String("by", by), slog.String("source", set.Source), slog.Int("rule_count", len(set.Rules)), slog.String("hash", set.Hash())}, changes.Attrs()...)
	s.log.LogAttrs(ctx, slog.LevelInfo, "rules reloaded", attrs...)
	return set, nil
}

// rulesPoll is how often a rules file is read for changes.
const rulesPoll = time.Second

// watchRules reloads the rules file whenever its content changes, until
// Shutdown: a new file, one rewritten in place, or a swapped symlink on
// the way to it (a Kubernetes ConfigMap). Reload refuses an invalid change
// and keeps the rules in force.
func (s *Server) watchRules() {
	if s.cfg.RulesPath == "" {
		return
	}
	w := rules.NewWatcher(s.cfg.RulesPath)
	ctx, cancel := context.WithCancel(context.Background())
	s.stopWatch, s.watchDone = cancel, make(chan struct{})
	go func() {
		defer close(s.watchDone)
		w.Run(ctx, rulesPoll, func() {
			s.log.Info("rules file changed, reloading", "source", s.cfg.RulesPath)
			_, _ = s.reload(context.Background(), "watch") // logs and counts both outcomes
		})
	}()
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
// rules whose definition did not change.
func (s *Server) applyRules(set *rules.Set) {
	s.shadow.Track(set)
	s.metrics.SetRules(set.Hash())
	shadow := len(set.ShadowNames())
	s.metrics.SetRuleCount(len(set.Rules)-shadow, shadow)
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
