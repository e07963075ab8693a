package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/replay"
	"github.com/guardian-sec/guardian/internal/tokens"

	"github.com/guardian-sec/guardian/internal/logtest"
)

const replayRules = `version: 1
rules:
  - name: acct
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 2
  - name: net
    flows: [login]
    key: ip
    ipv4_prefix: 24
    type: rate
    limit: 1
    per: 1h
    burst: 3
    mode: shadow
`

// replayEvents: alice fails four times from one /24 (a malformed line and
// an unknown type among them), then bob once.
const replayEvents = `{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"a1","flow":"login","account":"alice","ip":"192.0.2.1"}
{"ts":"2026-11-29T10:00:00.100Z","type":"report","id":"a1","outcome":"failure"}
{"ts":"2026-11-29T10:00:01.000Z","type":"check","id":"a2","flow":"login","account":"Alice","ip":"192.0.2.2"}
{"ts":"2026-11-29T10:00:01.100Z","type":"report","id":"a2","outcome":"failure"}
{"ts":"2026-11-29T10:00:02.000Z","type":"check","id":"a3","flow":"login","account":"alice","ip":"192.0.2.3"
{"ts":"2026-11-29T10:00:02.500Z","type":"logout","id":"a3"}
{"ts":"2026-11-29T10:00:03.000Z","type":"check","id":"a4","flow":"login","account":"alice","ip":"192.0.2.4"}
{"ts":"2026-11-29T10:00:04.000Z","type":"check","id":"b1","flow":"login","account":"bob","ip":"192.0.2.5"}
`

// replayFiles writes the rules and events into a temporary directory.
func replayFiles(t *testing.T) (rulesPath, eventsPath string) {
	t.Helper()
	dir := t.TempDir()
	rulesPath, eventsPath = filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "events.jsonl")
	writeTestFile(t, rulesPath, replayRules)
	writeTestFile(t, eventsPath, replayEvents)
	return rulesPath, eventsPath
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func runCLI(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, env(nil), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestReplayCommandPrintsATable(t *testing.T) {
	rulesPath, eventsPath := replayFiles(t)
	code, out, errOut := runCLI("replay", "--rules", rulesPath, eventsPath)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"events: 4 checks and 2 reports on 8 lines",
		"malformed lines skipped: 2",
		"acct  enforce  4       1           0            0                1",
		"net   shadow   4       1           0            0                1",
		"acct  2026-11-29T10:00:03.000Z  slow  alice",
		"net   2026-11-29T10:00:04.000Z  slow  192.0.2.0/24",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	wantErr := eventsPath + ":5: replay: malformed event: not a complete JSON object\n" +
		eventsPath + ":6: replay: unknown event type: \"logout\"\n"
	if errOut != wantErr {
		t.Errorf("stderr = %q, want %q", errOut, wantErr)
	}
}

func TestReplayCommandJSON(t *testing.T) {
	rulesPath, eventsPath := replayFiles(t)
	// Flags may follow the events file.
	code, out, errOut := runCLI("replay", eventsPath, "--format", "json", "--rules", rulesPath)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var got replay.Summary
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not a summary: %v\n%s", err, out)
	}
	if got.Input.Checks != 4 || got.Input.Malformed != 2 || len(got.Rules) != 2 {
		t.Fatalf("summary = %+v", got)
	}
	if r := got.Rules[0]; r.Rule != "acct" || r.Checks != 4 || r.WouldSlow != 1 || r.KeysHit != 1 || len(r.FirstLimited) != 1 {
		t.Errorf("acct = %+v", r)
	}
}

