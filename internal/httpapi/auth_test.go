package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/tokens"
)

func TestBearer(t *testing.T) {
	for _, tt := range []struct {
		header string
		want   string
		ok     bool
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", true},
		{"bearer abc.def.ghi", "abc.def.ghi", true},
		{"BEARER abc.def.ghi", "abc.def.ghi", true},
		{"bEaReR abc.def.ghi", "abc.def.ghi", true},
		{"Bearer   abc.def.ghi  ", "abc.def.ghi", true},
		{"Bearer ", "", false},
		{"Bearer", "", false},
		{"", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearerabc.def.ghi", "", false},
		{"Token abc.def.ghi", "", false},
		{" Bearer abc.def.ghi", "", false},
	} {
		got, ok := bearer(tt.header)
		if got != tt.want || ok != tt.ok {
			t.Errorf("bearer(%q) = %q, %v; want %q, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

func TestExpiringWithin(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		cl   tokens.Claims
		want time.Duration
	}{
		{"720h: its last 72h", tokens.Claims{IssuedAt: t0, ExpiresAt: t0.Add(720 * time.Hour)}, 72 * time.Hour},
		{"a day: its last 2.4h", tokens.Claims{IssuedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}, 144 * time.Minute},
		{"an hour: its last 6 minutes", tokens.Claims{IssuedAt: t0, ExpiresAt: t0.Add(time.Hour)}, 6 * time.Minute},
		{"a year: never more than 72h", tokens.Claims{IssuedAt: t0, ExpiresAt: t0.Add(8760 * time.Hour)}, 72 * time.Hour},
		{"no issue time: 72h", tokens.Claims{ExpiresAt: t0.Add(time.Hour)}, 72 * time.Hour},
		{"issued after its expiry: 72h", tokens.Claims{IssuedAt: t0.Add(time.Hour), ExpiresAt: t0}, 72 * time.Hour},
	}
	for _, tt := range tests {
		if got := expiringWithin(tt.cl); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestClaimsReachEveryHandler: the claims authorize verified are the
// handler's on a call of either scope, with the token's tenant in the
// request's context, and a route without a token has none.
func TestClaimsReachEveryHandler(t *testing.T) {
	key, err := secret.New([]byte("httpapi-test-signing-key-0123456789ab"))
	if err != nil {
		t.Fatal(err)
	}
	svc := tokens.NewService(key)
	a := &API{cfg: Config{Tokens: svc}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now}
	type seen struct {
		cl     tokens.Claims
		ok     bool
		tenant string
	}
	var got seen
	record := func(c *gin.Context) {
		got.cl, got.ok = claimsOf(c)
		got.tenant = keys.TenantOf(c.Request.Context())
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(detach)
	r.GET("/check", a.authorize(tokens.ScopeCheck), record)
	r.GET("/admin", a.authorize(tokens.ScopeAdmin), record)
	r.GET("/open", record)
	for _, tt := range []struct {
		path, tenant string
		scope        tokens.Scope
	}{
		{"/check", "acme", tokens.ScopeCheck},
		{"/check", "", tokens.ScopeCheck},
		{"/admin", "shop-2", tokens.ScopeAdmin},
	} {
		tok, err := svc.IssueTenant(tt.scope, "caller", tt.tenant, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		got = seen{}
		req := httptest.NewRequest(http.MethodGet, tt.path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || !got.ok || got.cl.Subject != "caller" || got.cl.Tenant != tt.tenant || got.tenant != tt.tenant {
			t.Errorf("%s with a token of tenant %q: status %d, claims %+v (%v), context tenant %q", tt.path, tt.tenant, rec.Code, got.cl, got.ok, got.tenant)
		}
	}
	got = seen{ok: true}
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/open", nil))
	if got.ok {
		t.Errorf("a route without a token has claims %+v", got.cl)
	}
}
