package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store/memstore"
)

// testRules slow an account after 3 failures (then 1 an hour), and
// challenge an account's 3rd attempt within an hour.
const testRules = `version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 3
    action: slow
  - name: login-challenge
    flows: [password_reset]
    key: account
    type: rate
    count: attempts
    limit: 1
    per: 1h
    burst: 2
    action: challenge
`

// testUpstream is a basic-auth application: alice's password is "right";
// 207 for her, 401 for anyone else. It counts the requests that reach it
// and keeps the last one's headers and body.
type testUpstream struct {
	*httptest.Server
	hits     atomic.Int64
	lastHdr  atomic.Pointer[http.Header]
	lastBody atomic.Pointer[[]byte]
}

func newTestUpstream(t testing.TB) *testUpstream {
	u := &testUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.hits.Add(1)
		h := r.Header.Clone()
		u.lastHdr.Store(&h)
		b, _ := io.ReadAll(r.Body)
		u.lastBody.Store(&b)
		user, pass, _ := r.BasicAuth()
		if form, err := url.ParseQuery(string(b)); user == "" && err == nil {
			user, pass = form.Get("u"), form.Get("p")
		}
		if user == "alice" && pass == "right" {
			w.WriteHeader(http.StatusMultiStatus)
			fmt.Fprint(w, "<multistatus/>")
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(u.Close)
	return u
}

type testGateway struct {
	gw   *Gateway
	srv  *httptest.Server
	up   *testUpstream
	reg  *prometheus.Registry
	logs *bytes.Buffer
}

func proxyFile(upstream, mode, extra string) string {
	return fmt.Sprintf(`version: 1
proxies:
  - listen: 127.0.0.1:0
    upstream: %s
    mode: %s
    trusted_proxies: [10.0.0.0/8]
    routes:
      - name: basic
        match: {path_prefix: /dav/}
        flow: login
        account: {basic_auth: user}
        secret: {basic_auth: password}
        outcome:
          failure: [{status: [401]}]
          success: [{status: [207]}]
      - name: form
        match: {path: /login, methods: [POST]}
        flow: login
        account: {form: u}
        secret: {form: p}
        outcome:
          failure: [{status: [401]}]
          success: [{status: [207]}]
%s`, upstream, mode, extra)
}

func newTestGateway(t testing.TB, mode, extra string) *testGateway {
	t.Helper()
	up := newTestUpstream(t)
	f, err := Parse("test.yaml", []byte(proxyFile(up.URL, mode, extra)))
	if err != nil {
		t.Fatal(err)
	}
	eng, key := newTestEngine(t)
	reg := prometheus.NewRegistry()
	logs := &bytes.Buffer{}
	gw, err := New(Config{File: f, Decider: eng, ChallengeKey: key.Derive("c"), FingerprintKey: key.Derive("f"), Registerer: reg,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler(0))
	t.Cleanup(srv.Close)
	return &testGateway{gw: gw, srv: srv, up: up, reg: reg, logs: logs}
}

// newTestEngine returns an engine on testRules and the embedded store, and
// its signing key.
func newTestEngine(t testing.TB) (*engine.Engine, secret.Key) {
	t.Helper()
	set, err := rules.Parse("rules.yaml", []byte(testRules), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var holder rules.Holder
	holder.Store(set)
	key, _ := secret.New([]byte("gateway-test-signing-key-0123456789abcdef"))
	return engine.New(engine.Config{Rules: &holder, Store: memstore.New(memstore.Config{}), Key: key, Metrics: metrics.New(prometheus.NewRegistry())}), key
}

func (g *testGateway) basic(t *testing.T, user, pass string, cookies ...*http.Cookie) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("PROPFIND", g.srv.URL+"/dav/calendars/", nil)
	req.SetBasicAuth(user, pass)
	for _, c := range cookies {
		req.AddCookie(c)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp
}

func cookieOf(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestBasicAuthSlowedPastTheBurstAndTheOwnerGetsThroughOnTheDevice(t *testing.T) {
	g := newTestGateway(t, "enforce", "")
	ok := g.basic(t, "alice", "right")
	if ok.StatusCode != http.StatusMultiStatus {
		t.Fatalf("owner: got %d, want 207", ok.StatusCode)
	}
	dev := cookieOf(ok, DeviceCookie)
	if dev == nil || !dev.HttpOnly || dev.SameSite != http.SameSiteLaxMode || dev.Secure {
		t.Fatalf("device cookie: got %+v, want HttpOnly, SameSite=Lax, not Secure on plain HTTP", dev)
	}
	for i := range 3 {
		if resp := g.basic(t, "alice", fmt.Sprintf("wrong-%d", i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: got %d, want 401 from the upstream", i, resp.StatusCode)
		}
	}
	before := g.up.hits.Load()
	resp := g.basic(t, "alice", "wrong-3")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("past the burst: got %d, want 429", resp.StatusCode)
	}
	if resp.Header.Get("Retry-After") == "" || !strings.HasPrefix(resp.Header.Get("Ratelimit"), `"login-account";r=0`) || resp.Header.Get("Ratelimit-Policy") == "" {
		t.Errorf("429 headers: got %v", resp.Header)
	}
	var e errorBody
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || e.Error.Code != "rate_limited" {
		t.Errorf("429 body: got %+v, %v; want the error shape, rate_limited", e, err)
	}
	if resp := g.basic(t, "alice", "right"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("owner without the device: got %d, want 429", resp.StatusCode)
	}
	if got := g.up.hits.Load(); got != before {
		t.Errorf("the upstream saw %d requests while slowed, want none", got-before)
	}
	if resp := g.basic(t, "alice", "right", dev); resp.StatusCode != http.StatusMultiStatus {
		t.Errorf("owner with the device cookie: got %d, want 207", resp.StatusCode)
	}
	if h := *g.up.lastHdr.Load(); strings.Contains(h.Get("Cookie"), DeviceCookie) || h.Get("X-Request-Id") == "" {
		t.Errorf("upstream headers: got %v, want no guardian cookie and an X-Request-Id", h)
	}
	if got := testutil.ToFloat64(g.gw.metrics.requests.WithLabelValues(g.srv.Listener.Addr().String(), "basic", "slow")); got != 0 {
		t.Errorf("metrics name the proxy by its listen address, not the test server's")
	}
	name := g.gw.proxies[0].Name
	if got := testutil.ToFloat64(g.gw.metrics.requests.WithLabelValues(name, "basic", "slow")); got != 2 {
		t.Errorf("guardian_proxy_requests_total{decision=slow}: got %v, want 2", got)
	}
	if got := testutil.ToFloat64(g.gw.metrics.outcomes.WithLabelValues("basic", "failure")); got != 3 {
		t.Errorf("guardian_proxy_outcomes_total{outcome=failure}: got %v, want 3", got)
	}
	if got := testutil.ToFloat64(g.gw.metrics.outcomes.WithLabelValues("basic", "success")); got != 2 {
		t.Errorf("guardian_proxy_outcomes_total{outcome=success}: got %v, want 2", got)
	}
	g.assertNoSecret(t, "right", "wrong-1")
}

func TestADeviceCookieIsKeptUntilNearItsExpiry(t *testing.T) {
	g := newTestGateway(t, "enforce", "")
	dev := cookieOf(g.basic(t, "alice", "right"), DeviceCookie)
	if dev == nil {
		t.Fatal("no device cookie after the first success")
	}
	if again := g.basic(t, "alice", "right", dev); again.StatusCode != http.StatusMultiStatus || cookieOf(again, DeviceCookie) != nil {
		t.Fatalf("success on the device: got %d, cookie %v; want 207 and the cookie kept, none set", again.StatusCode, cookieOf(again, DeviceCookie))
	}
	if other := g.basic(t, "bob", "right", dev); cookieOf(other, DeviceCookie) != nil {
		t.Fatalf("a failure of another account set a device cookie")
	}
	// 61 days on, the cookie expires within deviceRenewal: renewed.
	later := time.Now().Add(61 * 24 * time.Hour)
	g.gw.challenges.now = func() time.Time { return later }
	renewed := cookieOf(g.basic(t, "alice", "right", dev), DeviceCookie)
	if renewed == nil || renewed.Value == dev.Value {
		t.Fatalf("near its expiry: got %v, want a new device cookie", renewed)
	}
}

func TestRenewDeviceReadsTheExpiry(t *testing.T) {
	g := newTestGateway(t, "enforce", "")
	now := time.Now()
	g.gw.challenges.now = func() time.Time { return now }
	tok := func(payload string) string {
		return "eyJhbGciOiJIUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".sig"
	}
	tests := []struct {
		tok  string
		want bool
	}{
		{tok(fmt.Sprintf(`{"sub":"a","exp":%d}`, now.Add(60*24*time.Hour).Unix())), false},
		{tok(fmt.Sprintf(`{"sub":"a","exp":%d}`, now.Add(29*24*time.Hour).Unix())), true},
		{tok(`{"sub":"a"}`), true},
		{tok(`not json`), true},
		{"no-dots", true},
		{"a.!!!.b", true},
		{tok(`{"sub":"` + strings.Repeat("a", 2000) + `"}`), true},
	}
	for _, tt := range tests {
		if got := g.gw.renewDevice(tt.tok); got != tt.want {
			t.Errorf("renewDevice(%.60s…) = %v, want %v", tt.tok, got, tt.want)
		}
	}
}

// assertNoSecret fails when a password is in the logs or the metrics.
func (g *testGateway) assertNoSecret(t *testing.T, secrets ...string) {
	t.Helper()
	mfs, err := g.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, mf := range mfs {
		text.WriteString(mf.String())
	}
	for _, s := range secrets {
		if strings.Contains(g.logs.String(), s) || strings.Contains(text.String(), s) {
			t.Errorf("the secret %q is in the logs or the metrics", s)
		}
	}
}

func TestObserveModeNeverStops(t *testing.T) {
	g := newTestGateway(t, "observe", "")
	for i := range 8 {
		if resp := g.basic(t, "bob", fmt.Sprintf("guess-%d", i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("observe, guess %d: got %d, want the upstream's 401", i, resp.StatusCode)
		}
	}
	if got := g.up.hits.Load(); got != 8 {
		t.Errorf("upstream hits: got %d, want 8", got)
	}
	if got := testutil.ToFloat64(g.gw.metrics.requests.WithLabelValues(g.gw.proxies[0].Name, "basic", "slow")); got == 0 {
		t.Error("observe mode counted no slow decision")
	}
}

func TestRepeatedWrongPasswordCountsOnce(t *testing.T) {
	g := newTestGateway(t, "enforce", "")
	for i := range 6 {
		if resp := g.basic(t, "carol", "the-same-guess"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("repeat %d: got %d, want 401: a repeated guess spends nothing on the account", i, resp.StatusCode)
		}
	}
}

func TestFormBodyReachesTheUpstreamIntactAndIsCapped(t *testing.T) {
	g := newTestGateway(t, "enforce", "")
	form := "u=alice&p=right&extra=" + strings.Repeat("x", 1000)
	req, _ := http.NewRequest("POST", g.srv.URL+"/login", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp := do(t, req); resp.StatusCode != http.StatusMultiStatus {
		t.Fatalf("form login: got %d, want 207", resp.StatusCode)
	}
	if got := string(*g.up.lastBody.Load()); got != form {
		t.Errorf("the upstream got a body of %d bytes, want the %d sent", len(got), len(form))
	}
	big := "u=alice&p=x&pad=" + strings.Repeat("x", maxBody)
	req, _ = http.NewRequest("POST", g.srv.URL+"/login", strings.NewReader(big))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	hits := g.up.hits.Load()
	if resp := do(t, req); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a login body over 64 KiB: got %d, want 413", resp.StatusCode)
	}
	if g.up.hits.Load() != hits {
		t.Error("a 413 reached the upstream")
	}
	// Not a route: streamed without a limit.
	req, _ = http.NewRequest("POST", g.srv.URL+"/upload", strings.NewReader(big))
	if resp := do(t, req); resp.StatusCode != http.StatusUnauthorized || len(*g.up.lastBody.Load()) != len(big) {
		t.Errorf("an unrouted upload: got %d with %d bytes upstream", resp.StatusCode, len(*g.up.lastBody.Load()))
	}
}

func TestBrowsersGetAPage(t *testing.T) {
	g := newTestGateway(t, "enforce", "")
	for i := range 4 {
		g.basic(t, "dave", fmt.Sprintf("w%d", i))
	}
	req, _ := http.NewRequest("GET", g.srv.URL+"/dav/", nil)
	req.SetBasicAuth("dave", "w9")
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	resp := do(t, req)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "Try again in") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("browser: got %d %v\n%s", resp.StatusCode, resp.Header, body)
	}
}

func TestForwardedHeaders(t *testing.T) {
	g := newTestGateway(t, "enforce", "")
	req, _ := http.NewRequest("GET", g.srv.URL+"/other", nil)
	req.Header.Set("X-Forwarded-For", "198.51.100.7")
	req.Header.Set(BreachedHeaderName, "1")
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "gone")
	do(t, req)
	h := *g.up.lastHdr.Load()
	// The test client is 127.0.0.1, not a trusted proxy: its
	// X-Forwarded-For is not believed.
	if got := h.Get("X-Forwarded-For"); got != "127.0.0.1" {
		t.Errorf("X-Forwarded-For: got %q, want the untrusted peer alone", got)
	}
	if h.Get("X-Forwarded-Proto") != "http" || h.Get(BreachedHeaderName) != "" || h.Get("X-Hop") != "" {
		t.Errorf("upstream headers: got %v", h)
	}
}

func TestClientAddressThroughTrustedProxies(t *testing.T) {
	p := &proxy{Proxy: &Proxy{}}
	f, _ := Parse("t", []byte(proxyFile("http://a", "enforce", "")))
	p.Proxy = &f.Proxies[0]
	tests := []struct {
		peer, xff, proto string
		want             string
		secure           bool
	}{
		{"203.0.113.9:1", "198.51.100.7", "https", "203.0.113.9", false},
		{"10.1.2.3:1", "198.51.100.7", "https", "198.51.100.7", true},
		{"10.1.2.3:1", "198.51.100.7, 10.9.9.9", "", "198.51.100.7", false},
		{"10.1.2.3:1", "1.2.3.4, 198.51.100.7", "", "198.51.100.7", false},
		{"10.1.2.3:1", "garbage", "", "10.1.2.3", false},
		{"[2001:db8::1]:1", "", "", "2001:db8::1", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.peer
		if tt.xff != "" {
			r.Header.Set("X-Forwarded-For", tt.xff)
		}
		if tt.proto != "" {
			r.Header.Set("X-Forwarded-Proto", tt.proto)
		}
		got, secure := p.client(r)
		if got.String() != tt.want || secure != tt.secure {
			t.Errorf("peer %s, XFF %q: got %s secure %v, want %s secure %v", tt.peer, tt.xff, got, secure, tt.want, tt.secure)
		}
	}
}

func TestEngineErrorsAnswerTheErrorShape(t *testing.T) {
	g := newTestGateway(t, "enforce", "")
	req, _ := http.NewRequest("PROPFIND", g.srv.URL+"/dav/", nil)
	req.SetBasicAuth(strings.Repeat("a", 5000), "x")
	resp := do(t, req)
	var e errorBody
	if err := json.NewDecoder(resp.Body).Decode(&e); resp.StatusCode != http.StatusBadRequest || err != nil || e.Error.Code != "invalid_field" {
		t.Errorf("an account too long: got %d %+v", resp.StatusCode, e)
	}
}

func TestProxiesOfTwoTenantsKeepAnAccountsBudgetsApart(t *testing.T) {
	up := newTestUpstream(t)
	proxy := func(listen, tenant string) string {
		return fmt.Sprintf(`
  - listen: %s
    upstream: %s
    tenant: %s
    routes:
      - name: basic
        match: {path_prefix: /dav/}
        flow: login
        account: {basic_auth: user}
        outcome:
          failure: [{status: [401]}]
          success: [{status: [207]}]`, listen, up.URL, tenant)
	}
	f, err := Parse("test.yaml", []byte("version: 1\nproxies:"+proxy("127.0.0.1:1", "acme")+proxy("127.0.0.1:2", "globex")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	eng, key := newTestEngine(t)
	gw, err := New(Config{File: f, Decider: eng, ChallengeKey: key.Derive("c"), FingerprintKey: key.Derive("f")})
	if err != nil {
		t.Fatal(err)
	}
	acme, globex := httptest.NewServer(gw.Handler(0)), httptest.NewServer(gw.Handler(1))
	t.Cleanup(acme.Close)
	t.Cleanup(globex.Close)
	login := func(srv *httptest.Server, pass string) *http.Response {
		req, _ := http.NewRequest("PROPFIND", srv.URL+"/dav/", nil)
		req.SetBasicAuth("alice", pass)
		return do(t, req)
	}
	for i := range 3 {
		if resp := login(acme, fmt.Sprint("wrong-", i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("acme failure %d: got %d, want 401", i, resp.StatusCode)
		}
	}
	if resp := login(acme, "wrong-3"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("acme past the burst: got %d, want 429", resp.StatusCode)
	}
	if resp := login(globex, "wrong-0"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("globex, the same account: got %d, want 401 (a budget of its own)", resp.StatusCode)
	}
	// A success is reported in the check's own tenant: it earns a device.
	if resp := login(globex, "right"); resp.StatusCode != http.StatusMultiStatus || cookieOf(resp, DeviceCookie) == nil {
		t.Fatalf("globex success: got %d, cookie %v; want 207 and a device cookie", resp.StatusCode, cookieOf(resp, DeviceCookie))
	}
	if v := gw.View(); v.Proxies[0].Tenant != "acme" || v.Proxies[1].Tenant != "globex" {
		t.Errorf("view tenants: got %q, %q", v.Proxies[0].Tenant, v.Proxies[1].Tenant)
	}
}
