package tokens

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestScopeAllows(t *testing.T) {
	tests := []struct {
		have, need Scope
		want       bool
	}{
		{ScopeAdmin, ScopeAdmin, true},
		{ScopeAdmin, ScopeCheck, true},
		{ScopeCheck, ScopeCheck, true},
		{ScopeCheck, ScopeAdmin, false},
		{"root", ScopeCheck, false},
		{"", ScopeCheck, false},
		{ScopeAdmin, "root", false},
	}
	for _, tt := range tests {
		if got := tt.have.Allows(tt.need); got != tt.want {
			t.Errorf("Scope(%q).Allows(%q) = %v, want %v", tt.have, tt.need, got, tt.want)
		}
	}
}

func TestServiceRoundTrip(t *testing.T) {
	s := NewService(testKey(t, 1))
	for _, scope := range []Scope{ScopeCheck, ScopeAdmin} {
		tok, err := s.Issue(scope, "auth-api", 24*time.Hour, t0.Add(500*time.Millisecond))
		if err != nil {
			t.Fatalf("Issue(%s) error = %v", scope, err)
		}
		got, err := s.Verify(tok, t0.Add(time.Hour))
		if err != nil {
			t.Fatalf("Verify(%s token) error = %v", scope, err)
		}
		want := Claims{Subject: "auth-api", Scope: scope, ExpiresAt: t0.Add(24 * time.Hour)}
		if got.Subject != want.Subject || got.Scope != want.Scope || !got.ExpiresAt.Equal(want.ExpiresAt) {
			t.Errorf("Verify = %+v, want %+v", got, want)
		}
	}
}

func TestServiceIssueClaims(t *testing.T) {
	s := NewService(testKey(t, 1))
	tok, err := s.Issue(ScopeAdmin, "ops", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts", len(parts))
	}
	var header, claims map[string]any
	for i, v := range []*map[string]any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := fmt.Sprint(header), fmt.Sprint(map[string]any{"alg": "HS256", "typ": "JWT", "kid": testKey(t, 1).ID()}); got != want {
		t.Errorf("header = %s, want %s: kid is the signing key's id", got, want)
	}
	jti, _ := claims["jti"].(string)
	if !validID(jti) {
		t.Errorf("jti %q: want 16 random bytes in base64url", jti)
	}
	want := map[string]any{
		"iss": "guardian", "sub": "ops", "scope": "admin", "jti": jti,
		"iat": float64(t0.Unix()), "exp": float64(t0.Add(time.Hour).Unix()),
	}
	if got, want := fmt.Sprint(claims), fmt.Sprint(want); got != want {
		t.Errorf("claims = %s, want %s", got, want)
	}
}

func TestServiceIssueRejects(t *testing.T) {
	s := NewService(testKey(t, 1))
	if _, err := s.Issue("root", "x", time.Hour, t0); !errors.Is(err, ErrInvalidScope) {
		t.Errorf("Issue(scope root) error = %v, want ErrInvalidScope", err)
	}
	if _, err := s.Issue(ScopeCheck, "x", 0, t0); err == nil {
		t.Error("Issue(ttl 0) succeeded")
	}
}

