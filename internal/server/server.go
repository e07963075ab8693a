// Package server assembles a guardian instance from its configuration: the
// store, the rules, the engine and the HTTP API, with reload and graceful
// shutdown. cmd/guardian parses flags into a Config; end-to-end tests build a
// Config directly and run real instances on :0.
package server

import (
	"context"
	"crypto/tls"
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
	"github.com/guardian-sec/guardian/internal/certfile"
	"github.com/guardian-sec/guardian/internal/decisionlog"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/failclosed"
	"github.com/guardian-sec/guardian/internal/filewatch"
	"github.com/guardian-sec/guardian/internal/fleet"
	"github.com/guardian-sec/guardian/internal/gateway"
	"github.com/guardian-sec/guardian/internal/httpapi"
	"github.com/guardian-sec/guardian/internal/incident"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/lists"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/requestid"
	"github.com/guardian-sec/guardian/internal/revocation"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
	"github.com/guardian-sec/guardian/internal/tokens"
	"github.com/guardian-sec/guardian/internal/tracing"
	"github.com/guardian-sec/guardian/internal/webhook"
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
	// SigningKeyFile, when set, holds the signing keys one a line
	// (secret.ParseKeys): the first signs, every one verifies, as do
	// PreviousSigningKeys. New reads it in place of SigningKey; Hangup and
	// any change of its content (watched like the rules file, so a
	// rewritten file or an updated Kubernetes Secret needs no signal) read
	// it again. A file that does not parse is refused, logged, and the
	// keys in force stay; so is a new first key while HashKey is derived
	// from the signing key, since every limit would start over.
	SigningKeyFile string
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
	// BreachedPath, when set, is the breached-password filter file (guardian
	// breached build) that POST /v1/passwords/check and a check's
	// password_sha1 are answered from; an unusable file stops New, and
	// ReloadBreached reads it again.
	BreachedPath string
	// AdminAddr, when set, serves the admin API and the console on a
	// listener of their own at this address (":0" picks a free port); the
	// main listener then answers 404 for them. Empty: one listener serves
	// everything.
	AdminAddr string
	// TenantMetrics names the tenants guardian_tenant_decisions_total
	// counts under their own name (--tenant-metrics); every other tenant
	// counts as one.
	TenantMetrics []string
	// TLSCertFile and TLSKeyFile, when set (both or neither), are a PEM
	// certificate (its chain after it) and its key: every listener but
	// pprof's serves TLS with them. Hangup and a change of either file
	// read them again, for new connections; a pair that does not load is
	// refused, logged, and the pair in force stays.
	TLSCertFile, TLSKeyFile string
	// ProxyPath, when set, is a proxy file (package gateway,
	// docs/gateway.md): Start also runs its reverse proxies, each on its
	// own listener, deciding through the same engine. A file that does
	// not parse stops New.
	ProxyPath string
	// WebhookURLs, when set, receive guardian's events (package webhook),
	// signed with the secret of WebhookSecretFile ("whsec_" and base64, as
	// the Standard Webhooks specification writes it), which they require.
	WebhookURLs       []string
	WebhookSecretFile string
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
	// incidents counts this instance's enforced decisions; incidentFleet
	// shares them and sums the fleet's (GET /v1/incident).
	incidents     *incident.Book
	incidentFleet *incident.Fleet
	// hooks sends events to the webhooks; nil without any.
	hooks *webhook.Notifier
	beat  *beat
	// hasher is the instance's one Hasher of the hash key.
	hasher *keys.Hasher
	engine *engine.Engine
	api    *httpapi.API
	http   *http.Server
	// keys are the signing keys in force; ownHashKey, whether HashKey was
	// given rather than derived from the first of them.
	keys       *tokens.Keys
	ownHashKey bool
	revoked    *revocation.List
	// lists are the deny and allow lists (lists.go).
	lists *lists.List
	tls   *certfile.Pair
	// admin serves the admin API apart (Config.AdminAddr); nil otherwise.
	admin     *http.Server
	adminLn   net.Listener
	adminDone chan struct{}
	adminErr  error

	closers   []func() error
	pprofAddr string
	// invalidate, when set, stops the store's memory of its last answers
	// deciding checks on rules a reload replaced.
	invalidate func()

	reloadMu  sync.Mutex
	stopWatch context.CancelFunc
	watchCtx  context.Context
	watching  sync.WaitGroup
	ln        net.Listener
	done      chan struct{}
	serveErr  error

	// breached is the breached-password filter in use; breachedMu
	// serialises its reloads.
	breached   breachedFile
	breachedMu sync.Mutex

	// gateway runs the proxies of Config.ProxyPath; nil without one.
	gateway *gateway.Gateway
}

