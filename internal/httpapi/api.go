// Package httpapi is guardian's HTTP interface (api/openapi.yaml): the
// gin routes, the service-token middleware, strict JSON decoding, the error
// shape and the rate-limit headers. It is the only package that knows HTTP.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/guardian-sec/guardian/internal/audit"
	"github.com/guardian-sec/guardian/internal/breached"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/fleet"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// MaxBody is the largest request body guardian reads; larger ones get 413.
const MaxBody = 64 << 10

// Decider is what the API asks to decide checks and manage accounts.
// *engine.Engine implements it.
type Decider interface {
	Check(ctx context.Context, req engine.CheckRequest) (engine.Decision, error)
	Report(ctx context.Context, attemptID string, outcome engine.Outcome) (engine.ReportResult, error)
	Status(ctx context.Context, account string) (engine.AccountStatus, error)
	Reset(ctx context.Context, account string) error
	Rules() *rules.Set
}

var _ Decider = (*engine.Engine)(nil)

// Config holds what an API is built from. Every field is required except
// Metrics, Tracer, Breached, Now and Logger.
type Config struct {
	Engine Decider
	Tokens *tokens.Service
	// Shadow reports what shadow rules would have done, fleet-wide.
	Shadow *shadow.Fleet
	// Fleet lists the instances sharing the store.
	Fleet *fleet.Fleet
	// Audit records every admin call that changes state.
	Audit *audit.Log
	// Reload re-reads the rules file and returns the set now in force, or
	// an error (rules.ErrInvalid) listing what is wrong, the old set kept.
	// It logs the outcome, once, with who asked (the admin token's
	// subject) and the request's context.
	Reload func(ctx context.Context, by string) (*rules.Set, error)
	// StoreHealthy reports whether the store answers (for /readyz).
	StoreHealthy func() bool
	// Gatherer serves /metrics.
	Gatherer prometheus.Gatherer
	// Metrics, when set, counts requests by route and status, and uses of
	// service tokens about to expire.
	Metrics *metrics.Metrics
	// Tracer, when set, makes each check and report a span.
	Tracer trace.Tracer
	// Revocations revokes service tokens fleet-wide (POST
	// /v1/tokens/revoke); Tokens refuses what it revoked.
	Revocations Revoker
	// Proxies, when set, describes the gateway's proxies for GET
	// /v1/proxies (a value encoding/json encodes: package gateway's
	// View); nil: no proxy runs, and the answer lists none.
	Proxies func() any
	// Lists keeps the deny and allow lists (/v1/lists).
	Lists Lister
	// AdminApart serves the admin API and the console on a handler of
	// their own, AdminHandler, and not on the main one, which then
	// answers 404 for them (--admin-addr).
	AdminApart bool
	Logger     *slog.Logger
	Now        func() time.Time

	// Breached holds the breached-password filter in use, if any (nil:
	// none ever is).
	Breached *breached.Holder

	// Pseudonyms answers POST /v1/pseudonyms.
	Pseudonyms Pseudonymizer
	// Incident answers GET /v1/incident.
	Incident IncidentViewer
	// OnReset, when set, hears every account an admin call reset, in
	// clear as the call named it (the webhooks' account_reset).
	OnReset func(ctx context.Context, account string)
}

// Revoker revokes service tokens fleet-wide. *revocation.List implements
// it.
type Revoker interface {
	Revoke(ctx context.Context, jti string, until time.Time) error
}

// API serves guardian's HTTP interface.
type API struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	router *gin.Engine
	// admin serves the admin API and the console when they are apart; nil
	// otherwise.
	admin *gin.Engine

	expiring expiring
}

