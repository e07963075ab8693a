// Package client is the auth service's side of guardian: a Go client for
// guardian's decision API (POST /v1/check, POST /v1/report) and the admin
// calls a reset flow needs, plus helpers that turn a decision into the
// answer the auth service gives its end user.
//
// guardian decides for itself what happens when its own store fails; this
// package makes the auth service decide what happens when guardian fails.
// Config.OnUnavailable has no default: New refuses a Config that does not
// say FailClosed, FailOpen or Local. Check never returns "guardian is down"
// as an error for the caller to forget about: it returns the decision the
// policy made, marked Decision.Unavailable.
//
// A login is one call, Client.Attempt: check, the challenge when guardian
// asks for one (a function the caller must give), verify, report. Its
// example, a login handler, is the one the README shows. Check and Report
// are the steps it takes, for flows that need them apart; with them, verify
// only when Decision.Proceed says so.
//
// The package depends on nothing outside the standard library and on
// nothing internal to guardian: its types mirror the wire format of
// guardian's contract.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	// DefaultTimeout is Config.Timeout when it is not set, the same in the
	// Go, Python and TypeScript clients. guardian answers in about a
	// millisecond and waits at most its --store-timeout (5ms) on Redis
	// before its fallback decides; 100ms leaves room for a network hop, a
	// garbage-collection pause and the retry of a refused connection on a
	// busy host, and is about what hashing one password costs (bcrypt at
	// cost 10, Argon2id at OWASP's parameters): a guardian that hangs delays
	// a login by no more than verifying it does.
	DefaultTimeout = 100 * time.Millisecond
	// DefaultFirstCallTimeout is Config.FirstCallTimeout when it is not
	// set, the same in every client. A process's first call pays what no
	// later one does (a TCP and TLS handshake, guardian's first request on
	// that connection; in Node, loading fetch itself, measured at 100 to
	// 800ms on a busy host), and under FailClosed a first call that timed
	// out is a real user refused after every restart.
	DefaultFirstCallTimeout = time.Second
	// DefaultClosedRetryAfter is Config.ClosedRetryAfter when it is not set:
	// the wait guardian itself gives when its store is down and a rule
	// says closed.
	DefaultClosedRetryAfter = time.Second
	// proxyRetryAfter is the wait of a 429 that carries no decision and no
	// usable Retry-After.
	proxyRetryAfter = time.Second
	// maxAnswer is the most of an answer the client reads; guardian's are
	// far smaller.
	maxAnswer = 1 << 20
)

// Config configures a Client.
type Config struct {
	// BaseURL is guardian's address, "https://guardian.internal:8080".
	// Required.
	BaseURL string
	// Tokens gives the service token: scope check for Check and Report,
	// admin for AccountStatus and ResetAccount. Required.
	Tokens TokenSource
	// HTTPClient sends the requests. Nil means a client of the Client's
	// own, keeping connections alive and following no redirects.
	HTTPClient *http.Client
	// Timeout is the deadline of one call, its retry included; a shorter
	// deadline on the caller's context wins. Zero means DefaultTimeout.
	Timeout time.Duration
	// FirstCallTimeout is the deadline of the calls that start before the
	// client's first call has ended (a first-call allowance), when it is
	// longer than Timeout; later calls have Timeout. Zero means
	// DefaultFirstCallTimeout; a value no longer than Timeout gives no
	// allowance.
	FirstCallTimeout time.Duration
	// OnUnavailable is what Check decides when guardian does not answer.
	// Required: there is no default.
	OnUnavailable Policy
	// OnUnauthorized is what Check decides when guardian refuses the
	// service token (401, 403): FailClosed, FailOpen or Local, the
	// decision marked Unavailable with ReasonUnauthorized. Unset, Check
	// returns the refusal, an error matching ErrUnauthorized, and decides
	// nothing. Either way Hooks.Unauthorized is called.
	OnUnauthorized Policy
	// ClosedRetryAfter is the RetryAfter of FailClosed decisions. Zero
	// means DefaultClosedRetryAfter.
	ClosedRetryAfter time.Duration
	// Local configures the Local policy; the other policies ignore it.
	Local LocalLimits
	// Hooks are the client's metrics.
	Hooks Hooks
	// Now is the client's clock, for the Local policy and the times passed
	// to Hooks. Nil means time.Now.
	Now func() time.Time
}