// New builds an instance from cfg; it loads the rules and opens the store but
// does not listen yet.
func New(cfg Config) (*Server, error) {
	s, err := newKeyedServer(cfg)
	if err != nil {
		return nil, err
	}
	set, err := s.loadRules()
	if err != nil {
		return nil, err
	}
	s.applyRules(set)
	if err := s.loadBreached(); err != nil {
		return nil, err
	}
	proxies, err := s.loadGateway()
	if err != nil {
		return nil, err
	}
	st, storeHealthy, sh, err := s.openStore(s.metrics)
	if err != nil {
		return nil, err
	}
	s.joinFleet(storeHealthy, sh)
	if err := s.newHooks(sh.claims); err != nil {
		return nil, err
	}
	trail := audit.New(audit.Config{Hasher: s.hasher, Metrics: s.metrics, Normalizer: s.cfg.Normalizer, Logger: s.log})
	st, tracer, err := s.traced(st)
	if err != nil {
		return nil, err
	}
	s.engine = s.newEngine(st, trail)
	dec := s.decider()
	if proxies != nil {
		if s.gateway, err = s.newGateway(proxies, dec, sh.spent); err != nil {
			return nil, err
		}
	}
	s.api = s.newAPI(dec, trail, storeHealthy, tracer)
	s.http = s.newHTTPServer(s.api)
	if h := s.api.AdminHandler(); h != nil {
		s.admin = s.newHTTPServer(h)
	}
	return s, nil
}

// newHTTPServer returns the HTTP server of one listener, serving h.
func (s *Server) newHTTPServer(h http.Handler) *http.Server {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	if s.tls != nil {
		srv.TLSConfig = s.tls.Config()
	}
	return srv
}

// newServer returns the instance of cfg before its rules and store: its
// logger, whose lines about a request carry its id and trace, its metrics
// on a registry of its own, its shadow book, and its one Hasher of the hash
// key, which the engine, the audit trail and the decision log share.
func newServer(cfg Config) *Server {
	s := &Server{cfg: cfg, log: cfg.Logger, registry: prometheus.NewRegistry(), shadow: newBook(cfg), hasher: keys.NewHasher(cfg.HashKey)}
	s.incidents = incident.NewBook(incident.BookConfig{Now: cfg.Now, Changed: s.globalChanged})
	if s.log == nil {
		s.log = slog.Default()
	}
	s.log = slog.New(requestid.NewHandler(s.log.Handler()))
	s.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = metrics.New(s.registry)
	return s
}

// newBook returns the instance's shadow book on its clock, cfg.Now: a
// promoted rule's last tallies stay in GET /v1/shadow for 24 hours of it.
func newBook(cfg Config) *shadow.Book {
	return shadow.NewBook().WithClock(cfg.Now)
}

// joinFleet builds what the instance shares with its fleet through sh: its
// heartbeat, its shadow tallies, the revoked service tokens and the global
// failure rate, and the beat that writes the first two and reads the
// revocations. Their loops start with Start; their closers come first,
// since their last writes need the store's client.
func (s *Server) joinFleet(storeHealthy func() bool, sh shared) {
	cfg, m := s.cfg, s.metrics
	s.fleet = fleet.New(fleet.Config{
		ID:           cfg.InstanceID,
		Version:      cfg.Version,
		Rules:        s.holder.Load,
		StoreHealthy: storeHealthy,
		Shared:       sh.fleet,
		Now:          cfg.Now,
		Logger:       s.log,
	})
	s.tallies = shadow.NewFleet(shadow.FleetConfig{Book: s.shadow, Shared: sh.shadow, Instance: s.fleet.ID(), Logger: s.log})
	s.revoked = revocation.New(revocation.Config{Shared: sh.revoked, Now: cfg.Now, Logger: s.log})
	s.incidentFleet = incident.NewFleet(incident.FleetConfig{Book: s.incidents, Shared: sh.incident, Instance: s.fleet.ID(), Name: s.hasher.SubjectPseudonym, Now: cfg.Now, Logger: s.log})
	s.lists = s.newLists(sh.lists)
	s.beat = newBeat(beatEvery, beatTimeout, s.fleet, s.tallies, s.revoked, s.lists, s.incidentFleet)
	s.agg = aggregate.New(aggregate.Config{
		Now:       cfg.Now,
		Shared:    sh.agg,
		FleetSize: cfg.FleetSize,
		Observe:   func(flow string, perSecond float64) { m.GlobalFailures.WithLabelValues(flow).Set(perSecond) },
		Logger:    s.log,
	})
	s.trackGlobal(s.holder.Load())
	s.closers = append([]func() error{s.agg.Close, s.beat.Close}, s.closers...)
}