func TestReplayCommandCompare(t *testing.T) {
	rulesPath, eventsPath := replayFiles(t)
	newPath := filepath.Join(t.TempDir(), "new.yaml")
	writeTestFile(t, newPath, strings.NewReplacer("mode: shadow", "mode: enforce", "burst: 3", "burst: 2").Replace(replayRules))
	code, out, errOut := runCLI("replay", "--compare", "--format", "json", rulesPath, newPath, eventsPath)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var got replay.Comparison
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not a comparison: %v\n%s", err, out)
	}
	// Enforced, net (two checks per /24) would slow bob: the check alice
	// makes in between is slowed by acct, so it spends nothing on net.
	if got.Changed != 1 || len(got.Changes) != 1 || got.Changes[0].To.Rule != "net" || got.Changes[0].From.Rule != "" {
		t.Fatalf("comparison = %+v", got)
	}

	code, out, _ = runCLI("replay", "--compare", rulesPath, newPath, eventsPath)
	if code != exitOK || !strings.Contains(out, "NEW decides 1 of 4 checks differently") || !strings.Contains(out, "allow  slow by net  1") {
		t.Fatalf("exit %d, table:\n%s", code, out)
	}
}

func TestReplayCommandRefusesInvalidRules(t *testing.T) {
	_, eventsPath := replayFiles(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	writeTestFile(t, bad, "version: 1\nrules:\n  - name: a\n    flows: [login]\n    key: ip\n    type: rate\n    limit: 0\n    per: 1m\n    colour: red\n")
	for _, args := range [][]string{
		{"replay", "--rules", bad, eventsPath},
		{"replay", "--compare", bad, bad, eventsPath},
	} {
		code, out, errOut := runCLI(args...)
		if code != exitUsage || out != "" {
			t.Fatalf("%v: exit %d, stdout %q; want 2 and nothing", args, code, out)
		}
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if len(lines)%2 != 0 || !strings.HasPrefix(lines[0], bad+":7: ") || !strings.HasPrefix(lines[1], bad+":9: ") {
			t.Fatalf("%v: stderr %q, want the errors at lines 7 and 9 of each file", args, errOut)
		}
	}
}

func TestReplayCommandUsage(t *testing.T) {
	rulesPath, eventsPath := replayFiles(t)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no rules", []string{eventsPath}, exitUsage, "--rules FILE is required"},
		{"no events", []string{"--rules", rulesPath}, exitUsage, "want one or more events files"},
		{"standard input twice", []string{"--rules", rulesPath, "-", eventsPath, "-"}, exitUsage, "standard input (-) given twice"},
		{"rules and compare", []string{"--rules", rulesPath, "--compare", rulesPath, rulesPath, eventsPath}, exitUsage, "not both"},
		{"compare of two", []string{"--compare", rulesPath, eventsPath}, exitUsage, "--compare takes OLD.yaml NEW.yaml EVENTS.jsonl..."},
		{"bad format", []string{"--rules", rulesPath, "--format", "xml", eventsPath}, exitUsage, `"xml" is not table or json`},
		{"unknown flag", []string{"--rule", rulesPath, eventsPath}, exitUsage, "guardian replay: unknown flag --rule"},
		{"missing events", []string{"--rules", rulesPath, filepath.Join(t.TempDir(), "none.jsonl")}, exitFailure, "no such file"},
		{"missing rules", []string{"--rules", filepath.Join(t.TempDir(), "none.yaml"), eventsPath}, exitUsage, "none.yaml: cannot read the rules file: no such file or directory"},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(append([]string{"replay"}, tt.args...)...)
		if code != tt.code || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d, nothing, and %q", tt.name, code, out, errOut, tt.code, tt.want)
		}
	}
}

// TestReplayCommandReadsStandardInput runs the real binary, events piped in.
func TestReplayCommandReadsStandardInput(t *testing.T) {
	bin := guardianBinary(t)
	rulesPath, _ := replayFiles(t)
	cmd := exec.Command(bin, "replay", "--format", "json", "--rules", rulesPath, "-")
	cmd.Stdin = strings.NewReader(replayEvents)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v, stderr %q", err, stderr.String())
	}
	var got replay.Summary
	if err := json.Unmarshal(out, &got); err != nil || got.Input.Checks != 4 {
		t.Fatalf("summary %+v, %v", got, err)
	}
	if !strings.Contains(stderr.String(), "-:5: replay: malformed event") {
		t.Errorf("stderr %q, want the malformed line of standard input", stderr.String())
	}
}

