package integration

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
)

const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// webhookReceiver is a real HTTP receiver that verifies each signature
// with crypto/hmac alone and keeps each event's type and data.
type webhookReceiver struct {
	mu     sync.Mutex
	events []map[string]any
	srv    *httptest.Server
}

func newWebhookReceiver(t *testing.T) *webhookReceiver {
	r := &webhookReceiver{}
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(webhookSecret, "whsec_"))
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		m := hmac.New(sha256.New, key)
		m.Write([]byte(req.Header.Get("webhook-id") + "." + req.Header.Get("webhook-timestamp") + "." + string(body)))
		if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); req.Header.Get("webhook-signature") != want {
			t.Errorf("webhook-signature %q, want %q", req.Header.Get("webhook-signature"), want)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev map[string]any
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("event %q: %v", body, err)
		}
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// of returns the instances named by the events of type typ so far.
func (r *webhookReceiver) of(typ string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e["type"] == typ {
			data, _ := e["data"].(map[string]any)
			s, _ := data["instance"].(string)
			out = append(out, s)
		}
	}
	return out
}

// waitFor waits up to 15 s for cond on the receiver.
func (r *webhookReceiver) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			r.mu.Lock()
			t.Fatalf("%s: not within 15s; events %v", what, r.events)
		}
	}
}

// TestWebhooksOfAFleet runs two instances on Redis with one receiver: a
// reload both see is sent once, claimed in the store; with Redis paused
// each instance's fallback starts and is sent with its instance, and ends
// once Redis is back.
func TestWebhooksOfAFleet(t *testing.T) {
	redis := redistest.Start(t)
	recv := newWebhookReceiver(t)
	secretFile := filepath.Join(t.TempDir(), "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(webhookSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fleet := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: faultRules, storeTimeout: faultTimeout,
		webhookURLs: []string{recv.srv.URL}, webhookSecretFile: secretFile})

	// Both instances reload the changed file.
	if err := os.WriteFile(fleet[0].rulesPath, []byte(faultRules+"# changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, in := range fleet {
		in.must(t, "POST", "/v1/rules/reload", adminToken, nil)
	}
	// Each instance dispatches its events in order, so once its reset
	// (an event no other instance sends) is in, its reload's claim was
	// settled, on a Redis that answered.
	for i, in := range fleet {
		account := fmt.Sprintf("webhook-fleet-%d", i)
		in.must(t, "POST", "/v1/accounts/reset", adminToken, map[string]any{"account": account})
		recv.waitFor(t, "account_reset by "+in.srv.InstanceID(), func() bool { return len(recv.of("account_reset")) > i })
	}
	if got := recv.of("rules_reloaded"); len(got) != 1 {
		t.Errorf("rules_reloaded sent %d times (by %v), want once for the fleet", len(got), got)
	}

	redis.Pause(t)
	for _, in := range fleet {
		id := in.srv.InstanceID()
		recv.waitFor(t, "fallback_started of "+id, func() bool {
			in.check(t, map[string]any{"flow": "otp_verify", "ip": "192.0.2.251"})
			return strings.Contains(strings.Join(recv.of("fallback_started"), " "), id)
		})
	}
	redis.Unpause(t)
	for _, in := range fleet {
		id := in.srv.InstanceID()
		recv.waitFor(t, "fallback_ended of "+id, func() bool {
			return strings.Contains(strings.Join(recv.of("fallback_ended"), " "), id)
		})
	}
	if got := recv.of("fallback_started"); len(got) != 2 {
		t.Errorf("fallback_started sent by %v, want once by each instance", got)
	}
}
