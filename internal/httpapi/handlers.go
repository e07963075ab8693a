package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/audit"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/shadow"
)

// checkRequest is the body of /v1/check; a nil field was absent (or null).
type checkRequest struct {
	Flow        *string `json:"flow"`
	Account     *string `json:"account"`
	IP          *string `json:"ip"`
	Recipient   *string `json:"recipient"`
	DeviceToken *string `json:"device_token"`
	Cost        *int64  `json:"cost"`
	// ChallengePassed is a boolean, so a body with it is always decoded by
	// encoding/json (parseFlat takes strings and integers only).
	ChallengePassed *bool `json:"challenge_passed"`

	SecretFingerprint *string `json:"secret_fingerprint"`
	// PasswordSHA1 is looked up in the breached-password filter and never
	// reaches the engine (passwords.go).
	PasswordSHA1 *string `json:"password_sha1"`

	// slots and cost hold what the fields point at when parseFlat read the
	// body.
	slots [7]string
	cost  int64
}

type limitJSON struct {
	Rule      string `json:"rule"`
	Remaining int64  `json:"remaining"`
	ResetMS   int64  `json:"reset_ms"`
}

// millis is d in whole milliseconds, rounded up.
func millis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// seconds is d in whole seconds, rounded up.
func seconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}

func limitsJSON(ls []engine.Limit) []limitJSON {
	out := make([]limitJSON, len(ls))
	for i, l := range ls {
		out[i] = limitJSON{Rule: l.Rule, Remaining: l.Remaining, ResetMS: millis(l.Reset)}
	}
	return out
}

func (a *API) check(c *gin.Context) {
	var body checkRequest
	req, err := checkFromBody(c, &body)
	if err != nil {
		a.abort(c, err)
		return
	}
	br, err := a.breachedOf(body.PasswordSHA1)
	if err != nil {
		a.abort(c, err)
		return
	}
	d, err := a.cfg.Engine.Check(c.Request.Context(), req)
	if err != nil {
		a.abort(c, err)
		return
	}
	status := http.StatusOK
	if d.Action == rules.Slow || d.Action == rules.Block {
		status = http.StatusTooManyRequests
	}
	a.decided(c, string(d.Action), d.Rule, d.Degraded)
	SetCheckHeaders(c.Writer.Header(), &d)
	writeAnswer(c, status, func(b []byte) []byte { return appendBreached(appendCheck(b, &d), br) })
}

// The headers of a check answer, in the canonical form net/http keeps them
// in, so that setting them costs no canonicalisation.
const (
	hdrPolicy     = "Ratelimit-Policy"
	hdrRateLimit  = "Ratelimit"
	hdrRetryAfter = "Retry-After"
)

// SetCheckHeaders sets the rate-limit headers of the most constraining rate
// rule, when one applied, and Retry-After on slow. The values share one
// string and one slice, so the headers cost two allocations.
func SetCheckHeaders(h http.Header, d *engine.Decision) {
	q, slow := d.Quota, d.Action == rules.Slow
	if q == nil && !slow {
		return
	}
	var buf [160]byte
	b := buf[:0]
	var ends [3]int
	if q != nil {
		// "<rule>";q=<burst>;w=<window s>, then "<rule>";r=<remaining>;t=<reset s>
		b = strconv.AppendQuote(b, q.Rule)
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, q.Burst, 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, seconds(q.Window), 10)
		ends[0] = len(b)
		b = strconv.AppendQuote(b, q.Rule)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, q.Remaining, 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, seconds(q.Reset), 10)
		ends[1] = len(b)
	}
	if slow {
		b = strconv.AppendInt(b, seconds(d.RetryAfter), 10)
	}
	ends[2] = len(b)
	s := string(b)
	vals := make([]string, 3)
	if q != nil {
		vals[0], vals[1] = s[:ends[0]], s[ends[0]:ends[1]]
		h[hdrPolicy], h[hdrRateLimit] = vals[0:1:1], vals[1:2:2]
	}
	if slow {
		vals[2] = s[ends[1]:ends[2]]
		h[hdrRetryAfter] = vals[2:3:3]
	}
}

