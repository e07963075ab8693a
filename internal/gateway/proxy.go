package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/guardian-sec/guardian/internal/decisionlog"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/requestid"
	"github.com/guardian-sec/guardian/internal/rules"
)

// Cookies and headers the gateway sets and reads. None of them reaches the
// upstream from the client: the gateway strips them and sets its own.
const (
	// DeviceCookie holds a device token for the account that last logged
	// in through the proxy from this browser.
	DeviceCookie = "guardian_device"
	// PassCookie holds the pass a solved proof of work earned.
	PassCookie = "guardian_challenge"
	// PassHeader carries that pass for an API client.
	PassHeader = "X-Guardian-Challenge"
	// BreachedHeader tells the upstream the secret of the login it
	// forwards is in the breached-password filter.
	BreachedHeaderName = "X-Guardian-Breached"
)

// Decider is what a proxy checks and reports through: the engine, or the
// engine writing the decision log (package decisionlog). *engine.Engine
// implements it.
type Decider interface {
	Check(ctx context.Context, req engine.CheckRequest) (engine.Decision, error)
	Report(ctx context.Context, attemptID string, outcome engine.Outcome) (engine.ReportResult, error)
}

var _ Decider = (*engine.Engine)(nil)

// proxy is one Proxy of a File, serving HTTP.
type proxy struct {
	*Proxy
	gw *Gateway
	rp *httputil.ReverseProxy
	// upstream is the proxy's series of guardian_proxy_upstream_seconds;
	// routes[i] the series of its i-th route, resolved once each.
	upstream lazy[prometheus.Observer]
	routes   []routeMetrics
	// bound[i] is what a challenge of the i-th route is bound to: its
	// name, after the proxy's tenant if it has one, so that a pass earned
	// in one tenant is no pass in another.
	bound []string
}

// state is what one request through a proxy carries to the upstream's
// answer.
type state struct {
	start time.Time
	route *Route
	// metrics are route's series.
	metrics *routeMetrics
	// attempt is the check's attempt id, to report the outcome on.
	attempt string
	secure  bool
	// breached sets X-Guardian-Breached on the request upstream.
	breached bool
	// keepDevice reports the outcome keeping the device cookie the
	// request carried (engine.KeepDevice): it is valid for the account
	// and far from its expiry.
	keepDevice bool
	// forwarded is set once the request went to the upstream, which
	// closes its body (and gives a pooled buffer back).
	forwarded bool
}

type stateKey struct{}

func newProxy(gw *Gateway, px *Proxy) *proxy {
	p := &proxy{Proxy: px, gw: gw, routes: make([]routeMetrics, len(px.Routes))}
	m := gw.metrics
	p.upstream.resolve = func() prometheus.Observer { return m.upstream.WithLabelValues(px.Name) }
	for i := range px.Routes {
		p.routes[i].init(m, px.Name, px.Routes[i].Name)
		bound := px.Routes[i].Name
		if px.Tenant != "" {
			bound = px.Tenant + "/" + bound
		}
		p.bound = append(p.bound, bound)
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite:        p.rewrite,
		Transport:      gw.transport,
		ModifyResponse: p.modifyResponse,
		ErrorHandler:   p.upstreamError,
		ErrorLog:       slog.NewLogLogger(gw.log.Handler(), slog.LevelWarn),
		BufferPool:     gw.buffers,
	}
	return p
}

// ServeHTTP serves one request: the challenge endpoint and its assets, a
// checked request on a route, or any other request passed through.
func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-Id")
	if !requestid.Valid(id) {
		id = requestid.New()
		r.Header.Set("X-Request-Id", id)
	}
	// One value for the answer's header and the request's: a Set
	// replaces it, an Add (cap 1) copies it first.
	w.Header()["X-Request-Id"] = r.Header["X-Request-Id"][:1:1]
	ctx := keys.WithTenant(requestid.With(r.Context(), id), p.Tenant)
	if strings.HasPrefix(r.URL.Path, "/.guardian/") {
		p.gw.serveGuardian(w, r.WithContext(ctx), p)
		return
	}
	st := &state{start: time.Now()}
	i := p.match(r)
	if i < 0 {
		p.forward(w, r, ctx, st)
		return
	}
	p.checked(w, r, ctx, i, st)
}

