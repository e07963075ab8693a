// Package gateway runs guardian as a reverse proxy in front of a login it
// cannot change (contract 8.3, docs/gateway.md): each proxy of a proxy file
// listens on its own address, matches login requests by route, extracts the
// account (and the secret, which it turns into guardian's own fingerprint)
// from basic auth, a form, a JSON body, a header or the query, checks them
// through the same engine as the API, in process, and forwards what is
// allowed to the upstream on net/http/httputil.ReverseProxy. The upstream's
// answer is classified by the route's outcome lists and reported on the
// check's attempt; a success sets the guardian_device cookie. A challenge
// is a proof of work the browser solves (an embedded page, no outside
// resource) or an API client solves from a JSON answer.
//
// The secret exists only in the request being forwarded: it is hashed
// into the fingerprint and, with a breached filter, looked up, and never
// logged, counted or kept.
package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/guardian-sec/guardian/internal/breached"
)

// Config holds what a Gateway is built from. File, Decider, ChallengeKey
// and FingerprintKey are required.
type Config struct {
	File    *File
	Decider Decider
	// Breached is the breached-password filter routes with breached:
	// look secrets up in; nil: none.
	Breached *breached.Holder
	// ChallengeKey signs challenges and passes; FingerprintKey keys the
	// secret fingerprints. Each at least 32 bytes, derived for that
	// purpose alone.
	ChallengeKey, FingerprintKey []byte
	// Registerer receives the proxy metrics; nil: a registry of its own.
	Registerer prometheus.Registerer
	// Logger receives what the proxies log (default slog.Default()).
	Logger *slog.Logger
	// TLS, when set, returns the TLS configuration the listeners serve.
	TLS func() *tls.Config
	// Transport carries requests upstream; nil: one of the Gateway's own,
	// keeping connections alive, verifying https upstreams against the
	// system roots.
	Transport http.RoundTripper
	// Spent, when set, claims solved challenges and passes fleet-wide, so
	// each is used once across every instance sharing the store; nil:
	// once per instance (the embedded store).
	Spent Claimer
	// Now is the clock of challenges and of a device cookie's renewal
	// (default time.Now).
	Now func() time.Time
}

// Gateway is the running proxies of one proxy file. It is safe for
// concurrent use.
type Gateway struct {
	file       *File
	decider    Decider
	breached   *breached.Holder
	challenges *challenges
	fpKey      []byte
	// fpMACs are HMACs under fpKey, reset, for fingerprint.
	fpMACs    sync.Pool
	metrics   *metricSet
	log       *slog.Logger
	transport http.RoundTripper
	buffers   *bufferPool
	tlsConfig func() *tls.Config

	proxies []*proxy
	servers []*http.Server
	lns     []net.Listener
	wg      sync.WaitGroup
}

type metricSet struct {
	requests *prometheus.CounterVec
	upstream *prometheus.HistogramVec
	outcomes *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metricSet {
	f := promauto.With(reg)
	return &metricSet{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_proxy_requests_total",
			Help: "Requests a gateway proxy matched to a route, by what was decided: allow, challenge, slow, block, breached, unchecked (no account in it), too_large, error.",
		}, []string{"proxy", "route", "decision"}),
		upstream: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "guardian_proxy_upstream_seconds",
			Help:    "Time from a gateway proxy receiving a request to the upstream's answer headers.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"proxy"}),
		outcomes: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_proxy_outcomes_total",
			Help: "Upstream answers to checked requests, as the route's outcome classified them: success, failure, unknown (left unreported).",
		}, []string{"route", "outcome"}),
	}
}

// lazy is a series of a metric vector, resolved by its first use (a series
// appears only once something is counted in it, as with WithLabelValues),
// then read without hashing its labels.
type lazy[T any] struct {
	resolve func() T
	once    sync.Once
	v       T
}

func (l *lazy[T]) get() T {
	l.once.Do(func() { l.v = l.resolve() })
	return l.v
}

// decisions are the values of guardian_proxy_requests_total's decision
// label: rules' actions and the gateway's own.
var decisions = [...]string{"allow", "challenge", "slow", "block", "breached", "unchecked", "too_large", "error"}

var outcomes = [...]Outcome{Success, Failure, Unknown}

// routeMetrics are one route's series.
type routeMetrics struct {
	vec          *metricSet
	proxy, route string
	requests     [len(decisions)]lazy[prometheus.Counter]
	outcomes     [len(outcomes)]lazy[prometheus.Counter]
}

