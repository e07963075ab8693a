package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/lists"
	"github.com/guardian-sec/guardian/internal/revocation"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// apiError is an error as the contract shapes it on the wire.
type apiError struct {
	status  int
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, message string) *apiError {
	return &apiError{status: status, Code: code, Message: message}
}

// errorFor maps an error from the engine, the keys, the tokens or the rules
// to its status and code: the one place that does.
func errorFor(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, keys.ErrInvalidIP):
		return newError(http.StatusBadRequest, "invalid_ip", "ip: "+detail(err, keys.ErrInvalidIP))
	case errors.Is(err, keys.ErrInvalidRecipient):
		return newError(http.StatusBadRequest, "invalid_recipient", "recipient: "+detail(err, keys.ErrInvalidRecipient))
	case errors.Is(err, keys.ErrInvalidAccount):
		return newError(http.StatusBadRequest, "invalid_field", "account: "+detail(err, keys.ErrInvalidAccount))
	case errors.Is(err, rules.ErrUnknownFlow):
		return newError(http.StatusBadRequest, "unknown_flow", detail(err, rules.ErrUnknownFlow))
	case errors.Is(err, rules.ErrInvalidCost):
		return newError(http.StatusBadRequest, "invalid_field", detail(err, rules.ErrInvalidCost))
	case errors.Is(err, engine.ErrMissingField):
		return newError(http.StatusBadRequest, "missing_field", detail(err, engine.ErrMissingField))
	case errors.Is(err, engine.ErrInvalidField):
		return newError(http.StatusBadRequest, "invalid_field", detail(err, engine.ErrInvalidField))
	case errors.Is(err, engine.ErrOtherTenant):
		return newError(http.StatusBadRequest, "invalid_attempt", "attempt_id: issued to a check of another tenant than this token's")
	case errors.Is(err, engine.ErrAlreadyReported):
		return newError(http.StatusConflict, "already_reported", "attempt_id: already reported")
	case errors.Is(err, tokens.ErrExpiredAttempt):
		return newError(http.StatusBadRequest, "invalid_attempt", "attempt_id: expired")
	case errors.Is(err, tokens.ErrInvalidAttempt):
		return newError(http.StatusBadRequest, "invalid_attempt", "attempt_id: not an attempt id issued by guardian")
	case errors.Is(err, tokens.ErrInvalidToken):
		return newError(http.StatusUnauthorized, "unauthorized", detail(err, tokens.ErrInvalidToken))
	case errors.Is(err, store.ErrUnavailable):
		return newError(http.StatusServiceUnavailable, "store_unavailable", "the store is not answering; retry when /readyz says ok")
	case errors.Is(err, revocation.ErrFull):
		return newError(http.StatusConflict, "too_many_revocations", fmt.Sprintf("jti: %d revocations are in force; each lapses when its token expires, and rotating the signing key refuses every token at once", revocation.MaxEntries))
	case errors.Is(err, revocation.ErrNotShared):
		return newError(http.StatusServiceUnavailable, "store_unavailable", "the store did not take the revocation: this instance refuses the token now and sends it to the store until it answers, and other instances refuse it once it has; retry when /readyz says ok")
	case errors.Is(err, lists.ErrInvalid):
		return newError(http.StatusBadRequest, "invalid_field", detail(err, lists.ErrInvalid))
	case errors.Is(err, lists.ErrMissing):
		return newError(http.StatusBadRequest, "missing_field", detail(err, lists.ErrMissing))
	case errors.Is(err, lists.ErrFull):
		return newError(http.StatusConflict, "lists_full", fmt.Sprintf("%d list entries are in force; each lapses with its ttl, or DELETE /v1/lists/{id} removes one", lists.MaxEntries))
	case errors.Is(err, lists.ErrNotFound):
		return newError(http.StatusNotFound, "not_found", "id: no list entry in force has it")
	case errors.Is(err, lists.ErrShared):
		return newError(http.StatusForbidden, "forbidden", "a network entry applies to every tenant, and takes a token without a tenant")
	case errors.Is(err, lists.ErrStatic):
		return newError(http.StatusConflict, "static_entry", "id: the entry is the rules file's: remove it there and reload")
	case errors.Is(err, rules.ErrInvalid):
		return newError(http.StatusBadRequest, "invalid_rules", err.Error())
	}
	return newError(http.StatusInternalServerError, "internal", "internal error")
}

// detail is err's message without the text of the sentinel it wraps, so a
// client reads "\"300.1.1.1\" is not an IP address", not package names.
func detail(err, sentinel error) string {
	msg := err.Error()
	if i := strings.Index(msg, sentinel.Error()); i >= 0 {
		msg = msg[i+len(sentinel.Error()):]
	}
	msg = strings.TrimLeft(msg, ": ")
	if msg == "" {
		return sentinel.Error()
	}
	return msg
}

// abort writes err in the contract's shape and stops the handler chain.
func (a *API) abort(c *gin.Context, err error) {
	ae := errorFor(err)
	if errors.Is(err, store.ErrAbandoned) {
		// The caller went away before its check reached the store: no
		// one reads the answer, and nothing failed.
		c.AbortWithStatus(http.StatusServiceUnavailable)
		return
	}
	if ae.status >= http.StatusInternalServerError {
		a.log.ErrorContext(c.Request.Context(), "request failed", "path", c.FullPath(), "err", err)
	}
	body, _ := json.Marshal(struct {
		Error *apiError `json:"error"`
	}{ae})
	c.Abort()
	c.Data(ae.status, "application/json", body)
}