// traced returns st traced to Config.OTLPEndpoint and the tracer of checks
// and reports, or st itself and nil when tracing is off.
func (s *Server) traced(st store.Store) (store.Store, trace.Tracer, error) {
	if s.cfg.OTLPEndpoint == "" {
		return st, nil, nil
	}
	tp, err := tracing.New(s.cfg.OTLPEndpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("server: --otlp-endpoint: %w", err)
	}
	s.closers = append(s.closers, tp.Close)
	tracer := tp.Tracer()
	return tracing.WrapStore(st, tracer), tracer, nil
}

// newEngine returns the instance's engine on st, telling trail of hard
// stops.
func (s *Server) newEngine(st store.Store, trail *audit.Log) *engine.Engine {
	cfg := s.cfg
	return engine.New(engine.Config{
		Rules:         &s.holder,
		Store:         st,
		Key:           cfg.SigningKey,
		PreviousKeys:  cfg.PreviousSigningKeys,
		Keys:          s.keys,
		HashKey:       cfg.HashKey,
		Hasher:        s.hasher,
		Normalizer:    cfg.Normalizer,
		AttemptTTL:    cfg.AttemptTTL,
		Aggregate:     s.agg,
		Shadow:        s.shadow,
		Metrics:       s.metrics,
		Now:           cfg.Now,
		Events:        events{trail, s.incidents, hookEvents{s}},
		Tally:         s.incidents,
		Lists:         s.lists,
		Logger:        s.log,
		TenantMetrics: cfg.TenantMetrics,
	})
}

// newAPI returns the instance's HTTP API.
func (s *Server) newAPI(dec httpapi.Decider, trail *audit.Log, storeHealthy func() bool, tracer trace.Tracer) *httpapi.API {
	cfg := s.cfg
	return httpapi.New(httpapi.Config{
		Engine:       dec,
		Tokens:       s.keys.Service().WithRevocations(s.revoked),
		Revocations:  s.revoked,
		Lists:        listAdmin{s},
		AdminApart:   cfg.AdminAddr != "",
		Shadow:       s.tallies,
		Fleet:        s.fleet,
		Audit:        trail,
		Reload:       s.reload,
		StoreHealthy: storeHealthy,
		Gatherer:     s.registry,
		Metrics:      s.metrics,
		Tracer:       tracer,
		Breached:     &s.breached.holder,
		Proxies:      s.proxiesView(),
		Pseudonyms:   s.pseudonym,
		Incident:     s.incidentFleet,
		OnReset:      s.accountReset,
		Logger:       s.log,
		Now:          cfg.Now,
	})
}

