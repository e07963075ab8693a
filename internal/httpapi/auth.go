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
		h := c.GetHeader("Authorization")
		tok, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || tok == "" {
			a.abort(c, newError(http.StatusUnauthorized, "unauthorized", "missing bearer token"))
			return
		}
		now := a.now()
		claims, err := a.cfg.Tokens.Verify(strings.TrimSpace(tok), now)
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