// checkFromBody decodes a check request into body and checks its shape:
// required fields, the flow first (rules.CheckFlow) and a given cost
// (rules.CheckCost). The engine normalises what it holds, once, and refuses
// what it would not decide with errors errorFor maps to 400.
func checkFromBody(c *gin.Context, body *checkRequest) (engine.CheckRequest, error) {
	if err := decode(c, body); err != nil {
		return engine.CheckRequest{}, err
	}
	var req engine.CheckRequest
	flow, err := required(body.Flow, "flow")
	if err != nil {
		return req, err
	}
	req.Flow = rules.Flow(flow)
	if err := rules.CheckFlow(req.Flow); err != nil {
		return req, err
	}
	if req.IP, err = required(body.IP, "ip"); err != nil {
		return req, err
	}
	if req.Account, err = optional(body.Account, "account"); err != nil {
		return req, err
	}
	if req.Recipient, err = optional(body.Recipient, "recipient"); err != nil {
		return req, err
	}
	if body.DeviceToken != nil {
		req.DeviceToken = *body.DeviceToken
	}
	if req.SecretFingerprint, err = optional(body.SecretFingerprint, "secret_fingerprint"); err != nil {
		return req, err
	}
	if body.ChallengePassed != nil {
		req.ChallengePassed = *body.ChallengePassed
	}
	if body.Cost != nil {
		// Only an absent cost is the default: a cost given is 1 to
		// MaxCost, 0 included.
		if err := rules.CheckCost(*body.Cost); err != nil {
			return req, err
		}
		req.Cost = *body.Cost
	}
	return req, nil
}

// reportRequest is the body of /v1/report.
type reportRequest struct {
	AttemptID *string `json:"attempt_id"`
	Outcome   *string `json:"outcome"`

	slots [2]string // what the fields point at when parseFlat read the body
}

func (a *API) report(c *gin.Context) {
	var body reportRequest
	if err := decode(c, &body); err != nil {
		a.abort(c, err)
		return
	}
	id, err := required(body.AttemptID, "attempt_id")
	if err != nil {
		a.abort(c, err)
		return
	}
	outcome, err := required(body.Outcome, "outcome")
	if err != nil {
		a.abort(c, err)
		return
	}
	o := engine.Outcome(outcome)
	if o != engine.Success && o != engine.Failure {
		a.abort(c, newError(http.StatusBadRequest, "invalid_field", "outcome: must be success or failure"))
		return
	}
	res, err := a.cfg.Engine.Report(c.Request.Context(), id, o)
	if err != nil {
		a.abort(c, err)
		return
	}
	writeAnswer(c, http.StatusOK, func(b []byte) []byte { return appendReport(b, &res) })
}

type rulesResponse struct {
	Source   string       `json:"source"`
	LoadedAt time.Time    `json:"loaded_at"`
	Hash     string       `json:"hash"`
	Rules    []rules.Rule `json:"rules"`
	// Familiar is the file's familiar_networks, absent when it has none.
	Familiar *familiarJSON `json:"familiar_networks,omitempty"`
	// Breached is the breached-password filter in use, absent when none is.
	Breached *breachedJSON `json:"breached,omitempty"`
}

// familiarJSON is familiar_networks as the rules file writes it.
type familiarJSON struct {
	IPv4Prefix int    `json:"ipv4_prefix"`
	IPv6Prefix int    `json:"ipv6_prefix"`
	Hold       string `json:"hold"`
}

func rulesBody(s *rules.Set) rulesResponse {
	out := rulesResponse{Source: s.Source, LoadedAt: s.LoadedAt.UTC().Truncate(time.Second), Hash: s.Hash(), Rules: s.Rules}
	if f := s.Familiar; f.On() {
		out.Familiar = &familiarJSON{IPv4Prefix: f.IPv4Prefix, IPv6Prefix: f.IPv6Prefix, Hold: rules.FormatDuration(f.Hold)}
	}
	return out
}

func (a *API) getRules(c *gin.Context) {
	body := rulesBody(a.cfg.Engine.Rules())
	body.Breached = a.breachedBody()
	c.JSON(http.StatusOK, body)
}

