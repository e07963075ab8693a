package client

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// HTTPStatus is the status the auth service answers its end user with for
// d: 429 for Slow, 403 for Block, 401 for a Challenge not yet passed (a
// second factor or a CAPTCHA is wanted), and 200 for a decision that goes
// ahead (Decision.Proceed), where the auth service verifies and answers
// what the verification says.
func (d Decision) HTTPStatus() int {
	if d.Proceed() {
		return http.StatusOK
	}
	switch d.Action {
	case Slow:
		return http.StatusTooManyRequests
	case Block:
		return http.StatusForbidden
	case Challenge:
		return http.StatusUnauthorized
	}
	return http.StatusOK
}

// HeaderOptions tunes WriteHeaders.
type HeaderOptions struct {
	// OmitQuota leaves out RateLimit-Policy and RateLimit. The IETF
	// ratelimit-headers draft warns that quota information tells an
	// unauthenticated client how to pace an attack to stay under a limit:
	// set it for every end user who has not yet proved who they are, which
	// is everyone at a login.
	OmitQuota bool
}

// WriteHeaders sets on w the headers the auth service sends its end user
// for d: Retry-After (whole seconds, rounded up) on Slow, and, unless
// opts.OmitQuota, RateLimit-Policy and RateLimit as guardian sent them.
// Call it before writing the status.
func WriteHeaders(w http.ResponseWriter, d Decision, opts HeaderOptions) {
	h := w.Header()
	if d.Action == Slow && d.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((d.RetryAfter+time.Second-1)/time.Second), 10))
	}
	if opts.OmitQuota {
		return
	}
	if d.RateLimitPolicy != "" {
		h.Set("RateLimit-Policy", d.RateLimitPolicy)
	}
	if d.RateLimit != "" {
		h.Set("RateLimit", d.RateLimit)
	}
}

// Body is the JSON body of every answer a Responder writes. It always has
// both fields, so that answers differ in their values only, never in their
// shape.
type Body struct {
	// Error says what happened: "invalid_credentials",
	// "too_many_attempts", "account_locked" or "second_factor_required".
	Error string `json:"error"`
	// Next says what the end user can do: "retry", "wait", "reset" or
	// "second_factor".
	Next string `json:"next"`
}

// The bodies a Responder writes.
var (
	invalidCredentials = Body{Error: "invalid_credentials", Next: "retry"}
	tooManyAttempts    = Body{Error: "too_many_attempts", Next: "wait"}
	accountLocked      = Body{Error: "account_locked", Next: "reset"}
	secondFactor       = Body{Error: "second_factor_required", Next: "second_factor"}
)

// Responder writes the auth service's answer to an end user whose attempt
// did not go through. The zero value answers each decision with its own
// status, headers and body; its fields trade that detail for saying less to
// an attacker. A Responder is a value, safe for concurrent use.
type Responder struct {
	// OmitQuota leaves out the RateLimit headers (see HeaderOptions).
	OmitQuota bool
	// SlowAsInvalid answers a slowed attempt exactly like a wrong password:
	// 401, the invalid_credentials body, no Retry-After and no RateLimit
	// headers on either, so that an attacker cannot tell a guess that was
	// never tried from one that was wrong. The auth service should then
	// also take as long over a slowed attempt as over a password check
	// (hash a dummy password): a Responder cannot do that for it.
	SlowAsInvalid bool
}

// Refuse writes the answer for d when d stops the attempt before
// verification (Slow, Block, a Challenge not yet passed) and reports whether
// it wrote anything; for a decision that lets the attempt go ahead
// (Decision.Proceed) it writes nothing and returns false.
func (r Responder) Refuse(w http.ResponseWriter, d Decision) bool {
	if d.Proceed() {
		return false
	}
	var b Body
	switch d.Action {
	case Slow:
		if r.SlowAsInvalid {
			r.InvalidCredentials(w, d)
			return true
		}
		b = tooManyAttempts
	case Block:
		b = accountLocked
	case Challenge:
		b = secondFactor
	default:
		return false
	}
	WriteHeaders(w, d, HeaderOptions{OmitQuota: r.OmitQuota || r.SlowAsInvalid})
	writeBody(w, d.HTTPStatus(), b)
	return true
}

// InvalidCredentials writes the answer for a credential that was verified
// and wrong, d being the decision that let it be verified: 401 and the
// invalid_credentials body, with the RateLimit headers unless OmitQuota or
// SlowAsInvalid.
func (r Responder) InvalidCredentials(w http.ResponseWriter, d Decision) {
	if !r.OmitQuota && !r.SlowAsInvalid {
		d.Action = Allow // never a Retry-After on this answer
		WriteHeaders(w, d, HeaderOptions{})
	}
	writeBody(w, http.StatusUnauthorized, invalidCredentials)
}

func writeBody(w http.ResponseWriter, status int, b Body) {
	out, _ := json.Marshal(b) // two strings: cannot fail
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(status)
	_, _ = w.Write(out)
}
