package server_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// hookSecret is a webhook secret as the Standard Webhooks specification
// writes one.
const hookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// hookEvent is one event a receiver got, its signature checked.
type hookEvent struct {
	Type string            `json:"type"`
	Data map[string]string `json:"data"`
}

// hookReceiver is a real HTTP receiver of guardian's webhooks that
// verifies every signature with crypto/hmac alone; hold, when set, makes
// it hang until the test ends.
type hookReceiver struct {
	t      *testing.T
	mu     sync.Mutex
	events []hookEvent
	srv    *httptest.Server
}

func newHookReceiver(t *testing.T, hold bool) *hookReceiver {
	r := &hookReceiver{t: t}
	release := make(chan struct{})
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(hookSecret, "whsec_"))
		m := hmac.New(sha256.New, key)
		m.Write([]byte(req.Header.Get("webhook-id") + "." + req.Header.Get("webhook-timestamp") + "." + string(body)))
		if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); req.Header.Get("webhook-signature") != want {
			t.Errorf("signature %q, want %q", req.Header.Get("webhook-signature"), want)
		}
		var ev hookEvent
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("body %q: %v", body, err)
		}
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.mu.Unlock()
		if hold {
			<-release
		}
	}))
	t.Cleanup(r.srv.Close)
	t.Cleanup(func() { close(release) })
	return r
}

// got returns the events of type typ received so far.
func (r *hookReceiver) got(typ string) []hookEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []hookEvent
	for _, e := range r.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// waitFor waits up to 10 s for n events of type typ and returns them.
func (r *hookReceiver) waitFor(typ string, n int) []hookEvent {
	r.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if got := r.got(typ); len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%d %s events within 10s, want %d", len(r.got(typ)), typ, n)
		}
	}
}

// startHooked runs an instance on rulesYAML sending webhooks to urls,
// logging JSON to the returned buffer.
func startHooked(t *testing.T, rulesYAML string, urls ...string) (*instance, *logBuffer) {
	t.Helper()
	secretFile := filepath.Join(t.TempDir(), "webhook-secret")
	writeFile(t, secretFile, hookSecret+"\n")
	logs := &logBuffer{}
	in := &instance{rulesPath: filepath.Join(t.TempDir(), "rules.yaml")}
	writeFile(t, in.rulesPath, rulesYAML)
	srv := serve(t, server.Config{Addr: "127.0.0.1:0", SigningKey: testKey, RulesPath: in.rulesPath,
		WebhookURLs: urls, WebhookSecretFile: secretFile, Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	in.srv, in.base = srv, "http://"+srv.Addr()
	svc := tokens.NewService(testKey)
	in.checkToken, in.adminToken = mustToken(t, svc, tokens.ScopeCheck), mustToken(t, svc, tokens.ScopeAdmin)
	return in, logs
}

// TestWebhooksTellOfHardStopsResetsAndReloads: the events arrive signed,
// the account named by the audit lines' pseudonym, never in clear.
func TestWebhooksTellOfHardStopsResetsAndReloads(t *testing.T) {
	r := newHookReceiver(t, false)
	in, logs := startHooked(t, hardStopRules, r.srv.URL)
	login := map[string]any{"flow": "login", "account": "Dave@example.com", "ip": "203.0.113.9"}
	for range 3 {
		in.report(t, str(in.check(t, login).body["attempt_id"]), "failure")
	}
	started := r.waitFor("hard_stop_started", 1)
	audited := logs.lines(t, "event", "hard_stop_started")
	if len(audited) != 1 || started[0].Data["account"] != audited[0]["account"] || started[0].Data["instance"] != in.srv.InstanceID() {
		t.Errorf("hard_stop_started %v, audit line %v: want the same pseudonym and this instance", started, audited)
	}
	if a := in.do(t, "POST", "/v1/accounts/reset", in.adminToken, map[string]any{"account": "dave@example.com"}); a.status != 200 {
		t.Fatalf("reset: %d %s", a.status, a.raw)
	}
	reset, ended := r.waitFor("account_reset", 1), r.waitFor("hard_stop_ended", 1)
	if reset[0].Data["account"] != started[0].Data["account"] || ended[0].Data["account"] != started[0].Data["account"] {
		t.Errorf("account_reset %v, hard_stop_ended %v: want the pseudonym %s", reset, ended, started[0].Data["account"])
	}
	writeFile(t, in.rulesPath, hardStopRules+trialRule)
	if a := in.do(t, "POST", "/v1/rules/reload", in.adminToken, nil); a.status != 200 {
		t.Fatalf("reload: %d %s", a.status, a.raw)
	}
	reloaded := r.waitFor("rules_reloaded", 1)
	if reloaded[0].Data["rule_count"] != "2" || reloaded[0].Data["hash"] == "" {
		t.Errorf("rules_reloaded %v, want 2 rules and the hash", reloaded)
	}
	if a := in.do(t, "POST", "/v1/lists/deny", in.adminToken, map[string]any{"network": "198.51.100.0/24", "ttl": "1h", "reason": "stuffing"}); a.status != 201 {
		t.Fatalf("POST /v1/lists/deny: %d %s", a.status, a.raw)
	}
	if got := r.waitFor("list_changed", 1); got[0].Data["list"] != "deny" || got[0].Data["action"] != "added" || got[0].Data["name"] != "198.51.100.0/24" || got[0].Data["id"] == "" {
		t.Errorf("list_changed %v, want the deny entry added", got)
	}
	in.srv.ListChanged("allow", "deleted", "l-1", "192.0.2.0/24")
	if got := r.waitFor("list_changed", 2); got[1].Data["list"] != "allow" || got[1].Data["action"] != "deleted" {
		t.Errorf("list_changed %v", got)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, _ := json.Marshal(r.events); strings.Contains(strings.ToLower(string(b)), "dave") {
		t.Errorf("an event names the account in clear: %s", b)
	}
}

// TestAHungReceiverSlowsNoCheck: the receiver hangs on its first event;
// 50 callers still get every check and report answered, 20 hard stops
// among them, while it hangs.
func TestAHungReceiverSlowsNoCheck(t *testing.T) {
	r := newHookReceiver(t, true)
	in, logs := startHooked(t, hardStopRules, r.srv.URL)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			login := map[string]any{"flow": "login", "account": "user" + string(rune('a'+i%20)) + "@example.com", "ip": "203.0.113.10"}
			for range 3 {
				a := in.check(t, login)
				if id := str(a.body["attempt_id"]); id != "" {
					in.report(t, id, "failure")
				}
			}
		})
	}
	wg.Wait()
	if got := len(logs.lines(t, "event", "hard_stop_started")); got != 20 {
		t.Errorf("%d hard stops, want one for each of the 20 accounts", got)
	}
	if got := len(r.waitFor("hard_stop_started", 1)); got != 1 {
		t.Errorf("the hung receiver got %d events, want the one it hangs on", got)
	}
	if got := metric(t, in, `guardian_webhook_events_total{event="hard_stop_started",result="delivered"}`); got > 0 {
		t.Errorf("delivered %v while the receiver hangs", got)
	}
}
