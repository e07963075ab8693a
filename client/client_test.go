package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/client"
)

// fakeGuardian is an httptest server standing in for guardian: it records
// every request it receives and answers with handle.
type fakeGuardian struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
}

// recorded is one request a fakeGuardian received.
type recorded struct {
	method, path, query, auth string
	body                      map[string]any
}

func newFakeGuardian(t *testing.T, handle http.HandlerFunc) *fakeGuardian {
	t.Helper()
	g := &fakeGuardian{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := recorded{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, auth: r.Header.Get("Authorization")}
		b, _ := io.ReadAll(r.Body)
		if len(b) > 0 {
			if err := json.Unmarshal(b, &rec.body); err != nil {
				t.Errorf("request body %q is not JSON: %v", b, err)
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(b)) // for handle to read again
		g.mu.Lock()
		g.requests = append(g.requests, rec)
		g.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *fakeGuardian) received() []recorded {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]recorded(nil), g.requests...)
}

// answer returns a handler writing status, headers and a JSON body.
func answer(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

// hang is a handler that answers only after the client has gone.
func hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(5 * time.Second):
	}
}

// closedURL is the address of a port nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.Tokens == nil {
		cfg.Tokens = client.StaticToken("tok")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second // tests that want a timeout set their own
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var login = client.CheckRequest{Flow: client.FlowLogin, Account: "alice@example.com", IP: "203.0.113.7"}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		cfg  client.Config
		want error
	}{
		{"valid", client.Config{BaseURL: "http://guardian:8080", Tokens: client.StaticToken("t"), OnUnavailable: client.FailClosed}, nil},
		{"no policy", client.Config{BaseURL: "http://guardian:8080", Tokens: client.StaticToken("t")}, client.ErrNoPolicy},
		{"unknown policy", client.Config{BaseURL: "http://guardian:8080", Tokens: client.StaticToken("t"), OnUnavailable: 9}, client.ErrNoPolicy},
		{"no URL", client.Config{Tokens: client.StaticToken("t"), OnUnavailable: client.FailOpen}, client.ErrConfig},
		{"not http", client.Config{BaseURL: "redis://guardian", Tokens: client.StaticToken("t"), OnUnavailable: client.FailOpen}, client.ErrConfig},
		{"no tokens", client.Config{BaseURL: "http://guardian", OnUnavailable: client.FailOpen}, client.ErrConfig},
		{"negative timeout", client.Config{BaseURL: "http://guardian", Tokens: client.StaticToken("t"), OnUnavailable: client.Local, Timeout: -1}, client.ErrConfig},
		{"negative local limit", client.Config{BaseURL: "http://guardian", Tokens: client.StaticToken("t"), OnUnavailable: client.Local, Local: client.LocalLimits{MaxKeys: -1}}, client.ErrConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := client.New(tt.cfg)
			if !errors.Is(err, tt.want) {
				t.Fatalf("New() error = %v, want %v", err, tt.want)
			}
			if (c != nil) != (tt.want == nil) {
				t.Fatalf("New() client = %v with error %v", c, err)
			}
		})
	}
}