// TestServeWritesADecisionLog runs serve with --decision-log, makes a
// check and a report, stops, and replays the log.
func TestServeWritesADecisionLog(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "decisions.jsonl")
	rulesPath := filepath.Join(dir, "rules.yaml")
	writeTestFile(t, rulesPath, replayRules)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var errOut logtest.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--rules", rulesPath, "--decision-log", logPath},
			env(map[string]string{"GUARDIAN_SIGNING_KEY": testSigningKey}), &bytes.Buffer{}, &errOut)
	}()
	key, _, _ := (&keyFlags{key: testSigningKey}).load()
	tok, err := tokens.NewService(key).Issue(tokens.ScopeCheck, "test", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, body string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	for range 3 {
		d := post("/v1/check", `{"flow":"login","account":"Carol@Example.com","ip":"198.51.100.20"}`)
		if id, _ := d["attempt_id"].(string); id != "" {
			post("/v1/report", `{"attempt_id":"`+id+`","outcome":"failure"}`)
		}
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("serve exit %d: %s", code, errOut.String())
	}
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(string(data)), "carol") || strings.Contains(string(data), "198.51.100.20") {
		t.Fatalf("the decision log holds an identifier in clear:\n%s", data)
	}
	if info, _ := os.Stat(logPath); info.Mode().Perm() != 0o600 {
		t.Errorf("decision log mode %v, want 0600", info.Mode().Perm())
	}
	// Three checks (the third slowed by acct, burst 2) and two reports.
	code, out, errOut2 := runCLI("replay", "--format", "json", "--rules", rulesPath, logPath)
	if code != exitOK {
		t.Fatalf("replay of the decision log: exit %d, %s", code, errOut2)
	}
	var got replay.Summary
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Input.Checks != 3 || got.Input.Reports != 2 || got.Input.Malformed != 0 || got.Reports.Applied != 2 || got.Rules[0].WouldSlow != 1 {
		t.Fatalf("replay of the decision log = %+v\n%s", got, data)
	}
}

// progressOnly reports whether stderr holds nothing but progress lines,
// which a slow run prints.
func progressOnly(stderr string) bool {
	for _, l := range strings.Split(strings.TrimSuffix(stderr, "\n"), "\n") {
		if l != "" && !regexp.MustCompile(`^guardian replay: \d+ lines .*elapsed$`).MatchString(l) {
			return false
		}
	}
	return true
}

// tuningReplayRules have the rules whose counts a replay's own keys could
// move: a distinct count, a key: secret rule and the global failure rate.
const tuningReplayRules = `version: 1
rules:
  - name: login-ip-distinct-accounts
    flows: [login]
    key: ip
    type: distinct
    of: account
    count: failures
    limit: 20
    per: 24h
    ipv4_prefix: 24
  - name: login-secret-spray
    flows: [login]
    key: secret
    type: rate
    count: failures
    limit: 10
    per: 10m
    burst: 10
    action: challenge
  - name: login-global-failures
    flows: [login]
    key: global
    type: failure_rate
    limit: 200
    per: 1m
    hysteresis: 0s
`