func (rm *routeMetrics) init(m *metricSet, proxy, route string) {
	rm.vec, rm.proxy, rm.route = m, proxy, route
	for i, d := range decisions {
		rm.requests[i].resolve = func() prometheus.Counter { return m.requests.WithLabelValues(proxy, route, d) }
	}
	for i, o := range outcomes {
		rm.outcomes[i].resolve = func() prometheus.Counter { return m.outcomes.WithLabelValues(route, string(o)) }
	}
}

// request returns the route's series of guardian_proxy_requests_total for
// decision.
func (rm *routeMetrics) request(decision string) prometheus.Counter {
	for i, d := range decisions {
		if d == decision {
			return rm.requests[i].get()
		}
	}
	return rm.vec.requests.WithLabelValues(rm.proxy, rm.route, decision)
}

// outcome returns the route's series of guardian_proxy_outcomes_total for
// o.
func (rm *routeMetrics) outcome(o Outcome) prometheus.Counter {
	for i, v := range outcomes {
		if v == o {
			return rm.outcomes[i].get()
		}
	}
	return rm.vec.outcomes.WithLabelValues(rm.route, string(o))
}

// New returns the gateway of cfg.File, not listening yet.
func New(cfg Config) (*Gateway, error) {
	if cfg.File == nil || cfg.Decider == nil || len(cfg.ChallengeKey) < 32 || len(cfg.FingerprintKey) < 32 {
		return nil, errors.New("gateway: File, Decider and both keys are required")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	reg := cfg.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	g := &Gateway{
		file:      cfg.File,
		decider:   cfg.Decider,
		breached:  cfg.Breached,
		fpKey:     cfg.FingerprintKey,
		metrics:   newMetrics(reg),
		log:       cfg.Logger,
		transport: cfg.Transport,
		buffers:   newBufferPool(),
		tlsConfig: cfg.TLS,
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	g.challenges = newChallenges(cfg.ChallengeKey, now, cfg.Spent, g.log)
	if g.transport == nil {
		g.transport = newTransport()
	}
	for i := range cfg.File.Proxies {
		g.proxies = append(g.proxies, newProxy(g, &cfg.File.Proxies[i]))
	}
	return g, nil
}

// newTransport is the upstream transport: HTTP/1.1 keep-alive (HTTP/2 to
// an https upstream that offers it), bounded dial and handshake times.
func newTransport() *http.Transport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   5 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// Handler returns the handler of the i-th proxy of the file (tests, and
// listeners a caller makes itself).
func (g *Gateway) Handler(i int) http.Handler { return g.proxies[i] }

// Start listens on every proxy's address and serves in the background. On
// an error nothing is left listening.
func (g *Gateway) Start() error {
	for _, p := range g.proxies {
		ln, err := net.Listen("tcp", p.Listen)
		if err != nil {
			for _, l := range g.lns {
				l.Close()
			}
			g.lns = nil
			return fmt.Errorf("gateway: proxy %s: %w", p.Name, err)
		}
		g.lns = append(g.lns, ln)
	}
	for i, p := range g.proxies {
		srv := &http.Server{
			Handler:           p,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
		}
		ln := g.lns[i]
		if g.tlsConfig != nil {
			if cfg := g.tlsConfig(); cfg != nil {
				ln = tls.NewListener(ln, cfg)
			}
		}
		g.servers = append(g.servers, srv)
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				g.log.Error("gateway: proxy stopped", "proxy", p.Name, "err", err)
			}
		}()
		g.log.Info("gateway proxy started", "proxy", p.Name, "addr", g.lns[i].Addr().String(), "upstream", p.Upstream.Redacted(), "mode", p.Mode, "routes", len(p.Routes))
	}
	return nil
}

// Addrs returns the addresses the proxies listen on, once started, in the
// file's order.
func (g *Gateway) Addrs() []string {
	out := make([]string, len(g.lns))
	for i, ln := range g.lns {
		out[i] = ln.Addr().String()
	}
	return out
}

// Shutdown stops the proxies, letting in-flight requests finish until ctx
// ends.
func (g *Gateway) Shutdown(ctx context.Context) error {
	var err error
	for _, srv := range g.servers {
		err = errors.Join(err, srv.Shutdown(ctx))
	}
	g.wg.Wait()
	return err
}

// File returns the proxy file the gateway runs.
func (g *Gateway) File() *File { return g.file }

// bufferPool lends the reverse proxies their copy buffers.
type bufferPool struct{ p sync.Pool }

func newBufferPool() *bufferPool {
	return &bufferPool{p: sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}}
}

func (b *bufferPool) Get() []byte  { return *(b.p.Get().(*[]byte)) }
func (b *bufferPool) Put(x []byte) { b.p.Put(&x) }