func TestCheckSendsTheContractsRequest(t *testing.T) {
	g := newFakeGuardian(t, answer(200, `{"decision":"allow","attempt_id":"a1","degraded":false,"limits":[],"shadow":[]}`))
	c := newClient(t, client.Config{BaseURL: g.URL + "/", Tokens: client.StaticToken("secret-token"), OnUnavailable: client.FailClosed})

	reqs := []client.CheckRequest{
		login,
		{Flow: client.FlowOTPSend, IP: "2001:db8::1", Recipient: "+15550100000", DeviceToken: "dev", Cost: 3},
		{Flow: client.FlowLogin, Account: "bob", IP: "203.0.113.8", SecretFingerprint: client.Fingerprint([]byte("k"), []byte("hunter2"))},
		{Flow: client.FlowLogin, Account: "bob", IP: "192.0.2.1", ChallengePassed: true},
	}
	for _, r := range reqs {
		if _, err := c.Check(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	got := g.received()
	want := []recorded{
		{method: "POST", path: "/v1/check", auth: "Bearer secret-token",
			body: map[string]any{"flow": "login", "account": "alice@example.com", "ip": "203.0.113.7"}},
		{method: "POST", path: "/v1/check", auth: "Bearer secret-token",
			body: map[string]any{"flow": "otp_send", "ip": "2001:db8::1", "recipient": "+15550100000", "device_token": "dev", "cost": 3.0}},
		{method: "POST", path: "/v1/check", auth: "Bearer secret-token",
			body: map[string]any{"flow": "login", "account": "bob", "ip": "203.0.113.8", "secret_fingerprint": client.Fingerprint([]byte("k"), []byte("hunter2"))}},
		{method: "POST", path: "/v1/check", auth: "Bearer secret-token",
			body: map[string]any{"flow": "login", "account": "bob", "ip": "192.0.2.1", "challenge_passed": true}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("guardian received\n%+v\nwant\n%+v", got, want)
	}
}

func TestCheckReadsGuardiansDecision(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    client.Decision
	}{
		{
			name: "allow",
			handler: answer(200, `{"decision":"allow","retry_after_ms":0,"attempt_id":"att-1","degraded":false,"repeat_guess":true,
				"limits":[{"rule":"login-account","remaining":4,"reset_ms":60000}],"shadow":[]}`,
				"RateLimit-Policy", `"login-account";q=5;w=300`, "RateLimit", `"login-account";r=4;t=60`),
			want: client.Decision{Action: client.Allow, AttemptID: "att-1", RepeatGuess: true,
				Limits:          []client.Limit{{Rule: "login-account", Remaining: 4, Reset: time.Minute}},
				Shadow:          []client.ShadowResult{},
				RateLimitPolicy: `"login-account";q=5;w=300`, RateLimit: `"login-account";r=4;t=60`},
		},
		{
			name: "allow, a repeat past the free ones",
			handler: answer(200, `{"decision":"allow","retry_after_ms":0,"attempt_id":"att-2","degraded":false,"repeat_guess":false,
				"repeat_capped":true,"limits":[],"shadow":[]}`),
			want: client.Decision{Action: client.Allow, AttemptID: "att-2", RepeatCapped: true,
				Limits: []client.Limit{}, Shadow: []client.ShadowResult{}},
		},
		{
			name: "challenge, degraded, with a shadow rule",
			handler: answer(200, `{"decision":"challenge","rule":"login-global-failures","attempt_id":"att-2","degraded":true,"trust":"network",
				"limits":[],"shadow":[{"rule":"login-ip-strict","decision":"block","retry_after_ms":0}]}`),
			want: client.Decision{Action: client.Challenge, Rule: "login-global-failures", AttemptID: "att-2", Degraded: true, Trust: "network",
				Limits: []client.Limit{}, Shadow: []client.ShadowResult{{Rule: "login-ip-strict", Action: client.Block}}},
		},
		{
			name: "slow",
			handler: answer(429, `{"decision":"slow","rule":"login-account","retry_after_ms":41000,"degraded":false,
				"limits":[{"rule":"login-account","remaining":0,"reset_ms":41000}],"shadow":[]}`, "Retry-After", "41"),
			want: client.Decision{Action: client.Slow, Rule: "login-account", RetryAfter: 41 * time.Second,
				Limits: []client.Limit{{Rule: "login-account", Remaining: 0, Reset: 41 * time.Second}}, Shadow: []client.ShadowResult{}},
		},
		{
			name:    "slow without retry_after_ms takes Retry-After",
			handler: answer(429, `{"decision":"slow","rule":"r","degraded":false,"limits":[],"shadow":[]}`, "Retry-After", "3"),
			want:    client.Decision{Action: client.Slow, Rule: "r", RetryAfter: 3 * time.Second, Limits: []client.Limit{}, Shadow: []client.ShadowResult{}},
		},
		{
			name:    "block",
			handler: answer(429, `{"decision":"block","rule":"login-hard-stop","degraded":false,"limits":[],"shadow":[]}`),
			want:    client.Decision{Action: client.Block, Rule: "login-hard-stop", Limits: []client.Limit{}, Shadow: []client.ShadowResult{}},
		},
		{
			name:    "429 from a proxy honours Retry-After",
			handler: answer(429, `<html>slow down</html>`, "Retry-After", "7"),
			want:    client.Decision{Action: client.Slow, RetryAfter: 7 * time.Second},
		},
		{
			name:    "429 from a proxy honours a Retry-After date",
			handler: answer(429, ``, "Retry-After", "Mon, 30 Nov 2026 10:00:30 GMT"),
			want:    client.Decision{Action: client.Slow, RetryAfter: 30 * time.Second},
		},
		{
			name:    "429 from a proxy without Retry-After waits a second",
			handler: answer(429, `{"message":"rate limited"}`),
			want:    client.Decision{Action: client.Slow, RetryAfter: time.Second},
		},
		{
			name: "slow answer within the deadline",
			handler: func(w http.ResponseWriter, r *http.Request) {
				time.Sleep(20 * time.Millisecond)
				answer(200, `{"decision":"allow","attempt_id":"late","degraded":false,"limits":[],"shadow":[]}`)(w, r)
			},
			want: client.Decision{Action: client.Allow, AttemptID: "late", Limits: []client.Limit{}, Shadow: []client.ShadowResult{}},
		},
	}
	now := func() time.Time { return time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGuardian(t, tt.handler)
			// FailOpen: a decision misread as unavailability would show.
			c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailOpen, Now: now})
			got, err := c.Check(t.Context(), login)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Check() =\n%+v\nwant\n%+v", got, tt.want)
			}
			if s := c.Stats(); s != (client.Stats{Checks: 1}) {
				t.Fatalf("Stats() = %+v, want one check, none unavailable", s)
			}
		})
	}
}

