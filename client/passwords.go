package client

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// CallPasswordCheck is Client.CheckPassword, for Hooks.
const CallPasswordCheck Call = "password_check"

// ErrNoBreachedFilter matches the error of CheckPassword when guardian has
// no breached-password filter that can answer (none loaded, or one of NTLM
// hashes): nothing was looked up. It is "unknown", never "not breached".
var ErrNoBreachedFilter = errors.New("client: guardian has no breached-password filter")

// PasswordSHA1 is the SHA-1 of password in hex: what CheckPassword sends in
// place of the password, which never leaves the auth service.
func PasswordSHA1(password string) string {
	sum := sha1.Sum([]byte(password))
	return hex.EncodeToString(sum[:])
}

// CheckPassword asks guardian whether password is known to be breached, for
// password set and change flows (NIST SP 800-63B §3.1.1.2): refuse a new
// password when it answers true. The password is hashed here with SHA-1 and
// only the hex digest is sent (POST /v1/passwords/check); guardian answers
// from the filter it loaded with serve --breached, never logs, keeps or
// counts it. A password not in the list answers true 1 time in 256.
//
// The errors: one matching ErrNoBreachedFilter (and a *Error of status
// 404) when guardian has no filter that can answer; ErrUnavailable when
// guardian does not answer; ErrUnauthorized for a refused token. None is a
// "no": decide for yourself whether a change goes ahead unchecked.
func (c *Client) CheckPassword(ctx context.Context, password string) (bool, error) {
	body, err := json.Marshal(wirePasswordCheck{SHA1: PasswordSHA1(password)})
	if err != nil {
		return false, fmt.Errorf("client: password check: %w", err)
	}
	a, err := c.call(ctx, CallPasswordCheck, http.MethodPost, "/v1/passwords/check", body)
	if err != nil {
		return false, err
	}
	if a.status != http.StatusOK {
		err := c.answerErr(CallPasswordCheck, a)
		var e *Error
		if errors.As(err, &e) && e.Status == http.StatusNotFound {
			return false, fmt.Errorf("%w: %w", ErrNoBreachedFilter, err)
		}
		return false, err
	}
	var w wirePasswordAnswer
	if err := json.Unmarshal(a.body, &w); err != nil || w.Breached == nil {
		return false, c.unavailableErr(CallPasswordCheck, ReasonMalformed, errors.New(`password check answer is not {"breached": bool}`))
	}
	return *w.Breached, nil
}

type (
	wirePasswordCheck struct {
		SHA1 string `json:"sha1"`
	}
	wirePasswordAnswer struct {
		Breached *bool `json:"breached"`
	}
)
