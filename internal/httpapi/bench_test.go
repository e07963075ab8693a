package httpapi

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/guardian-sec/guardian/internal/breached"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// benchDecider answers every call with the same canned result, without
// recording anything, so that a benchmark measures the HTTP layer alone.
type benchDecider struct {
	decision engine.Decision
	report   engine.ReportResult
}

func (d *benchDecider) Check(context.Context, engine.CheckRequest) (engine.Decision, error) {
	return d.decision, nil
}

func (d *benchDecider) Report(context.Context, string, engine.Outcome) (engine.ReportResult, error) {
	return d.report, nil
}

func (d *benchDecider) Status(context.Context, string) (engine.AccountStatus, error) {
	return engine.AccountStatus{}, nil
}

func (d *benchDecider) Reset(context.Context, string) error { return nil }
func (d *benchDecider) Rules() *rules.Set                   { return rules.Default() }

// benchWriter is a ResponseWriter that keeps only the status and the body
// length, and is reused across iterations.
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) WriteHeader(s int)   { w.status = s }
func (w *benchWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(b)
	return len(b), nil
}

// reset empties w for the next request.
func (w *benchWriter) reset() {
	clear(w.h)
	w.status, w.n = 0, 0
}

// benchBody is a request body that can be read again from the start.
type benchBody struct{ bytes.Reader }

func (*benchBody) Close() error { return nil }

// benchServe sends the request method path body with a check token to an
// API over d, b.N times, and fails unless every answer has status want;
// edit, when given, adjusts the API's configuration first.
func benchServe(b *testing.B, d Decider, method, path, body string, want int, edit ...func(*Config)) {
	b.Helper()
	svc := tokens.NewService(secret.Generate())
	cfg := Config{
		Engine:       d,
		Tokens:       svc,
		Shadow:       shadow.NewFleet(shadow.FleetConfig{Book: shadow.NewBook()}),
		Reload:       func(context.Context, string) (*rules.Set, error) { return rules.Default(), nil },
		StoreHealthy: func() bool { return true },
		Gatherer:     prometheus.NewRegistry(),
	}
	for _, e := range edit {
		e(&cfg)
	}
	api := New(cfg)
	tok, err := svc.Issue(tokens.ScopeCheck, "bench", time.Hour, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	rb := &benchBody{}
	req, err := http.NewRequest(method, path, rb)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(body))
	w := &benchWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		rb.Reset([]byte(body))
		req.Body = rb
		w.reset()
		api.ServeHTTP(w, req)
		if w.status != want {
			b.Fatalf("status %d, want %d", w.status, want)
		}
	}
}

// BenchmarkCheckHandler is one allowed login check through the HTTP layer:
// token, strict decoding, the answer with two limits and the rate-limit
// headers. The decision is canned: the engine is measured on its own.
func BenchmarkCheckHandler(b *testing.B) {
	d := &benchDecider{decision: engine.Decision{
		Action:    rules.Allow,
		AttemptID: "AQAAAAAAAAAAAAAAAAAAAAAAAAABmM9l2wAFbG9naW4WYWJjZGVmZ2hpamtsbW5vcHFyc3R1dgAAAzBndWFyZGlhbjp2MTp7YWJjZGVmZ2hpamtsbW5vcHFyc3R1dn06bG9naW4tYWNjb3VudAA",
		Limits: []engine.Limit{
			{Rule: "login-account", Remaining: 4, Reset: 12 * time.Second},
			{Rule: "login-ip", Remaining: 29, Reset: 20 * time.Second},
			{Rule: "login-hard-stop", Remaining: 99, Reset: 90 * 24 * time.Hour},
		},
		Shadow: []engine.ShadowTrip{},
		Quota:  &engine.Quota{Rule: "login-account", Burst: 5, Window: 5 * time.Minute, Remaining: 4, Reset: 12 * time.Second},
	}}
	benchServe(b, d, http.MethodPost, "/v1/check", `{"flow":"login","account":"user-1234@example.com","ip":"10.1.2.3"}`, http.StatusOK)
}

// BenchmarkCheckHandlerSlow is a slowed check: a 429 with Retry-After.
func BenchmarkCheckHandlerSlow(b *testing.B) {
	d := &benchDecider{decision: engine.Decision{
		Action:     rules.Slow,
		Rule:       "login-account",
		RetryAfter: 41 * time.Second,
		Limits:     []engine.Limit{{Rule: "login-account", Remaining: 0, Reset: 41 * time.Second}},
		Quota:      &engine.Quota{Rule: "login-account", Burst: 5, Window: 5 * time.Minute, Remaining: 0, Reset: 41 * time.Second},
	}}
	benchServe(b, d, http.MethodPost, "/v1/check", `{"flow":"login","account":"victim-1@example.com","ip":"198.18.0.7"}`, http.StatusTooManyRequests)
}

// BenchmarkReportHandler is one success report through the HTTP layer.
func BenchmarkReportHandler(b *testing.B) {
	d := &benchDecider{report: engine.ReportResult{DeviceToken: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl"}}
	benchServe(b, d, http.MethodPost, "/v1/report", `{"attempt_id":"AQAAAAAAAAAAAAAAAAAAAAAAAAABmM9l2wAFbG9naW4","outcome":"success"}`, http.StatusOK)
}

// BenchmarkHealthz is the bare-HTTP baseline of the layer.
func BenchmarkHealthz(b *testing.B) {
	benchServe(b, &benchDecider{}, http.MethodGet, "/healthz", "", http.StatusOK)
}

// BenchmarkPasswordCheckHandler is one POST /v1/passwords/check through the
// HTTP layer, its lookup included.
func BenchmarkPasswordCheckHandler(b *testing.B) {
	f := withFilter(filterOf(b, breached.Plain, "123456", "password", "qwerty"))
	benchServe(b, &benchDecider{}, http.MethodPost, "/v1/passwords/check", `{"sha1":"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8"}`, http.StatusOK, f)
}

// BenchmarkCheckHandlerPasswordSHA1 is BenchmarkCheckHandler's check
// carrying password_sha1: what the lookup adds to a check.
func BenchmarkCheckHandlerPasswordSHA1(b *testing.B) {
	f := withFilter(filterOf(b, breached.Plain, "123456", "password", "qwerty"))
	d := &benchDecider{decision: engine.Decision{Action: rules.Allow, AttemptID: "AQAAAAAAAAAAAAAAAAAAAAAAAAABmM9l2wAFbG9naW4", Shadow: []engine.ShadowTrip{}}}
	benchServe(b, d, http.MethodPost, "/v1/check", `{"flow":"login","account":"user-1234@example.com","ip":"10.1.2.3","password_sha1":"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8"}`, http.StatusOK, f)
}