// failures are the ways guardian can fail to answer a check.
var failures = []struct {
	name   string
	url    func(t *testing.T) string // nil: a fake guardian with handler
	h      http.HandlerFunc
	reason client.Reason
}{
	{name: "timeout", h: hang, reason: client.ReasonTimeout},
	{name: "500", h: answer(500, `{"error":{"code":"internal","message":"internal error"}}`), reason: client.ReasonServerError},
	{name: "502 from a proxy", h: answer(502, `<html>bad gateway</html>`), reason: client.ReasonServerError},
	{name: "503", h: answer(503, ``, "Retry-After", "1"), reason: client.ReasonServerError},
	{name: "connection refused", url: closedURL, reason: client.ReasonConnection},
	{name: "malformed JSON", h: answer(200, `{"decision":"allow",`), reason: client.ReasonMalformed},
	{name: "no decision", h: answer(200, `{"limits":[]}`), reason: client.ReasonMalformed},
	{name: "unknown decision", h: answer(200, `{"decision":"maybe","limits":[],"shadow":[]}`), reason: client.ReasonMalformed},
	{name: "slow with status 200", h: answer(200, `{"decision":"slow","retry_after_ms":1000,"limits":[],"shadow":[]}`), reason: client.ReasonMalformed},
	{name: "redirect", h: answer(302, ``, "Location", "/elsewhere"), reason: client.ReasonMalformed},
	{name: "connection dropped mid-answer", h: func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"decision":`)
		panic(http.ErrAbortHandler)
	}, reason: client.ReasonConnection},
}

func TestCheckWhenGuardianDoesNotAnswer(t *testing.T) {
	policies := []struct {
		policy client.Policy
		want   client.Decision
	}{
		{client.FailClosed, client.Decision{Action: client.Slow, RetryAfter: 2 * time.Second, Unavailable: true}},
		{client.FailOpen, client.Decision{Action: client.Allow, Unavailable: true}},
		// The first local check of an account is allowed, with a local
		// attempt id checked below.
		{client.Local, client.Decision{Action: client.Allow, Unavailable: true}},
	}
	for _, f := range failures {
		for _, p := range policies {
			t.Run(f.name+"/"+p.policy.String(), func(t *testing.T) {
				var url string
				if f.url != nil {
					url = f.url(t)
				} else {
					url = newFakeGuardian(t, f.h).URL
				}
				var unavailable []string
				timeout := 2 * time.Second // generous: only a hanging guardian may time out
				if f.reason == client.ReasonTimeout {
					timeout = 50 * time.Millisecond
				}
				c := newClient(t, client.Config{
					BaseURL: url, OnUnavailable: p.policy, Timeout: timeout, ClosedRetryAfter: 2 * time.Second,
					Hooks: client.Hooks{Unavailable: func(c client.Call, r client.Reason) { unavailable = append(unavailable, string(c)+" "+string(r)) }},
				})
				got, err := c.Check(t.Context(), login)
				if err != nil {
					t.Fatalf("Check() error = %v, want the %s policy's decision", err, p.policy)
				}
				want := p.want
				want.Reason = f.reason
				if p.policy == client.Local {
					if len(got.AttemptID) < 10 || got.AttemptID[:6] != "local:" {
						t.Errorf("AttemptID = %q, want a local attempt id", got.AttemptID)
					}
					want.AttemptID = got.AttemptID
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("Check() =\n%+v\nwant\n%+v", got, want)
				}
				if w := []string{"check " + string(f.reason)}; !reflect.DeepEqual(unavailable, w) {
					t.Errorf("Hooks.Unavailable calls = %q, want %q", unavailable, w)
				}
				wantStats := client.Stats{Checks: 1, Unavailable: 1}
				if got.Action == client.Allow {
					wantStats.FailedOpen = 1
				}
				if s := c.Stats(); s != wantStats {
					t.Errorf("Stats() = %+v, want %+v", s, wantStats)
				}
			})
		}
	}
}

func TestCheckTimeoutKeepsToTheDeadline(t *testing.T) {
	g := newFakeGuardian(t, hang)
	c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed, Timeout: 40 * time.Millisecond,
		FirstCallTimeout: 40 * time.Millisecond}) // no first-call allowance
	start := time.Now()
	d, err := c.Check(t.Context(), login)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Check() took %v with a 40ms deadline", took)
	}
	if d.Action != client.Slow || d.Reason != client.ReasonTimeout {
		t.Errorf("Check() = %+v, want slow for a timeout", d)
	}
	if n := len(g.received()); n != 1 {
		t.Errorf("guardian received %d checks, want 1: a check that reached guardian is never sent again", n)
	}
}

// TestFirstCallAllowance: the calls that start before the client's first
// call ended have FirstCallTimeout; once one ended, calls have Timeout.
func TestFirstCallAllowance(t *testing.T) {
	const delay = 300 * time.Millisecond // longer than Timeout, far shorter than the allowance
	g := newFakeGuardian(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
			answer(200, `{"decision":"allow","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}`)(w, r)
		case <-r.Context().Done():
		}
	})
	c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed, Timeout: 100 * time.Millisecond,
		FirstCallTimeout: 10 * time.Second})
	// Five first calls at once: none has ended when the others start.
	var wg sync.WaitGroup
	first := make([]client.Decision, 5)
	for i := range first {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := c.Check(t.Context(), login)
			if err != nil {
				t.Error(err)
			}
			first[i] = d
		}()
	}
	wg.Wait()
	for i, d := range first {
		if d.Unavailable || d.Action != client.Allow {
			t.Errorf("first call %d = %+v, want guardian's allow within the allowance", i, d)
		}
	}
	d, err := c.Check(t.Context(), login)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Unavailable || d.Reason != client.ReasonTimeout {
		t.Errorf("a call after the first ended = %+v, want the policy's decision for a timeout (Timeout, no allowance)", d)
	}
}

