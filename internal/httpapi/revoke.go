package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/tokens"
)

// revokeRequest is the body of /v1/tokens/revoke.
type revokeRequest struct {
	JTI *string `json:"jti"`
	// ExpiresAt is the token's expiry, RFC 3339, when the caller knows it;
	// the revocation is kept until then rather than for tokens.MaxTTL.
	ExpiresAt *string `json:"expires_at"`
}

// maxJTILen bounds a jti; guardian's own are 22 characters.
const maxJTILen = 128

func (a *API) revokeToken(c *gin.Context) {
	jti, until, err := a.revoke(c)
	a.cfg.Audit.Revoke(c.Request.Context(), subject(c), result(err), jti)
	if err != nil {
		a.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"revoked": true, "jti": jti, "until": until.UTC().Format(time.RFC3339)})
}

// revoke decodes a revocation and makes it; it returns the jti, when the
// body named a valid one, and until when the token is refused.
func (a *API) revoke(c *gin.Context) (string, time.Time, error) {
	var body revokeRequest
	if err := decode(c, &body); err != nil {
		return "", time.Time{}, err
	}
	jti, err := required(body.JTI, "jti")
	if err != nil {
		return "", time.Time{}, err
	}
	if !validJTI(jti) {
		return "", time.Time{}, newError(http.StatusBadRequest, "invalid_field", "jti: must be 1 to 128 characters of A-Z, a-z, 0-9, - and _ (guardian token --print-jti prints it)")
	}
	now := a.now()
	// No token that carries a jti lives longer than tokens.MaxTTL, so
	// that far from now outlives it whenever it was issued.
	until := now.Add(tokens.MaxTTL)
	if body.ExpiresAt != nil {
		exp, err := time.Parse(time.RFC3339, *body.ExpiresAt)
		switch {
		case err != nil:
			return jti, time.Time{}, newError(http.StatusBadRequest, "invalid_field", "expires_at: "+strconv.Quote(*body.ExpiresAt)+" is not an RFC 3339 time")
		case !exp.After(now):
			return jti, time.Time{}, newError(http.StatusBadRequest, "invalid_field", "expires_at: "+*body.ExpiresAt+" has passed: the token is refused already")
		case exp.Before(until):
			until = exp
		}
	}
	return jti, until, a.cfg.Revocations.Revoke(c.Request.Context(), jti, until)
}

// validJTI reports whether s is 1 to maxJTILen characters of base64url.
func validJTI(s string) bool {
	if s == "" || len(s) > maxJTILen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
