package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// callContext is the context every request runs on (detach): its
// caller's, never cancelled, and the claims of its service token once
// authorize verified it, so that any handler reads them (claimsOf) without
// verifying the token again and without a per-request map.
type callContext struct {
	context.Context
	claims   tokens.Claims
	verified bool
}

// callKey is the context key a callContext answers with itself.
type callKey struct{}

// Value answers callKey with c, and everything else as the caller's
// context does.
func (c *callContext) Value(k any) any {
	if k == (callKey{}) {
		return c
	}
	return c.Context.Value(k)
}

// claimsOf returns the verified claims of the request's service token, and
// false on a route that needs none.
func claimsOf(c *gin.Context) (tokens.Claims, bool) {
	if cc, ok := c.Request.Context().Value(callKey{}).(*callContext); ok && cc.verified {
		return cc.claims, true
	}
	return tokens.Claims{}, false
}

// authorize admits requests with a valid service token whose scope allows
// need: 401 without a valid token, 403 with the wrong scope. It leaves the
// token's claims to the handler (claimsOf), and a token's tenant in the
// request's context (keys.WithTenant), which every call that derives a
// subject or a pseudonym reads: a tenant's token sees its tenant only.
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
		ctx := c.Request.Context()
		if cc, ok := ctx.Value(callKey{}).(*callContext); ok {
			cc.claims, cc.verified = claims, true
		}
		if claims.Tenant != "" {
			c.Request = c.Request.WithContext(keys.WithTenant(ctx, claims.Tenant))
		}
		c.Next()
	}
}

// deploymentWide refuses, 403, a tenant's token on a call that changes
// what every tenant gets (a rules reload, a token revocation): only a
// token of the default tenant, the deployment's own, makes those.
func (a *API) deploymentWide(c *gin.Context) {
	if cl, _ := claimsOf(c); cl.Tenant != "" {
		a.abort(c, newError(http.StatusForbidden, "forbidden", "a token of tenant "+cl.Tenant+" cannot make this call: it changes what every tenant gets, and takes a token without a tenant"))
		return
	}
	c.Next()
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
	cl, _ := claimsOf(c)
	return cl.Subject
}