// pseudonym returns the pseudonym of an identifier of kind, normalised as
// the instance normalises checks, under its hash key, in the tenant of ctx
// (keys.TenantOf).
func (s *Server) pseudonym(ctx context.Context, kind, value string) (string, error) {
	return s.hasher.Tenant(keys.TenantOf(ctx)).PseudonymOf(s.cfg.Normalizer, kind, value)
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
// failure counts of the global rate, heartbeats, shadow tallies and
// revoked tokens, each nil on an instance that shares nothing, and the
// deny and allow lists, never nil (listStore).
type shared struct {
	agg      aggregate.Shared
	fleet    fleet.Shared
	shadow   shadow.Shared
	revoked  revocation.Shared
	lists    store.Lists
	incident incident.Shared
	claims   webhook.Claimer
	spent    gateway.Claimer
}

// openStore returns the instance's store, what /readyz asks of its health,
// and what the instance shares with the fleet: Config.Store, Redis behind
// the fail-closed fallback, or the embedded store alone.
func (s *Server) openStore(m *metrics.Metrics) (store.Store, func() bool, shared, error) {
	always := func() bool { return true }
	switch {
	case s.cfg.Store != nil:
		return s.cfg.Store, always, shared{lists: listStore(s.cfg.Store, s.cfg.Now)}, nil
	case s.cfg.RedisURL == "":
		s.log.Warn("no --redis-url: limits live in this process only, correct for a single instance")
		st := memstore.New(memstore.Config{})
		return st, always, shared{lists: st}, nil
	}
	client, err := redisstore.OpenWith(s.cfg.RedisURL, s.cfg.Redis)
	if err != nil {
		return nil, nil, shared{}, fmt.Errorf("server: --redis-url: %w", err)
	}
	s.closers = append(s.closers, client.Close)
	primary := redisstore.New(client, redisstore.Config{Functions: true})
	warm, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	err = primary.CheckAccess(warm)
	if err == nil {
		err = primary.Warm(warm)
	}
	cancel()
	if _, why := primary.Functions(); why != nil {
		s.log.Info("redis: checks run the do script, not its function library (slower per call)", "reason", why)
	}
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
		Changed:   s.fallbackChanged,
	})
	s.invalidate = fc.Invalidate
	// Resets anywhere in the fleet reach this instance's memory.
	s.closers = append(s.closers, primary.Listen(fc.Forgotten, fc.Listening))
	return fc, fc.Healthy, shared{agg: redisagg.New(client), fleet: redisagg.NewFleet(client), shadow: redisagg.NewShadow(client), revoked: redisagg.NewRevocations(client), lists: primary,
		incident: redisagg.NewIncident(client), claims: redisagg.NewClaims(client), spent: redisagg.NewSpent(client)}, nil
}

// decider is what the HTTP API decides with: the engine, through the
// decision log when one is configured.
func (s *Server) decider() httpapi.Decider {
	if s.cfg.DecisionLog == nil {
		return s.engine
	}
	dl := decisionlog.New(decisionlog.Config{Out: s.cfg.DecisionLog, Key: s.cfg.HashKey, Hasher: s.hasher, Normalizer: s.cfg.Normalizer, Logger: s.log, Registerer: s.registry})
	s.closers = append(s.closers, dl.Close)
	return decisionlog.Wrap(s.engine, dl)
}

// InstanceID returns the id the instance has in GET /v1/fleet.
func (s *Server) InstanceID() string { return s.fleet.ID() }

// Handler returns the instance's HTTP handler.
func (s *Server) Handler() http.Handler { return s.api }

// AdminHandler returns the handler of the admin API and the console when
// they are apart (Config.AdminAddr), nil otherwise.
func (s *Server) AdminHandler() http.Handler { return s.api.AdminHandler() }

// TLSConfig returns a TLS configuration for another listener of the
// instance (a gateway proxy's): it serves the certificate of
// Config.TLSCertFile, following every reload. It is nil when the instance
// serves no TLS. Each call returns a Config of its own.
func (s *Server) TLSConfig() *tls.Config {
	if s.tls == nil {
		return nil
	}
	return s.tls.Config()
}

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
	if err := s.startAdmin(); err != nil {
		ln.Close()
		return err
	}
	if s.gateway != nil {
		if err := s.gateway.Start(); err != nil {
			ln.Close()
			if s.adminLn != nil {
				s.adminLn.Close()
			}
			return err
		}
	}
	s.done = make(chan struct{})
	if s.hooks != nil {
		s.hooks.Start()
	}
	s.agg.Start()
	s.beat.start()
	s.startWatching()
	go func() {
		defer close(s.done)
		s.serveErr = s.serveOn(s.http, ln)
	}()
	s.logStarted()
	return nil
}

// startAdmin listens on Config.AdminAddr and serves the admin API there in
// the background, when it is apart.
func (s *Server) startAdmin() error {
	if s.admin == nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.AdminAddr)
	if err != nil {
		return fmt.Errorf("server: --admin-addr: %w", err)
	}
	s.adminLn, s.adminDone = ln, make(chan struct{})
	go func() {
		defer close(s.adminDone)
		s.adminErr = s.serveOn(s.admin, ln)
	}()
	return nil
}

