package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// TestSigningKeyRotation rotates the signing key of a fleet sharing one
// store, with a hash key of its own: during the grace period everything
// the old key signed still verifies and no limit starts over; after it, the
// old key's tokens are refused and the limits still stand.
func TestSigningKeyRotation(t *testing.T) {
	oldKey := mustKey(t, "guardian-rotation-old-key-0123456789abcdef")
	newKey := mustKey(t, "guardian-rotation-new-key-0123456789abcdef")
	hashKey := mustKey(t, "guardian-rotation-hash-key-0123456789abcdef")
	shared := memstore.New(memstore.Config{})
	run := func(cfg server.Config) *instance {
		t.Helper()
		cfg.Addr, cfg.Store, cfg.HashKey = "127.0.0.1:0", shared, hashKey
		srv := serve(t, cfg)
		return &instance{srv: srv, base: "http://" + srv.Addr()}
	}
	token := func(k secret.Key) string {
		tok, err := tokens.NewService(k).Issue(tokens.ScopeCheck, "auth", time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	req := map[string]any{"flow": "login", "account": "rotating", "ip": "192.0.2.77"}

	before := run(server.Config{SigningKey: oldKey})
	oldToken := token(oldKey)
	first := before.do(t, "POST", "/v1/check", oldToken, req)
	device := str(before.do(t, "POST", "/v1/report", oldToken, map[string]any{"attempt_id": str(first.body["attempt_id"]), "outcome": "success"}).body["device_token"])
	pending := before.do(t, "POST", "/v1/check", oldToken, req)
	if got := num(limit(t, pending, "login-account")["remaining"]); got != 4 {
		t.Fatalf("before the rotation: remaining %d, want 4", got)
	}

	during := run(server.Config{SigningKey: newKey, PreviousSigningKeys: []secret.Key{oldKey}})
	r := during.do(t, "POST", "/v1/check", oldToken, req)
	if r.status != http.StatusOK || num(limit(t, r, "login-account")["remaining"]) != 3 {
		t.Fatalf("old service token during the rotation: %d %s, want 200 and the account's bucket carried on (3 left)", r.status, r.raw)
	}
	if r := during.do(t, "POST", "/v1/report", token(newKey), map[string]any{"attempt_id": str(pending.body["attempt_id"]), "outcome": "failure"}); r.status != http.StatusOK {
		t.Fatalf("attempt id sealed under the old key: %d %s, want 200", r.status, r.raw)
	}
	trusted := map[string]any{"flow": "login", "account": "rotating", "ip": "192.0.2.78", "device_token": device}
	if r := during.do(t, "POST", "/v1/check", token(newKey), trusted); num(limit(t, r, "login-account")["remaining"]) != 4 {
		t.Fatalf("device token from the old key: %s, want the device's own bucket (4 left), not the account's (2)", r.raw)
	}

	after := run(server.Config{SigningKey: newKey})
	if r := after.do(t, "POST", "/v1/check", oldToken, req); r.status != http.StatusUnauthorized {
		t.Fatalf("old service token after the rotation: %d, want 401", r.status)
	}
	r = after.do(t, "POST", "/v1/check", token(newKey), req)
	if got := num(limit(t, r, "login-account")["remaining"]); got != 2 {
		t.Fatalf("after the rotation: remaining %d, want 2: the limits did not start over", got)
	}
}

// TestHashKeyCopyKeepsLimits: a fleet that ran without a hash key keeps
// its limits by making its hash key a copy of its signing key, after which
// the signing key rotates freely.
func TestHashKeyCopyKeepsLimits(t *testing.T) {
	oldKey := mustKey(t, "guardian-hash-copy-old-key-0123456789abcdef")
	newKey := mustKey(t, "guardian-hash-copy-new-key-0123456789abcdef")
	shared := memstore.New(memstore.Config{})
	run := func(cfg server.Config) *instance {
		t.Helper()
		cfg.Addr, cfg.Store = "127.0.0.1:0", shared
		srv := serve(t, cfg)
		return &instance{srv: srv, base: "http://" + srv.Addr()}
	}
	req := map[string]any{"flow": "login", "account": "copied", "ip": "192.0.2.79"}
	before := run(server.Config{SigningKey: oldKey})
	tok, err := tokens.NewService(oldKey).Issue(tokens.ScopeCheck, "auth", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := num(limit(t, before.do(t, "POST", "/v1/check", tok, req), "login-account")["remaining"]); got != 4 {
		t.Fatalf("before: remaining %d, want 4", got)
	}
	after := run(server.Config{SigningKey: newKey, PreviousSigningKeys: []secret.Key{oldKey}, HashKey: oldKey})
	if got := num(limit(t, after.do(t, "POST", "/v1/check", tok, req), "login-account")["remaining"]); got != 3 {
		t.Fatalf("with the old signing key as the hash key: remaining %d, want 3: the limits started over", got)
	}
}
