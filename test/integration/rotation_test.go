package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// rotationRules give an account a budget that does not refill within the
// test (so any reset shows as remaining going up) and a hard stop.
const rotationRules = `version: 1
rules:
  - name: rot-account
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1h
    burst: 500
  - name: rot-hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 3
    action: block
`

// TestSigningKeyRotationAcrossTheFleet rotates the signing key of two
// instances sharing Redis by rewriting each one's key file, one instance
// after the other, as a rolling update of a mounted Secret reaches pods:
// the new key added, then made the signing key, then the old key removed.
// Under constant traffic through both instances no check and no report
// fails; an account's budget and a hard stop carry on across every step
// (the hash key is the fleet's own); device tokens and attempt ids of the
// old key keep working while it verifies anywhere they are presented, and
// not after it is gone.
func TestSigningKeyRotationAcrossTheFleet(t *testing.T) {
	redis := redistest.Start(t)
	const oldRaw, newRaw = "guardian-integration-old-key-0123456789abc", "guardian-integration-new-key-0123456789abc"
	oldKey, newKey := mustSecret(t, oldRaw), mustSecret(t, newRaw)
	dir := t.TempDir()
	files := []string{filepath.Join(dir, "keys-a"), filepath.Join(dir, "keys-b")}
	for _, f := range files {
		writeKeys(t, f, oldRaw)
	}
	fleet := startFleet(t, 2, fleetConfig{
		redisURL:  redis.URL(),
		rulesYAML: rotationRules,
		keyFile:   func(i int) string { return files[i] },
		hashKey:   mustSecret(t, "guardian-integration-hash-key-0123456789abc"),
	})
	a, b := fleet[0], fleet[1]
	issue := func(k secret.Key, scope tokens.Scope) string {
		t.Helper()
		tok, err := tokens.NewService(k).Issue(scope, "rotation", time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	var token atomic.Value // the service token the auth services send
	token.Store(issue(oldKey, tokens.ScopeAdmin))
	call := func(in *instance, path string, body map[string]any) answer {
		t.Helper()
		return in.must(t, "POST", path, token.Load().(string), body)
	}
	login := func(account, ip string, extra ...any) map[string]any {
		m := map[string]any{"flow": "login", "account": account, "ip": ip}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}

	// Before the rotation: a device token, a hard stop, an account's spend.
	first := call(a, "/v1/check", login("owner", "198.51.100.1"))
	device := call(b, "/v1/report", map[string]any{"attempt_id": first.str("attempt_id"), "outcome": "success"}).str("device_token")
	if device == "" {
		t.Fatal("no device token")
	}
	for i := range 3 {
		r := call(fleet[i%2], "/v1/check", login("stopped", "198.51.100.2"))
		call(fleet[(i+1)%2], "/v1/report", map[string]any{"attempt_id": r.str("attempt_id"), "outcome": "failure"})
	}
	// succeed reports r a success through the instance that did not
	// decide it, so that no check of the test's own counts as a failure.
	succeed := func(decided *instance, r answer) {
		t.Helper()
		other := a
		if decided == a {
			other = b
		}
		if rep := call(other, "/v1/report", map[string]any{"attempt_id": r.str("attempt_id"), "outcome": "success"}); rep.status != 200 {
			t.Fatalf("report: %d %s", rep.status, rep.raw)
		}
	}
	remaining := int64(500)
	spend := func(step string) {
		t.Helper()
		for _, in := range []*instance{a, b} {
			r := call(in, "/v1/check", login("steady", "198.51.100.3"))
			remaining--
			if r.status != 200 || r.remaining("rot-account") != remaining {
				t.Fatalf("%s: the steady account's check: %d %s, want 200 and %d remaining: a limit started over", step, r.status, r.raw, remaining)
			}
			succeed(in, r)
		}
		for _, in := range []*instance{a, b} {
			if r := call(in, "/v1/check", login("stopped", "198.51.100.2")); r.str("decision") != "block" {
				t.Fatalf("%s: the hard-stopped account: %s, want block", step, r.raw)
			}
		}
	}
	trusted := func(in *instance) string {
		t.Helper()
		r := call(in, "/v1/check", login("owner", "198.51.100.9", "device_token", device))
		succeed(in, r)
		return r.str("trust")
	}
	spend("before")

	// Traffic through both instances for the whole rotation: every check
	// is answered 200 or 429 and every report 200.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls, failed atomic.Int64
	var firstFailure atomic.Value
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				in, other := fleet[i%2], fleet[(i+1)%2]
				tok := token.Load().(string)
				c, err := in.call("POST", "/v1/check", tok, login(fmt.Sprintf("load-%d-%d", w, i), fmt.Sprintf("203.0.%d.%d", w, i%250+1)))
				ok := err == nil && (c.status == 200 || c.status == 429)
				if ok && c.status == 200 {
					r, err := other.call("POST", "/v1/report", tok, map[string]any{"attempt_id": c.str("attempt_id"), "outcome": []string{"success", "failure"}[i%2]})
					ok = err == nil && r.status == 200
					c = r
				}
				calls.Add(1)
				if !ok {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %s %v", c.status, c.raw, err))
				}
			}
		})
	}
	// step rewrites each instance's key file in turn, with traffic
	// between, and checks what must hold with only the first rewritten
	// and then with both.
	step := func(name string, lines []string, between, after func()) {
		t.Helper()
		for i, in := range fleet {
			writeKeys(t, files[i], lines...)
			if err := in.srv.ReloadKeys("test"); err != nil {
				t.Fatalf("%s: instance %d: %v", name, i, err)
			}
			if i == 0 {
				between()
			}
			settleTraffic(&calls)
		}
		after()
		spend(name)
	}

	pending := call(a, "/v1/check", login("pending", "198.51.100.4")) // sealed by the old key
	step("new key added", []string{oldRaw, newRaw}, func() {}, func() {
		// The fleet verifies the new key everywhere: its tokens may go out.
		token.Store(issue(newKey, tokens.ScopeAdmin))
	})
	var sealedByNew answer
	step("new key signing", []string{newRaw, oldRaw}, func() {
		// a signs with the new key while b has not switched: b opens what
		// a sealed, a what b sealed.
		sealedByNew = call(a, "/v1/check", login("crossing", "198.51.100.5"))
		if r := call(b, "/v1/report", map[string]any{"attempt_id": sealedByNew.str("attempt_id"), "outcome": "success"}); r.status != 200 {
			t.Errorf("b reporting what a sealed with the new key: %d %s", r.status, r.raw)
		}
		sealedByOld := call(b, "/v1/check", login("crossing-back", "198.51.100.6"))
		if r := call(a, "/v1/report", map[string]any{"attempt_id": sealedByOld.str("attempt_id"), "outcome": "failure"}); r.status != 200 {
			t.Errorf("a reporting what b sealed with the old key: %d %s", r.status, r.raw)
		}
	}, func() {
		for _, in := range fleet {
			if got := trusted(in); got != "device" {
				t.Errorf("the old key's device token with the old key verifying: trust %q, want device", got)
			}
		}
		if r := call(b, "/v1/report", map[string]any{"attempt_id": pending.str("attempt_id"), "outcome": "failure"}); r.status != 200 {
			t.Errorf("an attempt id the old key sealed, reported while it verifies: %d %s", r.status, r.raw)
		}
	})
	late := call(b, "/v1/check", login("late", "198.51.100.7")) // sealed by the new key
	oldTok := issue(oldKey, tokens.ScopeCheck)
	step("old key removed", []string{newRaw}, func() {}, func() {
		for _, in := range fleet {
			if got := trusted(in); got != "none" {
				t.Errorf("the old key's device token after the old key went: trust %q, want none", got)
			}
			if r := in.must(t, "POST", "/v1/check", oldTok, login("x", "198.51.100.8")); r.status != 401 {
				t.Errorf("a service token of the old key after it went: %d, want 401", r.status)
			}
		}
		if r := call(a, "/v1/report", map[string]any{"attempt_id": late.str("attempt_id"), "outcome": "success"}); r.status != 200 {
			t.Errorf("an attempt id of the new key: %d %s", r.status, r.raw)
		}
	})
	close(stop)
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d calls failed across the rotation, first: %v", n, calls.Load(), firstFailure.Load())
	}
	t.Logf("%d checks and reports across the rotation, none failed", calls.Load())
}

// settleTraffic waits until the background traffic made 20 more calls, so
// every state of a rotation carries some of it.
func settleTraffic(calls *atomic.Int64) {
	target := calls.Load() + 20
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() < target && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// writeKeys replaces the key file at path with keys, one a line.
func writeKeys(t *testing.T, path string, keys ...string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(strings.Join(keys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

func mustSecret(t *testing.T, s string) secret.Key {
	t.Helper()
	k, err := secret.New([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
