package httpapi

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/tokens"
)

// claimsKey is where authorize leaves the verified claims in the context.
const claimsKey = "guardian.claims"

// authorize admits requests with a valid service token whose scope allows
// need: 401 without a valid token, 403 with the wrong scope.
func (a *API) authorize(need tokens.Scope) gin.HandlerFunc {
	return func(c *gin.Context) {
		tok, ok := bearer(c.GetHeader("Authorization"))
		if !ok {
			a.abort(c, newError(http.StatusUnauthorized, "unauthorized", "missing bearer token"))
			return
		}
		now := a.now()
		claims, err := a.cfg.Tokens.Verify(tok, now)
		if err != nil {
			a.abort(c, err)
			return
		}
		if !claims.Scope.Allows(need) {
			a.abort(c, newError(http.StatusForbidden, "forbidden", "token scope "+string(claims.Scope)+" does not allow this call"))
			return
		}
		a.noteExpiring(c, claims, now)
		if need == tokens.ScopeAdmin {
			// Only admin calls are audited by subject; the decision API
			// skips the per-request context map.
			c.Set(claimsKey, claims)
		}
		c.Next()
	}
}

// bearer returns the token of an Authorization header of the Bearer
// scheme. The scheme is matched in any case ("bearer", "BEARER"), as
// RFC 9110 has it, and spaces around the token are dropped.
func bearer(h string) (string, bool) {
	const scheme = "Bearer"
	if len(h) <= len(scheme) || h[len(scheme)] != ' ' {
		return "", false
	}
	if s := h[:len(scheme)]; s != scheme && !strings.EqualFold(s, scheme) {
		return "", false
	}
	tok := strings.TrimSpace(h[len(scheme)+1:])
	return tok, tok != ""
}

// subject is the verified token's subject, for the audit trail of admin
// calls.
func subject(c *gin.Context) string {
	if v, ok := c.Get(claimsKey); ok {
		if cl, ok := v.(tokens.Claims); ok {
			return cl.Subject
		}
	}
	return ""
}
