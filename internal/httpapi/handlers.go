package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/shadow"
)

type checkRequest struct {
	Flow        *string `json:"flow"`
	Account     *string `json:"account"`
	IP          *string `json:"ip"`
	Recipient   *string `json:"recipient"`
	DeviceToken *string `json:"device_token"`
	Cost        *int64  `json:"cost"`
}

type limitJSON struct {
	Rule      string `json:"rule"`
	Remaining int64  `json:"remaining"`
	ResetMS   int64  `json:"reset_ms"`
}

type shadowJSON struct {
	Rule         string `json:"rule"`
	Decision     string `json:"decision"`
	RetryAfterMS int64  `json:"retry_after_ms"`
}

type checkResponse struct {
	Decision     string       `json:"decision"`
	Rule         string       `json:"rule,omitempty"`
	RetryAfterMS int64        `json:"retry_after_ms"`
	AttemptID    string       `json:"attempt_id,omitempty"`
	Degraded     bool         `json:"degraded"`
	Limits       []limitJSON  `json:"limits"`
	Shadow       []shadowJSON `json:"shadow"`
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
	req, err := checkFromBody(c)
	if err != nil {
		a.abort(c, err)
		return
	}
	d, err := a.cfg.Engine.Check(c.Request.Context(), req)
	if err != nil {
		a.abort(c, err)
		return
	}
	resp := checkResponse{
		Decision:     string(d.Action),
		Rule:         d.Rule,
		RetryAfterMS: millis(d.RetryAfter),
		AttemptID:    d.AttemptID,
		Degraded:     d.Degraded,
		Limits:       limitsJSON(d.Limits),
		Shadow:       make([]shadowJSON, len(d.Shadow)),
	}
	for i, s := range d.Shadow {
		resp.Shadow[i] = shadowJSON{Rule: s.Rule, Decision: string(s.Action), RetryAfterMS: millis(s.RetryAfter)}
	}
	h := c.Writer.Header()
	if q := d.Quota; q != nil {
		name := strconv.Quote(q.Rule)
		h.Set("RateLimit-Policy", name+";q="+strconv.FormatInt(q.Burst, 10)+";w="+strconv.FormatInt(seconds(q.Window), 10))
		h.Set("RateLimit", name+";r="+strconv.FormatInt(q.Remaining, 10)+";t="+strconv.FormatInt(seconds(q.Reset), 10))
	}
	status := http.StatusOK
	switch d.Action {
	case rules.Slow:
		h.Set("Retry-After", strconv.FormatInt(seconds(d.RetryAfter), 10))
		status = http.StatusTooManyRequests
	case rules.Block:
		status = http.StatusTooManyRequests
	}
	c.JSON(status, resp)
}

// checkFromBody decodes and checks the shape of a check request; the engine
// checks the values.
func checkFromBody(c *gin.Context) (engine.CheckRequest, error) {
	var body checkRequest
	if err := decode(c, &body); err != nil {
		return engine.CheckRequest{}, err
	}
	var req engine.CheckRequest
	flow, err := required(body.Flow, "flow")
	if err != nil {
		return req, err
	}
	f, ok := rules.ParseFlow(flow)
	if !ok {
		return req, newError(http.StatusBadRequest, "unknown_flow", "flow: "+strconv.Quote(truncate(flow))+" is not one of login, password_reset, otp_send, otp_verify")
	}
	req.Flow = f
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
	if body.Cost != nil {
		if *body.Cost < 1 || *body.Cost > engine.MaxCost {
			return req, newError(http.StatusBadRequest, "invalid_field", "cost: must be between 1 and "+strconv.Itoa(engine.MaxCost))
		}
		req.Cost = *body.Cost
	}
	return req, nil
}

// truncate shortens s for an error message: a client's typo is worth
// echoing, a megabyte of it is not.
func truncate(s string) string {
	const n = 64
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

type reportRequest struct {
	AttemptID *string `json:"attempt_id"`
	Outcome   *string `json:"outcome"`
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
	resp := gin.H{"recorded": true}
	if res.DeviceToken != "" {
		resp["device_token"] = res.DeviceToken
	}
	c.JSON(http.StatusOK, resp)
}

type rulesResponse struct {
	Source   string       `json:"source"`
	LoadedAt time.Time    `json:"loaded_at"`
	Rules    []rules.Rule `json:"rules"`
}

func rulesBody(s *rules.Set) rulesResponse {
	return rulesResponse{Source: s.Source, LoadedAt: s.LoadedAt.UTC().Truncate(time.Second), Rules: s.Rules}
}

func (a *API) getRules(c *gin.Context) {
	c.JSON(http.StatusOK, rulesBody(a.cfg.Engine.Rules()))
}

func (a *API) reloadRules(c *gin.Context) {
	set, err := a.cfg.Reload()
	if err != nil {
		a.log.Warn("rules reload refused", "by", subject(c), "err", err)
		a.abort(c, err)
		return
	}
	a.log.Info("rules reloaded", "by", subject(c), "source", set.Source, "rules", len(set.Rules))
	c.JSON(http.StatusOK, rulesBody(set))
}

func (a *API) getShadow(c *gin.Context) {
	rep := a.cfg.Shadow.Report()
	if rep == nil {
		rep = []shadow.RuleReport{}
	}
	c.JSON(http.StatusOK, gin.H{"rules": rep})
}

func (a *API) accountStatus(c *gin.Context) {
	account, ok := c.GetQuery("account")
	if !ok {
		a.abort(c, newError(http.StatusBadRequest, "missing_field", "account: required"))
		return
	}
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
	})
}

type resetRequest struct {
	Account *string `json:"account"`
}

func (a *API) accountReset(c *gin.Context) {
	var body resetRequest
	if err := decode(c, &body); err != nil {
		a.abort(c, err)
		return
	}
	account, err := required(body.Account, "account")
	if err != nil {
		a.abort(c, err)
		return
	}
	if err := a.cfg.Engine.Reset(c.Request.Context(), account); err != nil {
		a.abort(c, err)
		return
	}
	a.log.Info("account reset", "by", subject(c))
	c.JSON(http.StatusOK, gin.H{"reset": true})
}