// Client calls guardian. It is safe for concurrent use; build one with New
// and share it.
type Client struct {
	base        string
	tokens      TokenSource
	http        *http.Client
	timeout     time.Duration
	firstCall   time.Duration
	policy      Policy
	unauthPol   Policy
	closedRetry time.Duration
	local       *limiter
	hooks       Hooks
	now         func() time.Time

	checks, unavailable, failedOpen atomic.Uint64
	// warm is set once a call has ended: from then on calls have timeout.
	warm atomic.Bool
}

// New returns a Client for cfg, or an error matching ErrNoPolicy when
// cfg.OnUnavailable is unset and ErrConfig when another field is unusable.
func New(cfg Config) (*Client, error) {
	if !cfg.OnUnavailable.valid() {
		return nil, ErrNoPolicy
	}
	if cfg.OnUnauthorized != 0 && !cfg.OnUnauthorized.valid() {
		return nil, fmt.Errorf("%w: OnUnauthorized must be unset, FailClosed, FailOpen or Local", ErrConfig)
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: BaseURL %q is not an http or https URL", ErrConfig, cfg.BaseURL)
	}
	if cfg.Tokens == nil {
		return nil, fmt.Errorf("%w: Tokens is required", ErrConfig)
	}
	if cfg.Timeout < 0 || cfg.FirstCallTimeout < 0 || cfg.ClosedRetryAfter < 0 {
		return nil, fmt.Errorf("%w: Timeout, FirstCallTimeout and ClosedRetryAfter must not be negative", ErrConfig)
	}
	local := cfg.Local.withDefaults()
	if !local.valid() {
		return nil, fmt.Errorf("%w: Local limits must be positive", ErrConfig)
	}
	c := &Client{
		base:        u.Scheme + "://" + u.Host + trimSlash(u.Path),
		tokens:      cfg.Tokens,
		http:        cfg.HTTPClient,
		timeout:     cfg.Timeout,
		firstCall:   cfg.FirstCallTimeout,
		policy:      cfg.OnUnavailable,
		unauthPol:   cfg.OnUnauthorized,
		closedRetry: cfg.ClosedRetryAfter,
		hooks:       cfg.Hooks,
		now:         cfg.Now,
	}
	if c.http == nil {
		c.http = defaultHTTPClient()
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.firstCall == 0 {
		c.firstCall = DefaultFirstCallTimeout
	}
	c.firstCall = max(c.firstCall, c.timeout)
	if c.closedRetry == 0 {
		c.closedRetry = DefaultClosedRetryAfter
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.policy == Local || c.unauthPol == Local {
		c.local = newLimiter(local)
	}
	return c, nil
}

func trimSlash(p string) string {
	for len(p) > 0 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}

// defaultHTTPClient keeps connections to guardian alive (a new TLS handshake
// per check would cost more than the check) and follows no redirect, which
// would turn a POST into a GET.
func defaultHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 5 * time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Stats returns the client's counts since New.
func (c *Client) Stats() Stats {
	return Stats{Checks: c.checks.Load(), Unavailable: c.unavailable.Load(), FailedOpen: c.failedOpen.Load()}
}

// Check asks guardian whether an attempt may go ahead, before the auth
// service verifies a credential or sends a code.
//
// When guardian does not answer (no answer within the deadline, a failed
// connection, a 5xx, an answer that is not what the contract says), Check
// returns the decision of Config.OnUnavailable, with Unavailable set, and no
// error. A check that failed before it reached guardian (a refused
// connection) is sent once more within the deadline: it spent nothing.
//
// A 429 is a decision: slow or block as guardian gave it, or, when it
// carries no decision (a proxy in front of guardian), slow for as long as
// its Retry-After says.
//
// Check returns an error only for a request guardian refused (a *Error: a
// bad field; a refused token, matching ErrUnauthorized, unless
// Config.OnUnauthorized decides instead), a TokenSource that failed, or a
// caller's context that was cancelled. Then nothing was decided: verify
// nothing. A token refused with 401 is asked of the TokenSource again
// (FileToken re-reads its file) and the check resent once with a fresh
// one.
func (c *Client) Check(ctx context.Context, req CheckRequest) (Decision, error) {
	start := c.now()
	d, err := c.check(ctx, req)
	if err != nil {
		return Decision{}, err
	}
	now := c.now()
	if d.Unavailable {
		d = c.decideUnavailable(d.Reason, req, now)
	}
	d.ChallengePassed = req.ChallengePassed
	c.checks.Add(1)
	if d.Unavailable {
		c.unavailable.Add(1)
		if d.Action == Allow {
			c.failedOpen.Add(1)
		}
	}
	if c.hooks.Checked != nil {
		c.hooks.Checked(d, now.Sub(start))
	}
	return d, nil
}

// check returns guardian's decision, or a Decision with only Unavailable
// and Reason set when guardian did not answer.
func (c *Client) check(ctx context.Context, req CheckRequest) (Decision, error) {
	body, err := json.Marshal(wireCheck{
		Flow: string(req.Flow), Account: req.Account, IP: req.IP, Recipient: req.Recipient,
		DeviceToken: req.DeviceToken, SecretFingerprint: req.SecretFingerprint, Cost: req.Cost, ChallengePassed: req.ChallengePassed,
		PasswordSHA1: req.PasswordSHA1,
	})
	if err != nil {
		return Decision{}, fmt.Errorf("client: check: %w", err)
	}
	a, err := c.call(ctx, CallCheck, http.MethodPost, "/v1/check", body)
	if err == nil {
		return c.decision(a)
	}
	var ue *UnavailableError
	if errors.As(err, &ue) {
		return Decision{Unavailable: true, Reason: ue.Reason}, nil
	}
	return Decision{}, err
}

// decideUnavailable is the policy's decision for req at now:
// OnUnauthorized's for a refused token, OnUnavailable's otherwise.
func (c *Client) decideUnavailable(r Reason, req CheckRequest, now time.Time) Decision {
	d := Decision{Unavailable: true, Reason: r}
	policy := c.policy
	if r == ReasonUnauthorized {
		policy = c.unauthPol
	}
	switch policy {
	case FailClosed:
		d.Action, d.RetryAfter = Slow, c.closedRetry
	case FailOpen:
		d.Action = Allow
	case Local:
		c.local.decide(&d, req, now)
	}
	return d
}

// decision reads guardian's answer to a check.
func (c *Client) decision(a answer) (Decision, error) {
	switch {
	case a.status == http.StatusOK || a.status == http.StatusTooManyRequests:
		d, ok := parseDecision(a, c.now())
		if ok {
			return d, nil
		}
		if a.status == http.StatusTooManyRequests {
			// Not guardian's answer but a proxy's: honour its wait.
			wait, ok := retryAfter(a.header, c.now())
			if !ok {
				wait = proxyRetryAfter
			}
			return Decision{Action: Slow, RetryAfter: wait}, nil
		}
		return c.unavailableDecision(CallCheck, ReasonMalformed), nil
	case a.status >= 500:
		return c.unavailableDecision(CallCheck, ReasonServerError), nil
	case a.status >= 400:
		err := refused(a)
		if errors.Is(err, ErrUnauthorized) && c.unauthPol.valid() {
			return Decision{Unavailable: true, Reason: ReasonUnauthorized}, nil
		}
		return Decision{}, err
	}
	return c.unavailableDecision(CallCheck, ReasonMalformed), nil
}

func (c *Client) unavailableDecision(call Call, r Reason) Decision {
	c.noteUnavailable(call, r)
	return Decision{Unavailable: true, Reason: r}
}

// parseDecision reads a check answer's body and headers; false when the
// body is not a decision that fits the status.
func parseDecision(a answer, now time.Time) (Decision, bool) {
	var w wireDecision
	if err := json.Unmarshal(a.body, &w); err != nil || w.Decision == nil {
		return Decision{}, false
	}
	d := Decision{
		Action:          Action(*w.Decision),
		Rule:            w.Rule,
		RetryAfter:      time.Duration(w.RetryAfterMS) * time.Millisecond,
		AttemptID:       w.AttemptID,
		Degraded:        w.Degraded,
		RepeatGuess:     w.RepeatGuess,
		RepeatCapped:    w.RepeatCapped,
		Trust:           w.Trust,
		Limits:          limits(w.Limits),
		Shadow:          make([]ShadowResult, len(w.Shadow)),
		RateLimitPolicy: a.header.Get("RateLimit-Policy"),
		RateLimit:       a.header.Get("RateLimit"),
		Breached:        w.Breached,
	}
	if !d.Action.valid() || d.Action.answeredOK() != (a.status == http.StatusOK) || w.RetryAfterMS < 0 {
		return Decision{}, false
	}
	for i, s := range w.Shadow {
		d.Shadow[i] = ShadowResult{Rule: s.Rule, Action: Action(s.Decision), RetryAfter: time.Duration(s.RetryAfterMS) * time.Millisecond}
	}
	if d.Action == Slow && d.RetryAfter == 0 {
		d.RetryAfter, _ = retryAfter(a.header, now)
	}
	return d, true
}

func limits(ws []wireLimit) []Limit {
	out := make([]Limit, len(ws))
	for i, l := range ws {
		out[i] = Limit{Rule: l.Rule, Remaining: l.Remaining, Reset: time.Duration(l.ResetMS) * time.Millisecond}
	}
	return out
}

// retryAfter reads a Retry-After header, in seconds or as an HTTP date
// relative to now; false when there is none or it does not parse.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 || s > int64(24*time.Hour/time.Second) {
			return 0, false
		}
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil && !now.IsZero() {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// Report tells guardian how the attempt behind attemptID went, after the
// credential was verified. On a success with an account, the result carries
// a device token to keep on the device.
//
// An empty attemptID (a decision guardian did not make, such as FailOpen's)
// is nothing to report: Report returns at once. A Local policy's attempt id
// is settled in process: a success gives back what it reserved.
//
// guardian accepts each attempt id once, so a report is never sent twice
// after it may have reached guardian; it is sent a second time only when the
// first failed before it reached guardian. If guardian answers that second
// send with already_reported, the report counts as made (the first landed
// after all) and Report returns no error, but no device token.
//
// When guardian does not answer, the error matches ErrUnavailable; guardian
// then counts the attempt as a failure, which is the safe side.
func (c *Client) Report(ctx context.Context, attemptID string, o Outcome) (ReportResult, error) {
	if attemptID == "" {
		return ReportResult{}, nil
	}
	start := c.now()
	res, err := c.report(ctx, attemptID, o)
	if c.hooks.Reported != nil {
		c.hooks.Reported(o, err, c.now().Sub(start))
	}
	return res, err
}

func (c *Client) report(ctx context.Context, attemptID string, o Outcome) (ReportResult, error) {
	if c.local != nil && strings.HasPrefix(attemptID, localPrefix) {
		c.local.settle(attemptID, o, c.now())
		return ReportResult{}, nil
	}
	body, err := json.Marshal(wireReport{AttemptID: attemptID, Outcome: string(o)})
	if err != nil {
		return ReportResult{}, fmt.Errorf("client: report: %w", err)
	}
	a, err := c.call(ctx, CallReport, http.MethodPost, "/v1/report", body)
	if err != nil {
		return ReportResult{}, err
	}
	switch {
	case a.status == http.StatusOK:
		var w wireReportResult
		if err := json.Unmarshal(a.body, &w); err != nil || !w.Recorded {
			return ReportResult{}, c.unavailableErr(CallReport, ReasonMalformed, errors.New("report answer is not {\"recorded\": true}"))
		}
		return ReportResult{DeviceToken: w.DeviceToken}, nil
	case a.status == http.StatusConflict && a.retried:
		if err := refused(a); errors.Is(err, ErrAlreadyReported) {
			return ReportResult{}, nil
		}
	}
	return ReportResult{}, c.answerErr(CallReport, a)
}

// AccountStatus returns where account stands in guardian. It needs a token
// of scope admin.
func (c *Client) AccountStatus(ctx context.Context, account string) (AccountStatus, error) {
	a, err := c.call(ctx, CallStatus, http.MethodGet, "/v1/accounts/status?account="+url.QueryEscape(account), nil)
	if err != nil {
		return AccountStatus{}, err
	}
	if a.status != http.StatusOK {
		return AccountStatus{}, c.answerErr(CallStatus, a)
	}
	var w wireStatus
	if err := json.Unmarshal(a.body, &w); err != nil {
		return AccountStatus{}, c.unavailableErr(CallStatus, ReasonMalformed, err)
	}
	return AccountStatus{
		ConsecutiveFailures: w.ConsecutiveFailures,
		Blocked:             w.Blocked,
		NextAllowed:         time.Duration(w.NextAllowedMS) * time.Millisecond,
		Limits:              limits(w.Limits),
		RememberedGuesses:   w.RememberedGuesses,
		Networks:            networks(w.Networks),
	}, nil
}

// networks converts a status's familiar networks; none is nil (a server
// of before familiar networks sends none).
func networks(ws []wireNetwork) []NetworkStatus {
	if len(ws) == 0 {
		return nil
	}
	out := make([]NetworkStatus, len(ws))
	for i, n := range ws {
		out[i] = NetworkStatus(n)
	}
	return out
}

// ResetAccount lifts account's hard stop and clears its counters in
// guardian. Call it only after the account's owner proved who they are
// through a verified channel (a link sent to the account's e-mail, say). It
// needs a token of scope admin.
func (c *Client) ResetAccount(ctx context.Context, account string) error {
	body, err := json.Marshal(wireReset{Account: account})
	if err != nil {
		return fmt.Errorf("client: reset: %w", err)
	}
	a, err := c.call(ctx, CallReset, http.MethodPost, "/v1/accounts/reset", body)
	if err != nil {
		return err
	}
	if a.status != http.StatusOK {
		return c.answerErr(CallReset, a)
	}
	return nil
}

// answerErr is the error for an answer that is not a success: *Error for a
// 4xx, an unavailable error otherwise.
func (c *Client) answerErr(call Call, a answer) error {
	switch {
	case a.status == http.StatusTooManyRequests:
		return c.unavailableErr(call, ReasonThrottled, fmt.Errorf("status %d", a.status))
	case a.status >= 500:
		return c.unavailableErr(call, ReasonServerError, fmt.Errorf("status %d", a.status))
	case a.status >= 400:
		return refused(a)
	}
	return c.unavailableErr(call, ReasonMalformed, fmt.Errorf("unexpected status %d", a.status))
}

// refused is the *Error for a 4xx answer.
func refused(a answer) error {
	e := &Error{Status: a.status}
	var w wireError
	if json.Unmarshal(a.body, &w) == nil && w.Error != nil {
		e.Code, e.Message = w.Error.Code, w.Error.Message
	}
	return e
}

func (c *Client) noteUnavailable(call Call, r Reason) {
	if c.hooks.Unavailable != nil {
		c.hooks.Unavailable(call, r)
	}
}

func (c *Client) unavailableErr(call Call, r Reason, err error) error {
	c.noteUnavailable(call, r)
	return &UnavailableError{Reason: r, Err: err}
}

// answer is one HTTP answer from guardian.
type answer struct {
	status int
	header http.Header
	body   []byte
	// retried reports that the answer is to the second send.
	retried bool
}

// call sends one request and returns guardian's answer, whatever its status.
// The call has the client's deadline (the first-call allowance while no call
// has ended). A send that failed before anything reached guardian is
// repeated once, if the deadline allows. A failed call is an
// *UnavailableError, except when the caller's context was cancelled or the
// TokenSource failed.
func (c *Client) call(parent context.Context, call Call, method, path string, body []byte) (answer, error) {
	tok, err := c.tokens.Token(parent)
	if err != nil {
		return answer{}, fmt.Errorf("client: %s: token: %w", call, err)
	}
	timeout := c.timeout
	if !c.warm.Load() {
		timeout = c.firstCall
	}
	defer c.warm.Store(true)
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	renewed := false
	for try := 0; ; try++ {
		a, reached, err := c.send(ctx, method, path, tok, body)
		if err == nil && c.refused(call, a.status) && try == 0 {
			// A refused token spent nothing: resend once if the source
			// has another.
			if fresh, ok := c.freshToken(parent, tok); ok {
				tok, renewed = fresh, true
				continue
			}
		}
		if err == nil {
			a.retried = try > 0 && !renewed
			return a, nil
		}
		if errors.Is(parent.Err(), context.Canceled) {
			return answer{}, fmt.Errorf("client: %s: %w", call, parent.Err())
		}
		if try == 0 && !reached && ctx.Err() == nil {
			if c.hooks.Retried != nil {
				c.hooks.Retried(call)
			}
			continue
		}
		reason := ReasonConnection
		var ne net.Error
		if ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
			reason = ReasonTimeout
		}
		return answer{}, c.unavailableErr(call, reason, err)
	}
}

// refused reports whether status is guardian refusing the token, and
// tells Hooks.Unauthorized.
func (c *Client) refused(call Call, status int) bool {
	if status != http.StatusUnauthorized && status != http.StatusForbidden {
		return false
	}
	if c.hooks.Unauthorized != nil {
		c.hooks.Unauthorized(call, status)
	}
	return status == http.StatusUnauthorized
}

// freshToken asks a TokenSource that can be told (FileToken) for a token
// other than the refused old one.
func (c *Client) freshToken(ctx context.Context, old string) (string, bool) {
	inv, ok := c.tokens.(invalidator)
	if !ok {
		return "", false
	}
	inv.Invalidate()
	tok, err := c.tokens.Token(ctx)
	return tok, err == nil && tok != old
}

// send makes one HTTP request. reached reports whether any of it may have
// reached guardian: a connection was made, or the transport began reading
// the body.
func (c *Client) send(ctx context.Context, method, path, tok string, body []byte) (a answer, reached bool, err error) {
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { sent.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), method, c.base+path, nil)
	if err != nil {
		return answer{}, false, err
	}
	if body != nil {
		req.ContentLength = int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(&watchedReader{r: bytes.NewReader(body), read: &sent}), nil
		}
		req.Body, _ = req.GetBody()
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := c.http.Do(req)
	if err != nil {
		return answer{}, sent.Load(), err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	if err != nil {
		return answer{}, true, err
	}
	return answer{status: res.StatusCode, header: res.Header, body: b}, true, nil
}

// watchedReader notes in read that a request body began to be read.
type watchedReader struct {
	r    io.Reader
	read *atomic.Bool
}

func (w *watchedReader) Read(p []byte) (int, error) {
	w.read.Store(true)
	return w.r.Read(p)
}

// The wire format of guardian's contract, section 2.
type (
	wireCheck struct {
		Flow        string `json:"flow"`
		Account     string `json:"account,omitempty"`
		IP          string `json:"ip"`
		Recipient   string `json:"recipient,omitempty"`
		DeviceToken string `json:"device_token,omitempty"`
		Cost        int    `json:"cost,omitempty"`

		SecretFingerprint string `json:"secret_fingerprint,omitempty"`
		// ChallengePassed is only sent when true.
		ChallengePassed bool   `json:"challenge_passed,omitempty"`
		PasswordSHA1    string `json:"password_sha1,omitempty"`
	}
	wireDecision struct {
		Decision     *string      `json:"decision"`
		Rule         string       `json:"rule"`
		RetryAfterMS int64        `json:"retry_after_ms"`
		AttemptID    string       `json:"attempt_id"`
		Degraded     bool         `json:"degraded"`
		RepeatGuess  bool         `json:"repeat_guess"`
		RepeatCapped bool         `json:"repeat_capped"`
		Trust        string       `json:"trust"`
		Limits       []wireLimit  `json:"limits"`
		Shadow       []wireShadow `json:"shadow"`
		Breached     *bool        `json:"breached"`
	}
	wireLimit struct {
		Rule      string `json:"rule"`
		Remaining int64  `json:"remaining"`
		ResetMS   int64  `json:"reset_ms"`
	}
	wireShadow struct {
		Rule         string `json:"rule"`
		Decision     string `json:"decision"`
		RetryAfterMS int64  `json:"retry_after_ms"`
	}
	wireReport struct {
		AttemptID string `json:"attempt_id"`
		Outcome   string `json:"outcome"`
	}
	wireReportResult struct {
		Recorded    bool   `json:"recorded"`
		DeviceToken string `json:"device_token"`
	}
	wireStatus struct {
		ConsecutiveFailures int64         `json:"consecutive_failures"`
		Blocked             bool          `json:"blocked"`
		NextAllowedMS       int64         `json:"next_allowed_ms"`
		Limits              []wireLimit   `json:"limits"`
		RememberedGuesses   int64         `json:"remembered_guesses"`
		Networks            []wireNetwork `json:"networks"`
	}
	wireNetwork struct {
		Network             string `json:"network"`
		ConsecutiveFailures int64  `json:"consecutive_failures"`
		Blocked             bool   `json:"blocked"`
	}
	wireReset struct {
		Account string `json:"account"`
	}
	wireError struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
)