// match returns the index of the first route r matches, or -1.
func (p *proxy) match(r *http.Request) int {
	for i := range p.Routes {
		rt := &p.Routes[i]
		if rt.Path != "" && r.URL.Path != rt.Path {
			continue
		}
		if rt.PathPrefix != "" && !strings.HasPrefix(r.URL.Path, rt.PathPrefix) {
			continue
		}
		if rt.Methods != nil && !containsString(rt.Methods, r.Method) {
			continue
		}
		return i
	}
	return -1
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// checked checks a request that matched the i-th route and answers or
// forwards it; ctx is the request's context with its request id.
func (p *proxy) checked(w http.ResponseWriter, r *http.Request, ctx context.Context, i int, st *state) {
	rt, m := &p.Routes[i], &p.routes[i]
	b, ok := readBody(r)
	if !ok {
		m.request("too_large").Inc()
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "the body of a login request is limited to 64 KiB")
		return
	}
	defer func() {
		if !st.forwarded && r.Body != nil {
			r.Body.Close()
		}
	}()
	account := rt.Account.extract(r, b)
	if account == "" {
		m.request("unchecked").Inc()
		p.forward(w, r, ctx, st)
		return
	}
	client, secure := p.client(r)
	st.route, st.metrics, st.secure = rt, m, secure
	req := engine.CheckRequest{Flow: rt.Flow, Account: account, IP: client.String()}
	if c, err := r.Cookie(DeviceCookie); err == nil {
		req.DeviceToken = c.Value
	}
	// The binding is an HMAC: made only for a pass or a challenge.
	bind := func() [bindLen]byte { return p.gw.challenges.binding(account, client, p.bound[i]) }
	if pass := passOf(r); pass != "" && p.gw.challenges.redeem(r.Context(), pass, bind()) == nil {
		req.ChallengePassed = true
	}
	isBreached := false
	if secret := rt.Secret.extract(r, b); secret != "" {
		req.SecretFingerprint = p.gw.fingerprint(secret)
		isBreached = rt.Breached != "" && p.gw.isBreached(secret)
	}
	d, err := p.gw.decider.Check(decisionlog.WithRoute(ctx, rt.Name), req)
	if err != nil {
		m.request("error").Inc()
		if p.Mode == Observe {
			p.forward(w, r, ctx, st)
			return
		}
		p.checkError(w, r.WithContext(ctx), err)
		return
	}
	action := string(d.Action)
	if isBreached && d.Action.Severity() < rules.Slow.Severity() {
		switch rt.Breached {
		case BreachedHeader:
			st.breached = true
		case BreachedChallenge:
			if !req.ChallengePassed {
				action = string(rules.Challenge)
			}
		case BreachedBlock:
			action = "breached"
		}
	}
	m.request(action).Inc()
	st.attempt = d.AttemptID
	st.keepDevice = d.Trust == engine.TrustDevice && !p.gw.renewDevice(req.DeviceToken)
	if p.Mode == Observe {
		p.gw.log.DebugContext(ctx, "proxy observed", "proxy", p.Name, "route", rt.Name, "decision", action)
		p.forward(w, r, ctx, st)
		return
	}
	switch action {
	case string(rules.Allow):
		p.forward(w, r, ctx, st)
	case string(rules.Slow), string(rules.Block):
		denied(w, r, &d)
	case string(rules.Challenge):
		if req.ChallengePassed {
			// A passed challenge that is challenged again (another rule
			// still asks) goes ahead: the user did what was asked.
			p.forward(w, r, ctx, st)
			return
		}
		p.gw.challenge(w, r, rt, bind(), secure)
	default:
		writePage(w, r, http.StatusForbidden, "breached_password",
			"This password is in a list of breached passwords, so it cannot be used to sign in. Reset your password.")
	}
}

// client returns the client's address, as the peer or, from a trusted
// peer, the nearest untrusted address of X-Forwarded-For; and whether
// the client's connection is TLS (or a trusted peer says it was).
func (p *proxy) client(r *http.Request) (netip.Addr, bool) {
	peer := peerAddr(r)
	secure := r.TLS != nil
	if !p.trusted(peer) {
		return peer, secure
	}
	if r.Header.Get("X-Forwarded-Proto") == "https" {
		secure = true
	}
	hops := forwardedFor(r.Header)
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		client = a.Unmap()
		if !p.trusted(client) {
			break
		}
	}
	return client, secure
}

