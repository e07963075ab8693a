package client

import (
	"errors"
	"net/http"
	"strconv"
)

// Errors a Client returns. Test for them with errors.Is.
var (
	// ErrNoPolicy is returned by New when Config.OnUnavailable is not set:
	// what to do when guardian does not answer has no default.
	ErrNoPolicy = errors.New("client: Config.OnUnavailable must be FailClosed, FailOpen or Local")
	// ErrConfig is returned by New for any other unusable Config.
	ErrConfig = errors.New("client: invalid config")
	// ErrUnavailable matches every *UnavailableError: guardian did not
	// answer. Check never returns it (its Policy decides instead); Report,
	// AccountStatus and ResetAccount do.
	ErrUnavailable = errors.New("client: guardian unavailable")
	// ErrAlreadyReported matches the *Error guardian answers for a second
	// report of one attempt id.
	ErrAlreadyReported = errors.New("client: attempt already reported")
	// ErrInvalidAttempt matches the *Error guardian answers for a forged or
	// expired attempt id (they expire after 10 minutes).
	ErrInvalidAttempt = errors.New("client: invalid attempt id")
	// ErrUnauthorized matches the *Error of a 401 or a 403: guardian
	// refused the service token (expired, signed with a key guardian no
	// longer has, or of the wrong scope). Nothing was decided. Check
	// returns it unless Config.OnUnauthorized says what to decide instead;
	// Hooks.Unauthorized sees every one.
	ErrUnauthorized = errors.New("client: service token refused")
)

// Error is a request guardian refused: a 4xx other than 429, which is a bug
// or a misconfiguration on the caller's side (a bad field, a wrong token, a
// wrong URL). It is never turned into a decision.
type Error struct {
	// Status is the HTTP status guardian answered.
	Status int
	// Code is the contract's error code ("invalid_ip", "unauthorized", …);
	// empty when the answer was not in guardian's error shape (a proxy's
	// page, say).
	Code string
	// Message is guardian's explanation.
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	code := e.Code
	if code == "" {
		code = "status " + strconv.Itoa(e.Status)
	}
	if e.Message == "" {
		return "client: guardian refused the request: " + code
	}
	return "client: guardian refused the request: " + code + ": " + e.Message
}

// Is lets errors.Is match ErrAlreadyReported and ErrInvalidAttempt by code,
// and ErrUnauthorized by status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
	case ErrAlreadyReported:
		return e.Code == "already_reported"
	case ErrInvalidAttempt:
		return e.Code == "invalid_attempt"
	}
	return false
}

// Reason is why guardian did not answer a call. The values are few and
// fixed, fit to be a metric label.
type Reason string

// The reasons.
const (
	// ReasonTimeout: no answer within the call's deadline.
	ReasonTimeout Reason = "timeout"
	// ReasonConnection: the connection failed (refused, reset, DNS).
	ReasonConnection Reason = "connection"
	// ReasonServerError: guardian or a proxy in front of it answered 5xx.
	ReasonServerError Reason = "server_error"
	// ReasonMalformed: an answer that is not what the contract says.
	ReasonMalformed Reason = "malformed"
	// ReasonThrottled: a 429 on a call that has no decision to give
	// (report, admin calls), from guardian or a proxy in front of it.
	ReasonThrottled Reason = "throttled"
	// ReasonUnauthorized: guardian refused the service token (401, 403)
	// and Config.OnUnauthorized decided.
	ReasonUnauthorized Reason = "unauthorized"
)

// UnavailableError is a call guardian did not answer. It matches
// ErrUnavailable.
type UnavailableError struct {
	// Reason is why.
	Reason Reason
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *UnavailableError) Error() string {
	return "client: guardian unavailable (" + string(e.Reason) + "): " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Is lets errors.Is match ErrUnavailable.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }
