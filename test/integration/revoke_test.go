package integration

import (
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// revokeWithin is how soon every instance must refuse a revoked token.
const revokeWithin = 2 * time.Second

// revokeRules limit nothing the test's checks carry, so that every answer
// is about the token alone.
const revokeRules = `version: 1
rules:
  - name: otp-recipient
    flows: [otp_send]
    key: recipient
    type: rate
    limit: 3
    per: 15m
`

// TestRevokeAcrossTheFleet revokes a token on one instance of two sharing
// Redis: the instance that took the call refuses it at once, the other
// within 2 s though it had verified the token before (and cached that); a
// revocation survives a store outage on every instance that saw it, and one
// made during the outage is refused where it was made at once and on the
// other instance within 2 s of the store answering again.
func TestRevokeAcrossTheFleet(t *testing.T) {
	redis := redistest.Start(t)
	fleet := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: revokeRules, storeTimeout: 200 * time.Millisecond})
	a, b := fleet[0], fleet[1]
	svc := tokens.NewService(signingKey)
	mint := func(subject string) (string, tokens.Claims) {
		t.Helper()
		tok, err := svc.Issue(tokens.ScopeCheck, subject, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cl, err := svc.Verify(tok, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return tok, cl
	}
	login := map[string]any{"flow": "login", "ip": "192.0.2.50"}
	status := func(in *instance, tok string) int {
		t.Helper()
		r, err := in.call("POST", "/v1/check", tok, login)
		if err != nil {
			t.Fatal(err)
		}
		return r.status
	}
	revoke := func(in *instance, cl tokens.Claims) answer {
		t.Helper()
		return in.must(t, "POST", "/v1/tokens/revoke", adminToken, map[string]any{"jti": cl.ID, "expires_at": cl.ExpiresAt.UTC().Format(time.RFC3339)})
	}
	// refusedWithin polls in until it refuses tok, and returns how long
	// that took, failing past limit.
	refusedWithin := func(in *instance, tok string, since time.Time, limit time.Duration) time.Duration {
		t.Helper()
		for {
			if status(in, tok) == 401 {
				return time.Since(since)
			}
			if time.Since(since) > limit {
				t.Fatalf("%s still accepts the revoked token %v after the revocation", in.base, limit)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	leaked, cl := mint("leaked")
	kept, _ := mint("kept")
	for _, in := range fleet {
		if status(in, leaked) != 200 || status(in, kept) != 200 {
			t.Fatal("the tokens before the revocation")
		}
	}
	start := time.Now()
	if r := revoke(a, cl); r.status != 200 || r.body["revoked"] != true {
		t.Fatalf("revoke: %d %s", r.status, r.raw)
	}
	if status(a, leaked) != 401 {
		t.Error("the instance that took the revocation still accepts the token")
	}
	took := refusedWithin(b, leaked, start, revokeWithin)
	t.Logf("revocation on a refused on b after %v", took)
	for _, in := range fleet {
		if status(in, kept) != 200 {
			t.Error("another token was refused with the revoked one")
		}
	}

	// The store goes away: every instance keeps the revocations it saw,
	// and a revocation made now applies where it was made.
	during, dcl := mint("during-outage")
	if status(b, during) != 200 {
		t.Fatal("the second token before the outage")
	}
	redis.Pause(t)
	paused := true
	defer func() {
		if paused {
			redis.Unpause(t)
		}
	}()
	time.Sleep(time.Second) // a round or two of reads fail
	for _, in := range fleet {
		if status(in, leaked) != 401 {
			t.Errorf("%s accepts the revoked token while the store is away", in.base)
		}
	}
	if r := revoke(b, dcl); r.status != 503 || !strings.Contains(string(r.raw), `"code":"store_unavailable"`) {
		t.Fatalf("revoke while the store is away: %d %s, want 503 store_unavailable", r.status, r.raw)
	}
	if status(b, during) != 401 {
		t.Error("the instance that took the revocation during the outage does not refuse the token")
	}
	if status(a, during) != 200 {
		t.Error("an instance that could not hear of the revocation refuses the token already")
	}
	redis.Unpause(t)
	paused = false
	back := time.Now()
	took = refusedWithin(a, during, back, revokeWithin+time.Second) // the store's first answers, then a round
	t.Logf("revocation made during the outage refused on a %v after the store came back", took)
}