func TestServiceVerifyRejects(t *testing.T) {
	s := NewService(testKey(t, 1))
	other := NewService(testKey(t, 2))
	otherTok, err := other.Issue(ScopeAdmin, "x", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	good, err := s.Issue(ScopeCheck, "x", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rs256, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims(serviceClaimsAt(t0))).SignedString(rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	valid := serviceClaimsAt(t0)
	parts := strings.Split(good, ".")
	adminClaims, _ := json.Marshal(with(valid, "scope", "admin"))

	tests := []struct {
		name  string
		token string
		want  string
	}{
		{"empty", "", "malformed"},
		{"garbage", "not a token", "malformed"},
		{"three dots of garbage", "a.b.c", "malformed"},
		{"too long", strings.Repeat("a", maxJWTLen+1), "too long"},
		{"alg none", craft(t, map[string]any{"alg": "none", "typ": "JWT"}, valid, nil, nil), "algorithm not allowed"},
		{"alg None", craft(t, map[string]any{"alg": "None"}, valid, nil, nil), "algorithm not allowed"},
		{"alg none with a signature", craft(t, map[string]any{"alg": "none"}, valid, sha256.New, s.key()), "algorithm not allowed"},
		{"no alg", craft(t, map[string]any{"typ": "JWT"}, valid, sha256.New, s.key()), "algorithm not allowed"},
		{"HS384 with the right key", craft(t, map[string]any{"alg": "HS384"}, valid, sha512.New384, s.key()), "algorithm not allowed"},
		{"HS512 with the right key", craft(t, map[string]any{"alg": "HS512"}, valid, sha512.New, s.key()), "algorithm not allowed"},
		{"RS256", rs256, "algorithm not allowed"},
		{"another signing key", otherTok, "signed with a key not in force"},
		{"another signing key, claiming this one's kid", craft(t, with(hs256, "kid", testKey(t, 1).ID()), valid, sha256.New, other.key()), "bad signature"},
		{"a kid of no key, signed right", craft(t, with(hs256, "kid", "no-such-key"), valid, sha256.New, s.key()), "signed with a key not in force"},
		{"kid not a string", craft(t, with(hs256, "kid", 7), valid, sha256.New, s.key()), "signed with a key not in force"},
		{"claims swapped after signing", parts[0] + "." + b64(adminClaims) + "." + parts[2], "bad signature"},
		{"signature dropped", parts[0] + "." + parts[1] + ".", "bad signature"},
		{"expired", craft(t, hs256, serviceClaimsAt(t0.Add(-2*time.Hour)), sha256.New, s.key()), "expired"},
		{"expires exactly now", craft(t, hs256, serviceClaimsAt(t0.Add(-time.Hour)), sha256.New, s.key()), "expired"},
		{"no exp", craft(t, hs256, with(valid, "exp", nil), sha256.New, s.key()), "no expiry"},
		{"exp not a number", craft(t, hs256, with(valid, "exp", "tomorrow"), sha256.New, s.key()), "malformed"},
		{"not before in the future", craft(t, hs256, with(valid, "nbf", t0.Add(time.Minute).Unix()), sha256.New, s.key()), "not valid yet"},
		{"bad scope", craft(t, hs256, with(valid, "scope", "root"), sha256.New, s.key()), "bad scope"},
		{"no scope", craft(t, hs256, with(valid, "scope", nil), sha256.New, s.key()), "bad scope"},
		{"scope of another type", craft(t, hs256, with(valid, "scope", 1), sha256.New, s.key()), "malformed"},
		{"wrong issuer", craft(t, hs256, with(valid, "iss", "someone"), sha256.New, s.key()), "wrong issuer"},
		{"no issuer", craft(t, hs256, with(valid, "iss", nil), sha256.New, s.key()), "wrong issuer"},
		{"bad tenant", craft(t, hs256, with(valid, "tenant", "Acme Corp"), sha256.New, s.key()), "bad tenant"},
		{"tenant too long", craft(t, hs256, with(valid, "tenant", strings.Repeat("a", 33)), sha256.New, s.key()), "bad tenant"},
		{"tenant of another type", craft(t, hs256, with(valid, "tenant", 7), sha256.New, s.key()), "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Verify(tt.token, t0)
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("Verify = %+v, %v; want ErrInvalidToken", got, err)
			}
			if want := "tokens: invalid token: " + tt.want; err.Error() != want {
				t.Errorf("Verify error = %q, want %q", err, want)
			}
			if got != (Claims{}) {
				t.Errorf("Verify returned claims %+v with its error", got)
			}
		})
	}
	// The hand-made valid token is accepted, so the rejections above are
	// down to what each case changed.
	if _, err := s.Verify(craft(t, hs256, valid, sha256.New, s.key()), t0); err != nil {
		t.Errorf("hand-made valid token: %v", err)
	}
}

func TestServiceCache(t *testing.T) {
	s := NewService(testKey(t, 1))
	tok, err := s.Issue(ScopeCheck, "auth-api", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name     string
		now      time.Time
		wantErr  error
		wantHits uint64
	}{
		{"first verify parses", t0, nil, 0},
		{"second verify is a hit", t0.Add(time.Minute), nil, 1},
		{"hit just before expiry", t0.Add(time.Hour - time.Second), nil, 2},
		{"hit at expiry is rejected", t0.Add(time.Hour), ErrInvalidToken, 3},
		{"hit after expiry is rejected", t0.Add(2 * time.Hour), ErrInvalidToken, 4},
	}
	for _, st := range steps {
		c, err := s.Verify(tok, st.now)
		if !errors.Is(err, st.wantErr) || (err == nil) != (st.wantErr == nil) {
			t.Fatalf("%s: Verify error = %v, want %v", st.name, err, st.wantErr)
		}
		if err == nil && c.Scope != ScopeCheck {
			t.Errorf("%s: scope = %q, want check", st.name, c.Scope)
		}
		if got := s.cache.hits.Load(); got != st.wantHits {
			t.Errorf("%s: cache hits = %d, want %d", st.name, got, st.wantHits)
		}
	}
	if _, err := s.Verify(tok, t0.Add(2*time.Hour)); err == nil || !strings.HasSuffix(err.Error(), ": expired") {
		t.Errorf("expired cached token error = %v, want expired", err)
	}
}

