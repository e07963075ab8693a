package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// logBuffer collects a server's JSON log lines while it runs.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// lines returns the logged lines that have key set to value.
func (l *logBuffer) lines(t *testing.T, key string, value any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if m[key] == value {
			out = append(out, m)
		}
	}
	return out
}

// trialRule is a rule on trial, in shadow mode.
const trialRule = `  - name: trial
    flows: [login]
    key: ip
    type: rate
    limit: 10
    per: 1m
    mode: shadow
`

const hardStopRules = `version: 1
rules:
  - name: hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 3
`

// startLogged runs an instance on rulesYAML logging JSON to the returned
// buffer.
func startLogged(t *testing.T, rulesYAML string) (*instance, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	inst := &instance{rulesPath: filepath.Join(t.TempDir(), "rules.yaml")}
	writeFile(t, inst.rulesPath, rulesYAML)
	srv := serve(t, server.Config{
		Addr: "127.0.0.1:0", SigningKey: testKey, RulesPath: inst.rulesPath,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)),
	})
	inst.srv, inst.base = srv, "http://"+srv.Addr()
	svc := tokens.NewService(testKey)
	inst.checkToken = mustToken(t, svc, tokens.ScopeCheck)
	tok, err := svc.Issue(tokens.ScopeAdmin, "ops-alice", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	inst.adminToken = tok
	return inst, logs
}