// TestDefaultTimeoutsAreEveryClients: the Go client's defaults are the
// ones client/testdata/defaults.json gives every client.
func TestDefaultTimeoutsAreEveryClients(t *testing.T) {
	var want struct {
		TimeoutMS          int64 `json:"timeout_ms"`
		FirstCallTimeoutMS int64 `json:"first_call_timeout_ms"`
	}
	b, err := os.ReadFile("testdata/defaults.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if got := client.DefaultTimeout.Milliseconds(); got != want.TimeoutMS || want.TimeoutMS == 0 {
		t.Errorf("DefaultTimeout = %dms, every client's is %dms", got, want.TimeoutMS)
	}
	if got := client.DefaultFirstCallTimeout.Milliseconds(); got != want.FirstCallTimeoutMS || want.FirstCallTimeoutMS == 0 {
		t.Errorf("DefaultFirstCallTimeout = %dms, every client's is %dms", got, want.FirstCallTimeoutMS)
	}
}

func TestCheckRefusedIsAnErrorUnderEveryPolicy(t *testing.T) {
	tests := []struct {
		name string
		h    http.HandlerFunc
		want client.Error
	}{
		{"invalid ip", answer(400, `{"error":{"code":"invalid_ip","message":"ip: \"300.1.1.1\" is not an IP address"}}`),
			client.Error{Status: 400, Code: "invalid_ip", Message: `ip: "300.1.1.1" is not an IP address`}},
		{"unauthorized", answer(401, `{"error":{"code":"unauthorized","message":"missing bearer token"}}`),
			client.Error{Status: 401, Code: "unauthorized", Message: "missing bearer token"}},
		{"forbidden", answer(403, `{"error":{"code":"forbidden","message":"token scope check does not allow this call"}}`),
			client.Error{Status: 403, Code: "forbidden", Message: "token scope check does not allow this call"}},
		{"not guardian", answer(404, `<html>not found</html>`), client.Error{Status: 404}},
	}
	for _, tt := range tests {
		for _, p := range []client.Policy{client.FailClosed, client.FailOpen, client.Local} {
			t.Run(tt.name+"/"+p.String(), func(t *testing.T) {
				g := newFakeGuardian(t, tt.h)
				checked := 0
				c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: p,
					Hooks: client.Hooks{Checked: func(client.Decision, time.Duration) { checked++ }}})
				d, err := c.Check(t.Context(), login)
				var got *client.Error
				if !errors.As(err, &got) {
					t.Fatalf("Check() = %+v, %v; want a *client.Error", d, err)
				}
				if *got != tt.want {
					t.Errorf("error = %+v, want %+v", *got, tt.want)
				}
				if d.Action != "" || checked != 0 || c.Stats() != (client.Stats{}) {
					t.Errorf("a refused check decided %q (hooks %d, stats %+v); want no decision", d.Action, checked, c.Stats())
				}
			})
		}
	}
}