// logStarted logs the start line: where the instance listens, its rules,
// the expiry of its certificate and the id of the key that signs.
func (s *Server) logStarted() {
	set := s.holder.Load()
	attrs := []any{"instance", s.fleet.ID(), "addr", s.ln.Addr().String(), "rules", set.Source, "rule_count", len(set.Rules), "rules_hash", set.Hash(), "fleet_size", s.cfg.FleetSize}
	if s.adminLn != nil {
		attrs = append(attrs, "admin_addr", s.adminLn.Addr().String())
	}
	if s.tls != nil {
		attrs = append(attrs, "tls_expires_at", s.tls.NotAfter())
	}
	sign, _ := s.keys.IDs()
	attrs = append(attrs, "signing_kid", sign)
	s.log.Info("guardian started", attrs...)
}

// serveOn serves srv on ln, over TLS when the instance serves TLS, until
// Shutdown; it returns what ended it otherwise.
func (s *Server) serveOn(srv *http.Server, ln net.Listener) error {
	var err error
	if s.tls != nil {
		// The files are the TLS configuration's, which reads them again
		// on every reload.
		err = srv.ServeTLS(ln, "", "")
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
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

// AdminAddr is the address the admin API and the console are served on,
// once started with Config.AdminAddr; empty otherwise.
func (s *Server) AdminAddr() string {
	if s.adminLn == nil {
		return ""
	}
	return s.adminLn.Addr().String()
}

// Shutdown stops accepting requests and waits for in-flight ones to finish,
// or for ctx to end.
func (s *Server) Shutdown(ctx context.Context) error {
	err := errors.Join(s.http.Shutdown(ctx), s.shutdownGateway(ctx))
	if s.admin != nil {
		err = errors.Join(err, s.admin.Shutdown(ctx))
	}
	if s.done != nil {
		<-s.done
	}
	if s.adminDone != nil {
		<-s.adminDone
	}
	if s.stopWatch != nil {
		s.stopWatch()
		s.watching.Wait()
	}
	for _, c := range s.closers {
		_ = c()
	}
	if s.hooks != nil {
		err = errors.Join(err, s.hooks.Close(ctx))
	}
	s.log.Info("guardian stopped")
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	return errors.Join(s.serveErr, s.adminErr)
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
	s.logReloaded(ctx, by, set, &changes)
	s.rulesReloaded(set, by)
	return set, nil
}

// logReloaded writes the line of a reload by who asked, by, that put set in
// force, with what it changed (rules.Changes.Attrs).
func (s *Server) logReloaded(ctx context.Context, by string, set *rules.Set, changes *rules.Changes) {
	attrs := append([]slog.Attr{slog.String("by", by), slog.String("source", set.Source), slog.Int("rule_count", len(set.Rules)), slog.String("hash", set.Hash())}, changes.Attrs()...)
	s.log.LogAttrs(ctx, slog.LevelInfo, "rules reloaded", attrs...)
}

// rulesPoll is how often a watched file (rules, signing keys, TLS) is read
// for changes.
const rulesPoll = time.Second

// startWatching watches the rules file, the signing key file and the TLS
// certificate for changes, each reloaded as it changes, until Shutdown.
func (s *Server) startWatching() {
	s.watchCtx, s.stopWatch = context.WithCancel(context.Background())
	s.watchRules()
	s.watchKeys()
	s.watchTLS()
}

// watchRules reloads the rules file whenever its content changes, until
// Shutdown: a new file, one rewritten in place, or a swapped symlink on
// the way to it (a Kubernetes ConfigMap). Reload refuses an invalid change
// and keeps the rules in force.
func (s *Server) watchRules() {
	if s.cfg.RulesPath == "" {
		return
	}
	s.watch(s.cfg.RulesPath, func() {
		s.log.Info("rules file changed, reloading", "source", s.cfg.RulesPath)
		_, _ = s.reload(context.Background(), "watch") // logs and counts both outcomes
	})
}

// watch calls changed after each change of the content of the file at
// path, polled every rulesPoll, until Shutdown.
func (s *Server) watch(path string, changed func()) {
	w := filewatch.New(path)
	s.watching.Go(func() { w.Run(s.watchCtx, rulesPoll, changed) })
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
	if s.lists != nil {
		s.lists.SetStatic(set)
	}
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
	s.incidents.Forget(global)
}