// forwardedFor returns the addresses of every X-Forwarded-For header, in
// order.
func forwardedFor(h http.Header) []string {
	var hops []string
	for _, v := range h.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	return hops
}

func peerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		a, _ := netip.ParseAddr(host)
		return a.Unmap()
	}
	return ap.Addr().Unmap()
}

func (p *proxy) trusted(a netip.Addr) bool {
	for _, pf := range p.TrustedProxies {
		if pf.Contains(a) {
			return true
		}
	}
	return false
}

// passOf returns the pass a request carries, in the header or the cookie.
func passOf(r *http.Request) string {
	if v := r.Header.Get(PassHeader); v != "" {
		return v
	}
	if c, err := r.Cookie(PassCookie); err == nil {
		return c.Value
	}
	return ""
}

// forward sends r upstream in ctx with st, to be settled by the answer.
func (p *proxy) forward(w http.ResponseWriter, r *http.Request, ctx context.Context, st *state) {
	st.forwarded = true
	p.rp.ServeHTTP(w, r.WithContext(context.WithValue(ctx, stateKey{}, st)))
}

// rewrite makes the request upstream: the upstream's URL, the client's
// Host kept, X-Forwarded-For/-Proto/-Host set (a trusted peer's appended
// to), and guardian's own cookies and headers removed.
func (p *proxy) rewrite(pr *httputil.ProxyRequest) {
	in, out := pr.In, pr.Out
	pr.SetURL(p.Upstream)
	out.Host = in.Host
	peer := peerAddr(in)
	proto := "http"
	if in.TLS != nil {
		proto = "https"
	}
	xff := peer.String()
	if p.trusted(peer) {
		if prior := strings.Join(in.Header.Values("X-Forwarded-For"), ", "); prior != "" {
			xff = prior + ", " + xff
		}
		if v := in.Header.Get("X-Forwarded-Proto"); v == "https" || v == "http" {
			proto = v
		}
	}
	// One array behind the three values (cap 1 each, as Set makes them).
	fwd := [...]string{xff, proto, in.Host}
	vals := fwd[:]
	out.Header["X-Forwarded-For"] = vals[0:1:1]
	out.Header["X-Forwarded-Proto"] = vals[1:2:2]
	out.Header["X-Forwarded-Host"] = vals[2:3:3]
	out.Header.Del(PassHeader)
	out.Header.Del(BreachedHeaderName)
	stripCookies(out.Header)
	st, _ := in.Context().Value(stateKey{}).(*state)
	if st == nil || st.route == nil {
		return
	}
	if st.breached {
		out.Header.Set(BreachedHeaderName, "1")
	}
	if st.route.readsBody() {
		// The outcome reads the body as sent: no compression.
		out.Header.Del("Accept-Encoding")
	}
}

// stripCookies removes guardian's cookies from the Cookie headers of h.
func stripCookies(h http.Header) {
	vals := h["Cookie"]
	found := false
	for _, v := range vals {
		if strings.Contains(v, "guardian_") {
			found = true
		}
	}
	if !found {
		return
	}
	var kept []string
	for _, v := range vals {
		for _, part := range strings.Split(v, ";") {
			name, _, _ := strings.Cut(strings.TrimSpace(part), "=")
			if name == DeviceCookie || name == PassCookie || strings.TrimSpace(part) == "" {
				continue
			}
			kept = append(kept, strings.TrimSpace(part))
		}
	}
	if len(kept) == 0 {
		h.Del("Cookie")
		return
	}
	h["Cookie"] = []string{strings.Join(kept, "; ")}
}