func TestCheckCancelledByTheCaller(t *testing.T) {
	g := newFakeGuardian(t, hang)
	c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailOpen, Timeout: time.Second})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	d, err := c.Check(ctx, login)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Check() = %+v, %v; want context.Canceled: nobody is waiting for a decision", d, err)
	}
}

func TestTokenSourceErrorIsReturned(t *testing.T) {
	g := newFakeGuardian(t, answer(200, `{}`))
	boom := errors.New("vault sealed")
	c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailOpen, Tokens: failingTokens{boom}})
	if _, err := c.Check(t.Context(), login); !errors.Is(err, boom) {
		t.Fatalf("Check() error = %v, want %v", err, boom)
	}
	if n := len(g.received()); n != 0 {
		t.Fatalf("guardian received %d requests without a token", n)
	}
}

type failingTokens struct{ err error }

func (f failingTokens) Token(context.Context) (string, error) { return "", f.err }

// flakyDialer fails its first fails dials, then connects.
type flakyDialer struct {
	fails int32
	dials atomic.Int32
}

func (f *flakyDialer) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if f.dials.Add(1) <= f.fails {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused")}
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}}
}

func TestCheckIsSentAgainOnlyWhenItNeverReachedGuardian(t *testing.T) {
	tests := []struct {
		name        string
		fails       int32
		wantDials   int32
		wantAction  client.Action
		wantRetried int
	}{
		{"first dial fails", 1, 2, client.Allow, 1},
		{"both dials fail", 2, 2, client.Slow, 1},
		{"no failure", 0, 1, client.Allow, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGuardian(t, answer(200, `{"decision":"allow","attempt_id":"a","degraded":false,"limits":[],"shadow":[]}`))
			dialer := &flakyDialer{fails: tt.fails}
			retried := 0
			c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed, HTTPClient: dialer.client(),
				Hooks: client.Hooks{Retried: func(client.Call) { retried++ }}})
			d, err := c.Check(t.Context(), login)
			if err != nil {
				t.Fatal(err)
			}
			if d.Action != tt.wantAction || dialer.dials.Load() != tt.wantDials || retried != tt.wantRetried {
				t.Fatalf("Check() = %s after %d dials, %d retries; want %s after %d dials, %d retries",
					d.Action, dialer.dials.Load(), retried, tt.wantAction, tt.wantDials, tt.wantRetried)
			}
		})
	}
}