func (a *API) reloadRules(c *gin.Context) {
	// What the reload changed, from the rules in force when the call came:
	// a reload by signal landing in between shows in this line too.
	before := a.cfg.Engine.Rules()
	set, err := a.cfg.Reload(c.Request.Context(), subject(c))
	var changes *rules.Changes
	if err == nil {
		ch := rules.Diff(before, set)
		changes = &ch
	}
	a.cfg.Audit.Reload(c.Request.Context(), subject(c), result(err), changes)
	if err != nil {
		a.abort(c, err)
		return
	}
	body := rulesBody(set)
	body.Breached = a.breachedBody()
	c.JSON(http.StatusOK, body)
}

// result is the audit result of an admin call that ended with err.
func result(err error) string {
	if err != nil {
		return audit.ResultError
	}
	return audit.ResultOK
}

// shadowResponse is the body of GET /v1/shadow.
type shadowResponse struct {
	Rules   []shadow.RuleReport `json:"rules"`
	Partial bool                `json:"partial,omitempty"`
}

func (a *API) getShadow(c *gin.Context) {
	rep, partial := a.cfg.Shadow.Report(c.Request.Context())
	if rep == nil {
		rep = []shadow.RuleReport{}
	}
	c.JSON(http.StatusOK, shadowResponse{Rules: rep, Partial: partial})
}

func (a *API) getFleet(c *gin.Context) {
	c.JSON(http.StatusOK, a.cfg.Fleet.View(c.Request.Context()))
}

func (a *API) getProxies(c *gin.Context) {
	if a.cfg.Proxies == nil {
		c.JSON(http.StatusOK, gin.H{"proxies": []any{}})
		return
	}
	c.JSON(http.StatusOK, a.cfg.Proxies())
}

func (a *API) accountStatus(c *gin.Context) {
	account, ok := c.GetQuery("account")
	if !ok {
		a.abort(c, newError(http.StatusBadRequest, "missing_field", "account: required"))
		return
	}
	a.answerStatus(c, account)
}

// postAccountStatus is the GET's answer for the account of a body, so an
// account never lands in a URL or an access log.
func (a *API) postAccountStatus(c *gin.Context) {
	var body accountRequest
	if err := decode(c, &body); err != nil {
		a.abort(c, err)
		return
	}
	account, err := required(body.Account, "account")
	if err != nil {
		a.abort(c, err)
		return
	}
	a.answerStatus(c, account)
}

// answerStatus answers where account stands.
func (a *API) answerStatus(c *gin.Context, account string) {
	st, err := a.cfg.Engine.Status(c.Request.Context(), account)
	if err != nil {
		a.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{
		"consecutive_failures": st.ConsecutiveFailures,
		"blocked":              st.Blocked,
		"next_allowed_ms":      millis(st.NextAllowed),
		"limits":               limitsJSON(st.Limits),
		"remembered_guesses":   st.RememberedGuesses,
		"networks":             networksJSON(st.Networks),
	})
}

// networksJSON is the networks of an account's status: always an array.
func networksJSON(ns []engine.NetworkStatus) []gin.H {
	out := make([]gin.H, len(ns))
	for i, n := range ns {
		out[i] = gin.H{"network": n.Network, "consecutive_failures": n.ConsecutiveFailures, "blocked": n.Blocked}
	}
	return out
}

// accountRequest is the body of /v1/accounts/reset and of POST
// /v1/accounts/status.
type accountRequest struct {
	Account *string `json:"account"`

	slot string // what Account points at when parseFlat read the body
}

func (a *API) accountReset(c *gin.Context) {
	account, err := a.reset(c)
	a.cfg.Audit.Action(c.Request.Context(), audit.ActionReset, subject(c), result(err), account)
	if err != nil {
		a.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"reset": true})
}

// reset decodes a reset request and resets its account; it returns the
// account, or "" when the request named none.
func (a *API) reset(c *gin.Context) (string, error) {
	var body accountRequest
	if err := decode(c, &body); err != nil {
		return "", err
	}
	account, err := required(body.Account, "account")
	if err != nil {
		return "", err
	}
	if err := a.cfg.Engine.Reset(c.Request.Context(), account); err != nil {
		return account, err
	}
	if a.cfg.OnReset != nil {
		a.cfg.OnReset(c.Request.Context(), account)
	}
	return account, nil
}
