package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/guardian-sec/guardian/internal/requestid"
	"github.com/guardian-sec/guardian/internal/tokens"
	"github.com/guardian-sec/guardian/internal/tracing"
)

// hdrRequestID is X-Request-Id in the canonical form net/http keeps it in.
const hdrRequestID = "X-Request-Id"

// observe runs first on every request. It gives the request its id — the
// caller's X-Request-Id when it is 1 to 128 visible ASCII characters, a
// fresh one otherwise — and sets it on the answer before anything else can
// answer; it puts the id and the caller's traceparent into the request's
// context, so every log line about the request and the decision log carry
// them; and once answered, it counts the request by route and status and
// logs it at debug level.
func (a *API) observe(c *gin.Context) {
	start := time.Now()
	r := c.Request
	id := r.Header.Get(hdrRequestID)
	if !requestid.Valid(id) {
		id = requestid.New()
	}
	c.Writer.Header()[hdrRequestID] = []string{id}
	ctx := requestid.With(r.Context(), id)
	if _, ok := r.Header["Traceparent"]; ok {
		ctx = tracing.Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	c.Request = r.WithContext(ctx)

	c.Next()

	route := c.FullPath()
	if route == "" {
		route = "other"
	}
	status := c.Writer.Status()
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.HTTPRequests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	}
	if a.log.Enabled(ctx, slog.LevelDebug) {
		a.log.LogAttrs(ctx, slog.LevelDebug, "request",
			slog.String("method", r.Method), slog.String("route", route),
			slog.Int("status", status), slog.Duration("took", time.Since(start)))
	}
}

// traced makes the call a span named for its route, a child of the
// caller's traceparent when it sent one, when tracing is on.
func (a *API) traced(c *gin.Context) {
	ctx, span := a.cfg.Tracer.Start(c.Request.Context(), c.Request.Method+" "+c.FullPath(),
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.route", c.FullPath()),
			attribute.String("guardian.request_id", requestid.From(c.Request.Context()))))
	c.Request = c.Request.WithContext(ctx)
	c.Next()
	status := c.Writer.Status()
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= http.StatusInternalServerError {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// decided adds a check's decision to its span, when tracing is on.
func (a *API) decided(c *gin.Context, decision, rule string, degraded bool) {
	if a.cfg.Tracer == nil {
		return
	}
	span := trace.SpanFromContext(c.Request.Context())
	span.SetAttributes(attribute.String("guardian.decision", decision), attribute.Bool("guardian.degraded", degraded))
	if rule != "" {
		span.SetAttributes(attribute.String("guardian.rule", rule))
	}
}

// expiringAtMost is the most time left before a token's expiry at which
// its use is reported: 10% of a token's life, but never more than 72 hours
// (the last 72 hours of a 720h token, the last 2.4 hours of a day's).
const expiringAtMost = 72 * time.Hour

// expiringWithin is how close to its expiry a token of claims cl is
// reported: a tenth of its life, at most expiringAtMost; expiringAtMost for
// a token that does not say when it was issued.
func expiringWithin(cl tokens.Claims) time.Duration {
	life := cl.ExpiresAt.Sub(cl.IssuedAt)
	if cl.IssuedAt.IsZero() || life <= 0 {
		return expiringAtMost
	}
	return min(life/10, expiringAtMost)
}

// expiringLogEvery is how often at most an expiring token is logged, per
// subject and scope; every use is counted.
const expiringLogEvery = time.Minute

// expiring notes a request authenticated by a token in the last tenth of
// its life (at most its last 72 hours): counted every time, logged at most
// once a minute per subject and scope, so the owner renews it before
// logins fail.
type expiring struct {
	mu     sync.Mutex
	logged map[string]time.Time
}

func (a *API) noteExpiring(c *gin.Context, cl tokens.Claims, now time.Time) {
	left := cl.ExpiresAt.Sub(now)
	if left > expiringWithin(cl) {
		return
	}
	if a.cfg.Metrics != nil {
		a.cfg.Metrics.ExpiringTokens.WithLabelValues(string(cl.Scope)).Inc()
	}
	k := string(cl.Scope) + "\x00" + cl.Tenant + "\x00" + cl.Subject
	a.expiring.mu.Lock()
	if a.expiring.logged == nil {
		a.expiring.logged = map[string]time.Time{}
	}
	last, seen := a.expiring.logged[k]
	due := !seen || now.Sub(last) >= expiringLogEvery
	if due {
		if len(a.expiring.logged) >= maxExpiringTracked {
			clear(a.expiring.logged)
		}
		a.expiring.logged[k] = now
	}
	a.expiring.mu.Unlock()
	if due {
		attrs := []slog.Attr{slog.String("subject", cl.Subject), slog.String("scope", string(cl.Scope)), slog.String("jti", cl.ID),
			slog.Time("expires_at", cl.ExpiresAt), slog.Duration("left", left.Round(time.Second))}
		if cl.Tenant != "" {
			attrs = append(attrs, slog.String("tenant", cl.Tenant))
		}
		a.log.LogAttrs(c.Request.Context(), slog.LevelWarn, "service token expires soon: issue a new one (guardian token) before it does", attrs...)
	}
}

// maxExpiringTracked bounds the subjects whose last warning is remembered.
const maxExpiringTracked = 1024