func TestReport(t *testing.T) {
	tests := []struct {
		name    string
		h       http.HandlerFunc
		outcome client.Outcome
		want    client.ReportResult
		wantErr error
	}{
		{"success", answer(200, `{"recorded":true,"device_token":"dev-1"}`), client.Success, client.ReportResult{DeviceToken: "dev-1"}, nil},
		{"failure", answer(200, `{"recorded":true}`), client.Failure, client.ReportResult{}, nil},
		{"second report", answer(409, `{"error":{"code":"already_reported","message":"attempt_id: already reported"}}`), client.Failure, client.ReportResult{}, client.ErrAlreadyReported},
		{"expired", answer(400, `{"error":{"code":"invalid_attempt","message":"attempt_id: expired"}}`), client.Success, client.ReportResult{}, client.ErrInvalidAttempt},
		{"500", answer(500, `{"error":{"code":"internal","message":"internal error"}}`), client.Success, client.ReportResult{}, client.ErrUnavailable},
		{"throttled by a proxy", answer(429, ``, "Retry-After", "1"), client.Success, client.ReportResult{}, client.ErrUnavailable},
		{"not recorded", answer(200, `{}`), client.Success, client.ReportResult{}, client.ErrUnavailable},
		{"timeout", hang, client.Failure, client.ReportResult{}, client.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGuardian(t, tt.h)
			var reported []string
			c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed, Timeout: 50 * time.Millisecond,
				Hooks: client.Hooks{Reported: func(o client.Outcome, err error, _ time.Duration) {
					reported = append(reported, string(o)+" "+errString(err))
				}}})
			got, err := c.Report(t.Context(), "attempt-1", tt.outcome)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("Report() error = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("Report() = %+v, want %+v", got, tt.want)
			}
			reqs := g.received()
			wantReq := recorded{method: "POST", path: "/v1/report", auth: "Bearer tok",
				body: map[string]any{"attempt_id": "attempt-1", "outcome": string(tt.outcome)}}
			if len(reqs) != 1 || !reflect.DeepEqual(reqs[0], wantReq) {
				t.Fatalf("guardian received %+v, want exactly %+v", reqs, wantReq)
			}
			if w := []string{string(tt.outcome) + " " + errString(err)}; !reflect.DeepEqual(reported, w) {
				t.Errorf("Hooks.Reported calls = %q, want %q", reported, w)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func TestReportWithoutAttemptIDSendsNothing(t *testing.T) {
	g := newFakeGuardian(t, answer(500, ``))
	c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailOpen})
	if _, err := c.Report(t.Context(), "", client.Failure); err != nil {
		t.Fatal(err)
	}
	if n := len(g.received()); n != 0 {
		t.Fatalf("guardian received %d requests for an empty attempt id", n)
	}
}

func TestReportIsNeverSentTwiceOnceItMayHaveReachedGuardian(t *testing.T) {
	tests := []struct {
		name string
		h    http.HandlerFunc
	}{
		{"connection closed after the request was read", func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
		}},
		{"no answer within the deadline", hang},
		{"answer cut short", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, `{"recorded":`)
			panic(http.ErrAbortHandler)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGuardian(t, tt.h)
			retried := 0
			c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed, Timeout: 100 * time.Millisecond,
				Hooks: client.Hooks{Retried: func(client.Call) { retried++ }}})
			_, err := c.Report(t.Context(), "attempt-1", client.Failure)
			if !errors.Is(err, client.ErrUnavailable) {
				t.Fatalf("Report() error = %v, want ErrUnavailable", err)
			}
			if n := len(g.received()); n != 1 || retried != 0 {
				t.Fatalf("guardian received the report %d times (%d retries), want exactly once", n, retried)
			}
		})
	}
}

func TestReportSentAgainAfterADialFailure(t *testing.T) {
	tests := []struct {
		name    string
		h       http.HandlerFunc
		want    client.ReportResult
		wantErr error
	}{
		{"recorded", answer(200, `{"recorded":true,"device_token":"dev"}`), client.ReportResult{DeviceToken: "dev"}, nil},
		// Once a report was sent again, already_reported means an earlier
		// send landed: the report is made.
		{"already reported", answer(409, `{"error":{"code":"already_reported","message":"attempt_id: already reported"}}`), client.ReportResult{}, nil},
		{"another 409", answer(409, `{"error":{"code":"conflict","message":"?"}}`), client.ReportResult{}, &client.Error{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGuardian(t, tt.h)
			dialer := &flakyDialer{fails: 1}
			c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed, HTTPClient: dialer.client()})
			got, err := c.Report(t.Context(), "attempt-1", client.Success)
			var ce *client.Error
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.As(err, &ce) {
				t.Fatalf("Report() error = %v, want %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("Report() = %+v, want %+v", got, tt.want)
			}
			if n := len(g.received()); n != 1 || dialer.dials.Load() != 2 {
				t.Fatalf("guardian received %d reports after %d dials, want 1 after 2", n, dialer.dials.Load())
			}
		})
	}
}

