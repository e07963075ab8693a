package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/client"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// switchable is a front that sends every request to the instance in force,
// as a load balancer does during a rolling restart.
type switchable struct{ h atomic.Pointer[http.Handler] }

func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }

func (s *switchable) to(h http.Handler) { s.h.Store(&h) }

// instanceWith builds, without a listener, an instance signing with key
// and still verifying previous.
func instanceWith(t *testing.T, key secret.Key, previous ...secret.Key) http.Handler {
	t.Helper()
	srv, err := server.New(server.Config{SigningKey: key, PreviousSigningKeys: previous, HashKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	return srv.Handler()
}

func writeTokenFile(t *testing.T, path, tok string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// TestTokenFileRotation rotates the signing key and the client's token file
// while the client checks without pause: the old key signing, then the new
// key signing with the old one still verifying, the token file rewritten,
// then the old key gone. No check fails and none is left to the client's
// policy; then a token that expired goes where the caller said.
func TestTokenFileRotation(t *testing.T) {
	oldKey := mustKey(t, "rotation-old-signing-key-0123456789abc")
	newKey := mustKey(t, "rotation-new-signing-key-0123456789abc")
	front := &switchable{}
	front.to(instanceWith(t, oldKey))
	ts := httptest.NewServer(front)
	defer ts.Close()

	path := filepath.Join(t.TempDir(), "guardian-token")
	issue := func(key secret.Key, ttl time.Duration, at time.Time) string {
		tok, err := tokens.NewService(key).Issue(tokens.ScopeCheck, "login-svc", ttl, at)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	writeTokenFile(t, path, issue(oldKey, time.Hour, time.Now()))
	src, err := client.NewFileToken(path, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	c, err := client.New(client.Config{BaseURL: ts.URL, Tokens: src, OnUnavailable: client.FailClosed, Timeout: 5 * time.Second,
		Hooks: client.Hooks{Unauthorized: func(client.Call, int) { refused.Add(1) }}})
	if err != nil {
		t.Fatal(err)
	}

	var checks, failed atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req := client.CheckRequest{Flow: client.FlowLogin, Account: fmt.Sprintf("user-%d-%d", w, i), IP: fmt.Sprintf("198.51.%d.%d", w, i%250+1)}
				d, err := c.Check(context.Background(), req)
				checks.Add(1)
				if err != nil || d.Unavailable {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%+v, %v", d, err))
				}
			}
		})
	}
	phase := func(d time.Duration) {
		before := checks.Load()
		deadline := time.Now().Add(5 * time.Second)
		time.Sleep(d)
		for checks.Load() < before+20 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	phase(50 * time.Millisecond)
	front.to(instanceWith(t, newKey, oldKey)) // new key signs, old verifies
	phase(50 * time.Millisecond)
	writeTokenFile(t, path, issue(newKey, time.Hour, time.Now()))
	phase(100 * time.Millisecond)
	front.to(instanceWith(t, newKey)) // the old key is gone
	phase(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d checks failed across the rotation, first: %v", n, checks.Load(), firstErr.Load())
	}
	t.Logf("%d checks across the rotation, %d refusals answered by reading the file again", checks.Load(), refused.Load())

	// The token file now holds a token that expired an hour ago.
	writeTokenFile(t, path, issue(newKey, time.Minute, time.Now().Add(-time.Hour)))
	src.Invalidate()
	login := client.CheckRequest{Flow: client.FlowLogin, Account: "alice", IP: "203.0.113.9"}
	if _, err := c.Check(context.Background(), login); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("Check with an expired token and no OnUnauthorized = %v, want ErrUnauthorized", err)
	}
	for _, tt := range []struct {
		policy client.Policy
		want   client.Action
	}{{client.FailClosed, client.Slow}, {client.FailOpen, client.Allow}} {
		pc, err := client.New(client.Config{BaseURL: ts.URL, Tokens: src, OnUnavailable: client.FailClosed, OnUnauthorized: tt.policy, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		d, err := pc.Check(context.Background(), login)
		if err != nil || d.Action != tt.want || d.Reason != client.ReasonUnauthorized {
			t.Errorf("OnUnauthorized %v, expired token: %+v, %v; want %s by the policy", tt.policy, d, err, tt.want)
		}
	}
}