func TestServiceCacheKeepsOnlyVerified(t *testing.T) {
	s := NewService(testKey(t, 1))
	forged, err := NewService(testKey(t, 2)).Issue(ScopeAdmin, "x", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := s.Issue(ScopeAdmin, "x", time.Minute, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.Verify(forged, t0); err == nil {
			t.Fatal("forged token accepted")
		}
		if _, err := s.Verify(expired, t0); err == nil {
			t.Fatal("expired token accepted")
		}
	}
	if got := s.cache.hits.Load(); got != 0 {
		t.Errorf("cache hits = %d, want 0", got)
	}
	if got := len(s.cache.m); got != 0 {
		t.Errorf("cache holds %d tokens, want 0", got)
	}
}

func TestServiceCacheBounded(t *testing.T) {
	s := NewService(testKey(t, 1))
	s.cache.max = 16
	for i := range 100 {
		tok, err := s.Issue(ScopeCheck, fmt.Sprint("caller-", i), time.Hour, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Verify(tok, t0); err != nil {
			t.Fatalf("token %d: %v", i, err)
		}
		if got := len(s.cache.m); got > 16 {
			t.Fatalf("after %d tokens the cache holds %d, want at most 16", i+1, got)
		}
	}
}

func TestServiceCacheEvictsExpiredFirst(t *testing.T) {
	s := NewService(testKey(t, 1))
	s.cache.max = 4
	var long string
	for i := range 4 {
		ttl := time.Minute
		if i == 0 {
			ttl = time.Hour
		}
		tok, err := s.Issue(ScopeCheck, fmt.Sprint("caller-", i), ttl, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Verify(tok, t0); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			long = tok
		}
	}
	fresh, err := s.Issue(ScopeCheck, "late", time.Hour, t0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(fresh, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.cache.m[long]; !ok || len(s.cache.m) != 2 {
		t.Errorf("cache after the sweep holds %d tokens (long-lived kept: %v), want the long-lived and the new one", len(s.cache.m), ok)
	}
}

func TestServiceVerifyConcurrent(t *testing.T) {
	s := NewService(testKey(t, 1))
	s.cache.max = 8
	toks := make([]string, 20)
	for i := range toks {
		var err error
		if toks[i], err = s.Issue(ScopeCheck, fmt.Sprint("caller-", i), time.Hour, t0); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	for g := range 50 {
		wg.Go(func() {
			for i := range 40 {
				if _, err := s.Verify(toks[(g+i)%len(toks)], t0); err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failures) != 0 {
		t.Errorf("%d concurrent verifications failed, first: %v", len(failures), failures[0])
	}
}

func TestServiceTenant(t *testing.T) {
	s := NewService(testKey(t, 1))
	tok, err := s.IssueTenant(ScopeCheck, "shop", "acme", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Verify(tok, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Tenant != "acme" || got.Subject != "shop" || got.Scope != ScopeCheck {
		t.Errorf("claims = %+v, want tenant acme, subject shop, scope check", got)
	}
	plain, err := s.Issue(ScopeCheck, "shop", time.Hour, t0)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Verify(plain, t0); err != nil || got.Tenant != "" {
		t.Errorf("a token without a tenant: %+v, %v; want the default tenant", got, err)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(plain, ".")[1])
	if strings.Contains(string(payload), "tenant") {
		t.Errorf("a default-tenant token carries a tenant claim: %s", payload)
	}
	for _, bad := range []string{"Acme", "-acme", strings.Repeat("a", 33), "a b"} {
		if _, err := s.IssueTenant(ScopeAdmin, "x", bad, time.Hour, t0); err == nil {
			t.Errorf("IssueTenant(tenant %q) succeeded", bad)
		}
	}
}