// modifyResponse classifies the upstream's answer to a checked request
// and reports it, setting the device cookie after a success.
func (p *proxy) modifyResponse(resp *http.Response) error {
	st, _ := resp.Request.Context().Value(stateKey{}).(*state)
	if st == nil {
		return nil
	}
	p.upstream.get().Observe(time.Since(st.start).Seconds())
	if st.route == nil || st.attempt == "" {
		return nil
	}
	var head []byte
	if st.route.readsBody() {
		head = peekBody(resp)
	}
	outcome := st.route.classify(resp, head)
	st.metrics.outcome(outcome).Inc()
	if outcome == Unknown {
		return nil
	}
	ctx := resp.Request.Context()
	if st.keepDevice {
		ctx = engine.KeepDevice(ctx)
	}
	res, err := p.gw.decider.Report(ctx, st.attempt, engine.Outcome(outcome))
	if err != nil {
		p.gw.log.WarnContext(ctx, "proxy: the outcome could not be reported", "proxy", p.Name, "route", st.route.Name, "err", err)
		return nil
	}
	if res.DeviceToken != "" {
		c := http.Cookie{Name: DeviceCookie, Value: res.DeviceToken, Path: "/", MaxAge: int(deviceCookieAge / time.Second),
			HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: st.secure}
		resp.Header.Add("Set-Cookie", c.String())
	}
	return nil
}

// deviceCookieAge is how long the browser keeps the device cookie: as long
// as a device token lasts.
const deviceCookieAge = 90 * 24 * time.Hour

// deviceRenewal is how close to its expiry a device cookie the check
// trusted is replaced by a new one on a success. Farther from it the
// cookie is kept, and no token is signed.
const deviceRenewal = 30 * 24 * time.Hour

// renewDevice reports whether the device token tok, which a check has just
// verified, expires within deviceRenewal (or its expiry cannot be read).
// The signature is not checked again: the check did.
func (g *Gateway) renewDevice(tok string) bool {
	_, rest, _ := strings.Cut(tok, ".")
	payload, _, ok := strings.Cut(rest, ".")
	if !ok || len(payload) > maxDevicePayload {
		return true
	}
	var raw [maxDevicePayload]byte
	n, err := base64.RawURLEncoding.Decode(raw[:], []byte(payload))
	if err != nil {
		return true
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if json.Unmarshal(raw[:n], &claims) != nil || claims.Exp == 0 {
		return true
	}
	return !g.challenges.now().Add(deviceRenewal).Before(time.Unix(claims.Exp, 0))
}

// maxDevicePayload bounds the payload of a device token renewDevice reads.
const maxDevicePayload = 1024

// upstreamError answers a request the upstream did not answer: 502,
// the attempt left unreported.
func (p *proxy) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	st, _ := r.Context().Value(stateKey{}).(*state)
	if st != nil {
		p.upstream.get().Observe(time.Since(st.start).Seconds())
		if st.route != nil && st.attempt != "" {
			st.metrics.outcome(Unknown).Inc()
		}
	}
	if errors.Is(err, context.Canceled) {
		return // the client went away
	}
	p.gw.log.WarnContext(r.Context(), "proxy: upstream did not answer", "proxy", p.Name, "err", err)
	writeError(w, http.StatusBadGateway, "bad_gateway", "the application behind guardian did not answer")
}

// checkError answers a check the engine could not decide.
func (p *proxy) checkError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, keys.ErrInvalidAccount):
		writeError(w, http.StatusBadRequest, "invalid_field", "account: not a valid account name")
	case errors.Is(err, engine.ErrInvalidField), errors.Is(err, engine.ErrMissingField), errors.Is(err, keys.ErrInvalidIP):
		writeError(w, http.StatusBadRequest, "invalid_field", "the request cannot be checked")
	case r.Context().Err() != nil:
	default:
		p.gw.log.WarnContext(r.Context(), "proxy: check failed", "proxy", p.Name, "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "guardian cannot decide now; try again")
	}
}

// fingerprint is guardian's own secret fingerprint of secret (contract
// 7.3): HMAC-SHA256 under a key derived from the hash key, the form a
// check's secret_fingerprint has.
func (g *Gateway) fingerprint(secret string) string {
	m, _ := g.fpMACs.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, g.fpKey)
	}
	m.Reset()
	_, _ = io.WriteString(m, secret)
	var sum [sha256.Size]byte
	var text [43]byte // base64 of 32 bytes, unpadded
	base64.RawURLEncoding.Encode(text[:], m.Sum(sum[:0]))
	m.Reset() // nothing of the secret stays in the pool
	g.fpMACs.Put(m)
	return string(text[:])
}

// isBreached looks secret up in the breached-password filter in use.
func (g *Gateway) isBreached(secret string) bool {
	if g.breached == nil {
		return false
	}
	l := g.breached.Load()
	return l != nil && l.Filter.ContainsPassword(secret)
}

// retryAfter is d in whole seconds, rounded up.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}