// New returns the API for cfg.
func New(cfg Config) *API {
	a := &API{cfg: cfg, log: cfg.Logger, now: cfg.Now}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	r := a.newRouter()
	r.GET("/healthz", a.healthz)
	r.GET("/readyz", a.readyz)
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})))
	adminRouter := r
	if cfg.AdminApart {
		adminRouter = a.newRouter()
		adminRouter.GET("/healthz", a.healthz)
		a.admin = adminRouter
	}
	a.routeConsole(adminRouter)

	check := r.Group("/v1", a.authorize(tokens.ScopeCheck))
	if cfg.Tracer != nil {
		check.Use(a.traced)
	}
	check.POST("/check", a.check)
	check.POST("/report", a.report)
	check.POST("/passwords/check", a.checkPassword)

	admin := adminRouter.Group("/v1", a.authorize(tokens.ScopeAdmin))
	admin.GET("/rules", a.getRules)
	admin.GET("/rules/explain", a.explainRules)
	admin.POST("/rules/reload", a.deploymentWide, a.reloadRules)
	admin.GET("/shadow", a.getShadow)
	admin.GET("/fleet", a.getFleet)
	admin.GET("/incident", a.getIncident)
	admin.GET("/accounts/status", a.accountStatus)
	admin.POST("/accounts/status", a.postAccountStatus)
	admin.POST("/pseudonyms", a.pseudonym)
	admin.POST("/accounts/reset", a.accountReset)
	admin.POST("/tokens/revoke", a.deploymentWide, a.revokeToken)
	admin.GET("/proxies", a.getProxies)
	a.routeLists(admin)

	a.router = r
	return a
}

// newRouter returns a gin engine with the middleware and the not-found and
// wrong-method answers every listener shares.
func (a *API) newRouter() *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.Use(a.observe, a.recover, a.limitBody, detach)
	r.NoRoute(func(c *gin.Context) {
		a.abort(c, newError(http.StatusNotFound, "not_found", "no such path: "+c.Request.URL.Path))
	})
	r.NoMethod(func(c *gin.Context) {
		a.abort(c, newError(http.StatusMethodNotAllowed, "method_not_allowed", c.Request.Method+" is not allowed on "+c.Request.URL.Path))
	})
	return r
}

// ServeHTTP serves one request.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.router.ServeHTTP(w, r) }

// AdminHandler serves the admin API, the console and /healthz when
// Config.AdminApart is set; it is nil otherwise, the main handler serving
// them.
func (a *API) AdminHandler() http.Handler {
	if a.admin == nil {
		return nil
	}
	return a.admin
}

// Routes lists the API's routes as "METHOD /path", path parameters as
// api/openapi.yaml writes them ("/v1/lists/{id}"), those of both handlers
// when the admin API is apart, for the check of the routes against
// api/openapi.yaml.
func (a *API) Routes() []string {
	var out []string
	for _, e := range []*gin.Engine{a.router, a.admin} {
		if e == nil {
			continue
		}
		for _, r := range e.Routes() {
			if route := r.Method + " " + template(r.Path); !slices.Contains(out, route) {
				out = append(out, route)
			}
		}
	}
	return out
}

// template writes a gin path's parameters (":id") as api/openapi.yaml
// does ("{id}").
func template(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if name, ok := strings.CutPrefix(p, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	return strings.Join(parts, "/")
}

// recover turns a panic in a handler into the contract's 500, so a bug
// answers one request badly instead of taking the service down.
func (a *API) recover(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			a.log.ErrorContext(c.Request.Context(), "panic in handler", "path", c.FullPath(), "panic", v)
			a.abort(c, newError(http.StatusInternalServerError, "internal", "internal error"))
		}
	}()
	c.Next()
}

// detach runs the request on a context its caller cannot cancel: a caller
// that goes away mid-request is no store failure on any store, the embedded
// one included, and what it asked for is decided to the end, each store
// call bounded by the store's own deadline. Only a store call still queued
// when its caller goes away is not sent (store.WithCaller): the request
// then ends without an answer, nothing spent. The context is a
// callContext, which authorize fills with the caller's claims.
func detach(c *gin.Context) {
	rc := c.Request.Context()
	c.Request = c.Request.WithContext(&callContext{Context: store.WithCaller(context.WithoutCancel(rc), rc)})
	c.Next()
}

// limitBody caps every request body at MaxBody.
func (a *API) limitBody(c *gin.Context) {
	c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, MaxBody)
	c.Next()
}

func (a *API) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

func (a *API) readyz(c *gin.Context) {
	if a.cfg.Engine.Rules() == nil {
		c.JSON(http.StatusServiceUnavailable, gin.H{"store": "unknown"})
		return
	}
	state := "ok"
	if !a.cfg.StoreHealthy() {
		state = "degraded"
	}
	c.JSON(http.StatusOK, gin.H{"store": state})
}