func TestAccountStatusAndReset(t *testing.T) {
	g := newFakeGuardian(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/accounts/status":
			answer(200, `{"consecutive_failures":100,"blocked":true,"next_allowed_ms":1500,"remembered_guesses":2,
				"limits":[{"rule":"login-hard-stop","remaining":0,"reset_ms":7776000000}],
				"networks":[{"network":"h-q3bVd0Z8kL2mXn5pR7sT1u","consecutive_failures":4,"blocked":false}]}`)(w, r)
		case "/v1/accounts/reset":
			answer(200, `{"reset":true}`)(w, r)
		}
	})
	c := newClient(t, client.Config{BaseURL: g.URL, Tokens: client.StaticToken("admin"), OnUnavailable: client.FailClosed})
	st, err := c.AccountStatus(t.Context(), "alice+x@example.com")
	if err != nil {
		t.Fatal(err)
	}
	want := client.AccountStatus{ConsecutiveFailures: 100, Blocked: true, NextAllowed: 1500 * time.Millisecond, RememberedGuesses: 2,
		Limits:   []client.Limit{{Rule: "login-hard-stop", Remaining: 0, Reset: 90 * 24 * time.Hour}},
		Networks: []client.NetworkStatus{{Network: "h-q3bVd0Z8kL2mXn5pR7sT1u", ConsecutiveFailures: 4}}}
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("AccountStatus() = %+v, want %+v", st, want)
	}
	if err := c.ResetAccount(t.Context(), "alice+x@example.com"); err != nil {
		t.Fatal(err)
	}
	got := g.received()
	wantReqs := []recorded{
		{method: "GET", path: "/v1/accounts/status", query: "account=alice%2Bx%40example.com", auth: "Bearer admin"},
		{method: "POST", path: "/v1/accounts/reset", auth: "Bearer admin", body: map[string]any{"account": "alice+x@example.com"}},
	}
	if !reflect.DeepEqual(got, wantReqs) {
		t.Fatalf("guardian received\n%+v\nwant\n%+v", got, wantReqs)
	}
}

func TestAdminCallErrors(t *testing.T) {
	tests := []struct {
		name string
		h    http.HandlerFunc
		want error
	}{
		{"wrong scope", answer(403, `{"error":{"code":"forbidden","message":"token scope check does not allow this call"}}`), &client.Error{}},
		{"down", answer(503, ``), client.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGuardian(t, tt.h)
			c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed})
			_, errStatus := c.AccountStatus(t.Context(), "a")
			errReset := c.ResetAccount(t.Context(), "a")
			for _, err := range []error{errStatus, errReset} {
				var ce *client.Error
				if _, isRefusal := tt.want.(*client.Error); isRefusal && !errors.As(err, &ce) || !isRefusal && !errors.Is(err, tt.want) {
					t.Errorf("error = %v, want %v", err, tt.want)
				}
			}
		})
	}
}

func TestCallersShorterDeadlineWins(t *testing.T) {
	g := newFakeGuardian(t, hang)
	c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed, Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	d, err := c.Check(ctx, login)
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second || d.Action != client.Slow || d.Reason != client.ReasonTimeout {
		t.Fatalf("Check() = %+v after %v; want the fail-closed decision at the caller's deadline", d, took)
	}
}

func TestHooksChecked(t *testing.T) {
	g := newFakeGuardian(t, answer(200, `{"decision":"allow","attempt_id":"a1","degraded":false,"limits":[],"shadow":[]}`))
	ticks := []time.Time{t0, t0.Add(3 * time.Millisecond)}
	var mu sync.Mutex
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t := ticks[0]
		if len(ticks) > 1 {
			ticks = ticks[1:]
		}
		return t
	}
	type call struct {
		action  client.Action
		elapsed time.Duration
	}
	var got []call
	c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed, Now: now,
		Hooks: client.Hooks{Checked: func(d client.Decision, elapsed time.Duration) { got = append(got, call{d.Action, elapsed}) }}})
	if _, err := c.Check(t.Context(), login); err != nil {
		t.Fatal(err)
	}
	if want := []call{{client.Allow, 3 * time.Millisecond}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Hooks.Checked calls = %+v, want %+v", got, want)
	}
}