// metric returns the value of the series line of /metrics starting with
// prefix, or -1.
func metric(t *testing.T, in *instance, prefix string) float64 {
	t.Helper()
	resp, err := http.Get(in.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix+" "); ok {
			var f float64
			if err := json.Unmarshal([]byte(v), &f); err != nil {
				t.Fatalf("metric %s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

// wantFields checks that line has exactly the fields of want besides time,
// level and msg.
func wantFields(t *testing.T, what string, line map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if !reflect.DeepEqual(line[k], v) {
			t.Errorf("%s: %s = %v, want %v (line %v)", what, k, line[k], v, line)
		}
	}
	for k := range line {
		if _, ok := want[k]; !ok && k != "time" && k != "level" && k != "msg" {
			t.Errorf("%s: unexpected field %s in %v", what, k, line)
		}
	}
}

var pseudonym = regexp.MustCompile(`^h-[A-Za-z0-9_-]{22}$`)

func TestAuditAndHardStopLines(t *testing.T) {
	in, logs := startLogged(t, hardStopRules)
	login := map[string]any{"flow": "login", "account": "Alice@Example.com", "ip": "203.0.113.7"}
	for i := range 3 {
		r := in.check(t, login)
		if str(r.body["decision"]) != "allow" {
			t.Fatalf("check %d: %s", i+1, r.raw)
		}
		if started := logs.lines(t, "event", "hard_stop_started"); len(started) != 0 {
			t.Fatalf("hard_stop_started before failure %d was reported: %v", i+1, started)
		}
		in.report(t, str(r.body["attempt_id"]), "failure")
	}
	started := logs.lines(t, "event", "hard_stop_started")
	if len(started) != 1 {
		t.Fatalf("hard_stop_started lines after the third failure: %v, want one", started)
	}
	account, _ := started[0]["account"].(string)
	if !pseudonym.MatchString(account) {
		t.Fatalf("hard_stop_started account %q, want a pseudonym h-…", account)
	}
	wantFields(t, "hard_stop_started", started[0], map[string]any{"event": "hard_stop_started", "account": account})
	// The pseudonym POST /v1/pseudonyms gives the account is the lines'.
	if p := in.do(t, "POST", "/v1/pseudonyms", in.adminToken, map[string]any{"account": "alice@EXAMPLE.com"}); p.status != 200 || str(p.body["pseudonym"]) != account {
		t.Errorf("POST /v1/pseudonyms: %d %s, want the pseudonym %q of the audit lines", p.status, p.raw, account)
	}
	if r := in.check(t, login); str(r.body["decision"]) != "block" {
		t.Fatalf("check after the hard stop: %s, want block", r.raw)
	}

	// The reset names the same pseudonym, whatever the account's case.
	// Each audit line carries its call's request id, the one the answer's
	// X-Request-Id says.
	r := in.do(t, "POST", "/v1/accounts/reset", in.adminToken, map[string]any{"account": "alice@example.com"})
	if r.status != 200 {
		t.Fatalf("reset: %d %s", r.status, r.raw)
	}
	resets := logs.lines(t, "action", "reset")
	if len(resets) != 1 {
		t.Fatalf("reset audit lines: %v, want one", resets)
	}
	wantFields(t, "reset", resets[0], map[string]any{"audit": true, "action": "reset", "subject": "ops-alice", "result": "ok", "account": account,
		"request_id": requestID(t, r)})
	ended := logs.lines(t, "event", "hard_stop_ended")
	if len(ended) != 1 {
		t.Fatalf("hard_stop_ended lines: %v, want one", ended)
	}
	wantFields(t, "hard_stop_ended", ended[0], map[string]any{"event": "hard_stop_ended", "account": account})

	// A reset of an account not in a hard stop ends none; one that fails
	// is audited as an error.
	in.do(t, "POST", "/v1/accounts/reset", in.adminToken, map[string]any{"account": "bob@example.com"})
	failed := in.do(t, "POST", "/v1/accounts/reset", in.adminToken, map[string]any{"account": 7})
	if n := len(logs.lines(t, "event", "hard_stop_ended")); n != 1 {
		t.Errorf("hard_stop_ended lines after resetting an account never stopped: %d, want 1", n)
	}
	resets = logs.lines(t, "action", "reset")
	if len(resets) != 3 {
		t.Fatalf("reset audit lines: %v, want three", resets)
	}
	bob, _ := resets[1]["account"].(string)
	if !pseudonym.MatchString(bob) || bob == account {
		t.Errorf("bob's pseudonym %q: want another pseudonym than alice's %q", bob, account)
	}
	wantFields(t, "failed reset", resets[2], map[string]any{"audit": true, "action": "reset", "subject": "ops-alice", "result": "error",
		"request_id": requestID(t, failed)})

	// Reloads: one refused, one applied, one promoting the trial.
	writeFile(t, in.rulesPath, "version: 1\nrules:\n  - name: Bad\n")
	refused := in.do(t, "POST", "/v1/rules/reload", in.adminToken, nil)
	if refused.status != 400 {
		t.Fatalf("invalid reload: %d %s", refused.status, refused.raw)
	}
	writeFile(t, in.rulesPath, hardStopRules+"    action: slow\n"+trialRule)
	applied := in.do(t, "POST", "/v1/rules/reload", in.adminToken, nil)
	if applied.status != 200 {
		t.Fatalf("reload: %d %s", applied.status, applied.raw)
	}
	// Then the trial is promoted and the hard stop goes.
	writeFile(t, in.rulesPath, "version: 1\nrules:\n"+strings.Replace(trialRule, "mode: shadow", "mode: enforce", 1))
	promotion := in.do(t, "POST", "/v1/rules/reload", in.adminToken, nil)
	if promotion.status != 200 {
		t.Fatalf("reload: %d %s", promotion.status, promotion.raw)
	}
	reloads := logs.lines(t, "action", "reload")
	if len(reloads) != 3 {
		t.Fatalf("reload audit lines: %v, want three", reloads)
	}
	none := []any{}
	wantFields(t, "refused reload", reloads[0], map[string]any{"audit": true, "action": "reload", "subject": "ops-alice", "result": "error",
		"request_id": requestID(t, refused)})
	changed := map[string]any{"audit": true, "action": "reload", "subject": "ops-alice", "result": "ok", "request_id": requestID(t, applied),
		"rules_added": []any{"trial"}, "rules_removed": none, "rules_promoted": none, "rules_demoted": none, "settings_changed": none,
		"rules_changed": []any{map[string]any{"rule": "hard-stop", "fields": []any{"action"}}}}
	wantFields(t, "reload", reloads[1], changed)
	promoted := map[string]any{"audit": true, "action": "reload", "subject": "ops-alice", "result": "ok", "request_id": requestID(t, promotion),
		"rules_added": none, "rules_removed": []any{"hard-stop"}, "rules_promoted": []any{"trial"}, "rules_demoted": none, "settings_changed": none,
		"rules_changed": []any{map[string]any{"rule": "trial", "fields": []any{"mode"}, "mode_from": "shadow", "mode_to": "enforce"}}}
	wantFields(t, "promotion", reloads[2], promoted)
	// The instance's own line of each reload says the same, with the same
	// request id. (The file's
	// watcher may reload each file once more, finding nothing changed.)
	var reloaded []map[string]any
	for _, l := range logs.lines(t, "by", "ops-alice") {
		if l["msg"] == "rules reloaded" {
			reloaded = append(reloaded, l)
		}
	}
	if len(reloaded) != 2 {
		t.Fatalf("rules reloaded lines: %v, want two", reloaded)
	}
	for i, want := range []map[string]any{changed, promoted} {
		for _, k := range []string{"request_id", "rules_added", "rules_removed", "rules_changed", "rules_promoted", "rules_demoted", "settings_changed"} {
			if !reflect.DeepEqual(reloaded[i][k], want[k]) {
				t.Errorf("rules reloaded line %d: %s = %v, want %v", i, k, reloaded[i][k], want[k])
			}
		}
	}

	for _, c := range []struct {
		series string
		want   float64
	}{
		{`guardian_admin_actions_total{action="reset",result="ok"}`, 2},
		{`guardian_admin_actions_total{action="reset",result="error"}`, 1},
		{`guardian_admin_actions_total{action="reload",result="ok"}`, 2},
		{`guardian_admin_actions_total{action="reload",result="error"}`, 1},
	} {
		if got := metric(t, in, c.series); got != c.want {
			t.Errorf("%s = %v, want %v", c.series, got, c.want)
		}
	}
	if all := strings.ToLower(logs.String()); strings.Contains(all, "alice@") || strings.Contains(all, "bob@") || strings.Contains(all, "example.com") {
		t.Errorf("an account in clear in the log:\n%s", logs.String())
	}
}

// requestID returns the X-Request-Id guardian answered r with.
func requestID(t *testing.T, r response) string {
	t.Helper()
	id := r.header.Get("X-Request-Id")
	if id == "" {
		t.Fatal("an answer without X-Request-Id")
	}
	return id
}

// TestStartLogNamesTheInstance: the start line names the instance by the id
// GET /v1/fleet lists it under, so a log and the fleet view can be matched.
func TestStartLogNamesTheInstance(t *testing.T) {
	in, logs := startLogged(t, hardStopRules)
	started := logs.lines(t, "msg", "guardian started")
	if len(started) != 1 {
		t.Fatalf("start lines: %v, want one", started)
	}
	id := in.srv.InstanceID()
	if id == "" || started[0]["instance"] != id {
		t.Errorf("start line %v: instance %v, want %q", started[0], started[0]["instance"], id)
	}
	r := in.do(t, "GET", "/v1/fleet", in.adminToken, nil)
	is, _ := r.body["instances"].([]any)
	if len(is) != 1 || is[0].(map[string]any)["id"] != id {
		t.Errorf("GET /v1/fleet lists %v, want the instance %q", is, id)
	}
}

func TestRulesFileWatched(t *testing.T) {
	in, logs := startLogged(t, hardStopRules)
	hash := func() string {
		r := in.do(t, "GET", "/v1/fleet", in.adminToken, nil)
		is, _ := r.body["instances"].([]any)
		m, _ := is[0].(map[string]any)
		return str(m["rules_hash"])
	}
	first := hash()
	if got := metric(t, in, `guardian_rules_info{hash="`+first+`"}`); got != 1 {
		t.Fatalf("guardian_rules_info of the rules loaded = %v, want 1", got)
	}
	waitRules := func(what string, want func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			h := hash()
			if want(h) {
				return h
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: rules hash still %s after 5s", what, h)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// An invalid change is refused and counted; the rules stay.
	writeFile(t, in.rulesPath, "version: 1\nrules:\n  - name: Bad\n")
	deadline := time.Now().Add(5 * time.Second)
	for metric(t, in, `guardian_rules_reloads_total{result="error"}`) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("an invalid change was not refused within 5s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if h := hash(); h != first {
		t.Fatalf("rules hash %s after an invalid change, want %s kept", h, first)
	}
	if refused := logs.lines(t, "msg", "rules reload refused, previous rules kept"); len(refused) != 1 || refused[0]["by"] != "watch" {
		t.Errorf("refusal lines: %v, want one, by watch", refused)
	}

	// A valid change is applied without a signal.
	writeFile(t, in.rulesPath, hardStopRules+"    action: slow\n")
	second := waitRules("valid change", func(h string) bool { return h != first })
	if got := metric(t, in, `guardian_rules_reloads_total{result="ok"}`); got != 1 {
		t.Errorf(`guardian_rules_reloads_total{result="ok"} = %v, want 1`, got)
	}
	if metric(t, in, `guardian_rules_info{hash="`+second+`"}`) != 1 || metric(t, in, `guardian_rules_info{hash="`+first+`"}`) != -1 {
		t.Errorf("guardian_rules_info: want the new hash alone")
	}
	// The log says who reloaded: the watcher, as docs/operations.md says.
	if reloaded := logs.lines(t, "msg", "rules reloaded"); len(reloaded) != 1 || reloaded[0]["by"] != "watch" {
		t.Errorf("reload lines: %v, want one, by watch", reloaded)
	}
}

// TestRulesSwapUnderLoad swaps the rules, ConfigMap-style, while checks run:
// every check is answered 200 or 429, none fails.
func TestRulesSwapUnderLoad(t *testing.T) {
	mount := t.TempDir()
	rulesV := func(n int) string {
		return "version: 1\nrules:\n  - {name: ip, flows: [login], key: ip, type: rate, limit: " +
			string(rune('0'+n)) + "0, per: 1m}\n"
	}
	swap := func(n int) {
		t.Helper()
		dir := filepath.Join(mount, "..v"+string(rune('0'+n)))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "rules.yaml"), rulesV(n))
		tmp := filepath.Join(mount, "..data_tmp")
		if err := os.Symlink(filepath.Base(dir), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	swap(1)
	path := filepath.Join(mount, "rules.yaml")
	if err := os.Symlink("..data/rules.yaml", path); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, server.Config{Addr: "127.0.0.1:0", SigningKey: testKey, RulesPath: path, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	in := &instance{srv: srv, base: "http://" + srv.Addr(), checkToken: mustToken(t, tokens.NewService(testKey), tokens.ScopeCheck)}
	in.adminToken = mustToken(t, tokens.NewService(testKey), tokens.ScopeAdmin)

	var stop atomic.Bool
	var answered, failed atomic.Int64
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				body := `{"flow": "login", "ip": "198.51.100.` + string(rune('0'+w)) + `"}`
				req, _ := http.NewRequest("POST", in.base+"/v1/check", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+in.checkToken)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 && resp.StatusCode != 429 {
					failed.Add(1)
				}
				answered.Add(1)
			}
		}()
	}
	limitNow := func() int64 {
		r := in.do(t, "GET", "/v1/rules", in.adminToken, nil)
		rs, _ := r.body["rules"].([]any)
		m, _ := rs[0].(map[string]any)
		return num(m["limit"])
	}
	for n := 2; n <= 4; n++ {
		swap(n)
		deadline := time.Now().Add(5 * time.Second)
		for limitNow() != int64(n*10) {
			if time.Now().After(deadline) {
				t.Fatalf("swap to v%d not applied within 5s", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	stop.Store(true)
	wg.Wait()
	if failed.Load() != 0 || answered.Load() == 0 {
		t.Errorf("%d checks answered, %d failed; want none failed", answered.Load(), failed.Load())
	}
}

// TestIncidentView counts an instance's enforced decisions and names its
// hard stops by the pseudonyms the audit lines carry.
func TestIncidentView(t *testing.T) {
	in, logs := startLogged(t, hardStopRules)
	login := map[string]any{"flow": "login", "account": "carol@example.com", "ip": "203.0.113.8"}
	for range 3 {
		in.report(t, str(in.check(t, login).body["attempt_id"]), "failure")
	}
	if r := in.check(t, login); str(r.body["decision"]) != "block" {
		t.Fatalf("check after the hard stop: %s, want block", r.raw)
	}
	started := logs.lines(t, "event", "hard_stop_started")
	if len(started) != 1 {
		t.Fatalf("hard_stop_started lines: %v", started)
	}
	r := in.do(t, "GET", "/v1/incident", in.adminToken, nil)
	if r.status != 200 {
		t.Fatalf("GET /v1/incident: %d %s", r.status, r.raw)
	}
	var v struct {
		Fleet struct {
			Available, Shared bool
		}
		Decisions []struct {
			Rule, Decision string
			Total          int
		}
		TopKeys []struct {
			Rule string
			Keys []struct{ Key string }
		} `json:"top_keys"`
		HardStops []struct{ Account string } `json:"hard_stops"`
	}
	if err := json.Unmarshal(r.raw, &v); err != nil {
		t.Fatal(err)
	}
	account := started[0]["account"]
	if !v.Fleet.Available || v.Fleet.Shared || len(v.Decisions) != 1 || v.Decisions[0].Rule != "hard-stop" || v.Decisions[0].Decision != "block" || v.Decisions[0].Total != 1 {
		t.Errorf("incident view %s: want this instance's one block by hard-stop", r.raw)
	}
	if len(v.HardStops) != 1 || v.HardStops[0].Account != account || len(v.TopKeys) != 1 || v.TopKeys[0].Keys[0].Key != account {
		t.Errorf("incident view %s: want the hard stop and top key of %s, the audit lines' pseudonym", r.raw, account)
	}
	if strings.Contains(string(r.raw), "carol") || strings.Contains(string(r.raw), "203.0.113") {
		t.Errorf("the incident view names an identifier in clear: %s", r.raw)
	}
}