// tuningEvents writes two instances' logs of a spray: 20 /24s each failing
// 20 to 27 accounts with one of three passwords, their checks dealt to
// the instances in turn, each report to the other instance; and between
// the sprayed checks, users logging in.
func tuningEvents(t *testing.T) (a, b string) {
	t.Helper()
	var logs [2]strings.Builder
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	n := 0
	for net := range 20 {
		for acct := range 20 + net%8 {
			at := t0.Add(time.Duration(n) * 25 * time.Millisecond)
			id := fmt.Sprintf("s%d", n)
			fmt.Fprintf(&logs[n%2], `{"ts":%q,"type":"check","id":%q,"flow":"login","account":"u%d-%d","ip":"198.18.%d.%d","secret_fingerprint":"fp-common-%08d"}`+"\n",
				at.Format(event.TimeLayout), id, net, acct, net, acct+1, acct%3)
			fmt.Fprintf(&logs[(n+1)%2], `{"ts":%q,"type":"report","id":%q,"outcome":"failure"}`+"\n", at.Add(10*time.Millisecond).Format(event.TimeLayout), id)
			if n%5 == 0 {
				at := at.Add(12 * time.Millisecond)
				fmt.Fprintf(&logs[(n+1)%2], `{"ts":%q,"type":"check","id":"ok%d","flow":"login","account":"user%d","ip":"10.0.%d.1","secret_fingerprint":"fp-user-%08d-right"}`+"\n",
					at.Format(event.TimeLayout), n, n, n%250, n)
				fmt.Fprintf(&logs[n%2], `{"ts":%q,"type":"report","id":"ok%d","outcome":"success"}`+"\n", at.Add(5*time.Millisecond).Format(event.TimeLayout), n)
			}
			n++
		}
	}
	return logs[0].String(), logs[1].String()
}

// TestReplayCommandIsDeterministic runs replay 20 times over two
// instances' logs, as a table, as JSON and as a comparison, and wants the
// same bytes every time; and the two logs merged give what their events in
// one file give. The first run is in this process (under the race
// detector when the tests are), every other a process of its own, so that
// nothing a process draws once, a hash seed, can vary the output unseen.
func TestReplayCommandIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	rulesPath, oldPath := filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "old.yaml")
	writeTestFile(t, rulesPath, tuningReplayRules)
	writeTestFile(t, oldPath, strings.Replace(tuningReplayRules, "limit: 20\n", "limit: 25\n", 1))
	a, b := tuningEvents(t)
	aPath, bPath := filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "b.jsonl")
	writeTestFile(t, aPath, a)
	writeTestFile(t, bPath, b)
	variants := [][]string{
		{"replay", "--rules", rulesPath, aPath, bPath},
		{"replay", "--format", "json", "--rules", rulesPath, aPath, bPath},
		{"replay", "--compare", oldPath, rulesPath, aPath, bPath},
		{"replay", "--compare", "--format", "json", oldPath, rulesPath, aPath, bPath},
	}
	first := make([]string, len(variants))
	bin := guardianBinary(t)
	for i := range 20 {
		for j, args := range variants {
			var code int
			var out, errOut string
			if i == 0 {
				code, out, errOut = runCLI(args...)
			} else {
				code, out, errOut = runProcess(t, bin, args...)
			}
			if code != exitOK || !progressOnly(errOut) {
				t.Fatalf("%v: exit %d, stderr %q; want 0 and no more than progress", args, code, errOut)
			}
			if i == 0 {
				first[j] = out
			} else if out != first[j] {
				t.Fatalf("%v: run %d differs from run 0:\n%s\n---\n%s", args, i, out, first[j])
			}
		}
	}
	var s replay.Summary
	if err := json.Unmarshal([]byte(first[1]), &s); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.Rules {
		if r.WouldSlow+r.WouldBlock+r.WouldChallenge == 0 {
			t.Errorf("%s never trips: the logs prove nothing about it", r.Rule)
		}
	}
	if s.Input.OutOfOrder != 0 || s.Reports.NoCheck != 0 {
		t.Errorf("merged input %+v, reports %+v: want every event in order, every report finding its check", s.Input, s.Reports)
	}

	// The same events in one file, in time order: the same summary.
	lines := strings.Split(strings.TrimSpace(a+b), "\n")
	slices.SortStableFunc(lines, func(x, y string) int { return strings.Compare(x[7:31], y[7:31]) })
	onePath := filepath.Join(dir, "one.jsonl")
	writeTestFile(t, onePath, strings.Join(lines, "\n")+"\n")
	code, one, errOut := runCLI("replay", "--format", "json", "--rules", rulesPath, onePath)
	if code != exitOK {
		t.Fatalf("one file: exit %d, stderr %q", code, errOut)
	}
	if one != first[1] {
		t.Errorf("two logs merged:\n%s\nwant what one file gives:\n%s", first[1], one)
	}
}
