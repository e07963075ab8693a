package server_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/breached"
	"github.com/guardian-sec/guardian/internal/breached/breachedtest"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// johnFilter builds a filter of John the Ripper's list into a file, and
// returns its path and the passwords.
func johnFilter(t *testing.T) (string, []string) {
	t.Helper()
	pws := breachedtest.JohnPasswords(t)
	return breachedtest.File(t, breached.Plain, pws...), pws
}

// startBreached runs an instance with the filter at path, logging JSON to
// the returned buffer.
func startBreached(t *testing.T, path string, cfg server.Config) (*instance, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cfg.BreachedPath = path
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	inst := startConfig(t, "", cfg)
	return inst, logs
}

func (in *instance) passwordCheck(t *testing.T, password string) response {
	t.Helper()
	return in.do(t, http.MethodPost, "/v1/passwords/check", in.checkToken, map[string]string{"sha1": breachedtest.SHA1(password)})
}

// breachedOf returns whether in answers password breached, failing on an
// error answer.
func (in *instance) breachedOf(t *testing.T, password string) bool {
	t.Helper()
	r := in.passwordCheck(t, password)
	b, ok := r.body["breached"].(bool)
	if r.status != http.StatusOK || !ok || len(r.body) != 1 {
		t.Fatalf("POST /v1/passwords/check: %d %s", r.status, r.raw)
	}
	return b
}

// rulesBreached is the breached object of GET /v1/rules, nil when absent.
func (in *instance) rulesBreached(t *testing.T) map[string]any {
	t.Helper()
	r := in.do(t, http.MethodGet, "/v1/rules", in.adminToken, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/rules: %d %s", r.status, r.raw)
	}
	m, _ := r.body["breached"].(map[string]any)
	return m
}

func TestBreachedFilterFromJohnTheRipper(t *testing.T) {
	path, pws := johnFilter(t)
	in, logs := startBreached(t, path, server.Config{})
	for _, p := range pws {
		if !in.breachedOf(t, p) {
			t.Fatalf("%q is in the list, answered not breached", p)
		}
	}
	if in.breachedOf(t, "correct horse battery staple, but longer") {
		t.Error("a long passphrase answered breached")
	}
	got := in.rulesBreached(t)
	if got["source"] != path || got["format"] != "plain" || got["digest"] != "sha1" || num(got["entries"]) != int64(len(pws)) {
		t.Errorf("GET /v1/rules breached: %v", got)
	}
	if v := metric(t, in, "guardian_breached_entries"); v != float64(len(pws)) {
		t.Errorf("guardian_breached_entries %v, want %d", v, len(pws))
	}
	if lines := logs.lines(t, "msg", "breached-password filter loaded"); len(lines) != 1 || lines[0]["source"] != path {
		t.Errorf("load log lines: %v", lines)
	}
}

func TestBreachedCheckField(t *testing.T) {
	in, _ := startBreached(t, breachedtest.File(t, breached.Plain, "hunter2"), server.Config{})
	r := in.check(t, map[string]any{"flow": "login", "account": "alice", "ip": "203.0.113.7", "password_sha1": breachedtest.SHA1("hunter2")})
	if r.status != http.StatusOK || r.body["breached"] != true || r.body["decision"] != "allow" {
		t.Errorf("check with a breached password_sha1: %d %s", r.status, r.raw)
	}
	r = in.check(t, map[string]any{"flow": "login", "account": "alice", "ip": "203.0.113.7", "password_sha1": "hunter2"})
	if r.status != http.StatusBadRequest || errorCode(t, r) != "invalid_field" {
		t.Errorf("check with a password for password_sha1: %d %s", r.status, r.raw)
	}
}

func TestBreachedWithoutFilter(t *testing.T) {
	in := start(t, "")
	r := in.passwordCheck(t, "password")
	if r.status != http.StatusNotFound || errorCode(t, r) != "not_found" || !strings.Contains(str(r.body["error"].(map[string]any)["message"]), "--breached") {
		t.Errorf("without a filter: %d %s", r.status, r.raw)
	}
	r = in.check(t, map[string]any{"flow": "login", "account": "alice", "ip": "203.0.113.7", "password_sha1": breachedtest.SHA1("password")})
	if _, ok := r.body["breached"]; r.status != http.StatusOK || ok {
		t.Errorf("a check with password_sha1 without a filter: %d %s", r.status, r.raw)
	}
	if in.rulesBreached(t) != nil {
		t.Error("GET /v1/rules shows a filter")
	}
	if v := metric(t, in, "guardian_breached_entries"); v != 0 {
		t.Errorf("guardian_breached_entries %v, want 0", v)
	}
}

func TestBreachedNTLMFilterAnswersNoSHA1(t *testing.T) {
	in, logs := startBreached(t, breachedtest.File(t, breached.NTLM, "password"), server.Config{})
	r := in.passwordCheck(t, "password")
	if r.status != http.StatusNotFound || !strings.Contains(string(r.raw), "NTLM") {
		t.Errorf("a SHA-1 lookup in an NTLM filter: %d %s", r.status, r.raw)
	}
	if got := in.rulesBreached(t); got["digest"] != "ntlm" {
		t.Errorf("GET /v1/rules breached: %v", got)
	}
	if !strings.Contains(logs.String(), "holds NTLM hashes") {
		t.Error("no warning that the NTLM filter answers no SHA-1")
	}
}

// TestBreachedUnusableFileStopsTheStart: a corrupted, truncated, foreign or
// missing file is refused by New with an error naming the file and what is
// wrong with it.
func TestBreachedUnusableFileStopsTheStart(t *testing.T) {
	good, err := os.ReadFile(breachedtest.File(t, breached.Plain, "123456", "password"))
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[100] ^= 1
	dir := t.TempDir()
	for _, tc := range []struct {
		name, errHas string
		data         []byte
	}{
		{"corrupted", "checksum mismatch: the file is corrupted", flipped},
		{"truncated", "cut short", good[:len(good)/2]},
		{"a password list", "no filter header", []byte("123456\npassword\n")},
		{"missing", "no such file", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".bgf")
			if tc.data != nil {
				writeFile(t, path, string(tc.data))
			}
			srv, err := server.New(server.Config{Addr: "127.0.0.1:0", SigningKey: testKey, BreachedPath: path,
				Logger: slog.New(slog.NewTextHandler(&logBuffer{}, nil))})
			if err == nil {
				_ = srv.Shutdown(t.Context())
				t.Fatal("New accepted it")
			}
			if msg := err.Error(); !strings.Contains(msg, "--breached") || !strings.Contains(msg, path) || !strings.Contains(msg, tc.errHas) {
				t.Errorf("New: %v; want --breached, the path and %q", err, tc.errHas)
			}
			if tc.data != nil && !errors.Is(err, breached.ErrInvalidFile) {
				t.Errorf("New: %v, want ErrInvalidFile", err)
			}
		})
	}
}

// TestBreachedReload: a reload of a corrupted file keeps the filter in use,
// answering as before over HTTP; a reload of a new file swaps it in; a
// reload of an unchanged file reads nothing.
func TestBreachedReload(t *testing.T) {
	path, pws := johnFilter(t)
	in, logs := startBreached(t, path, server.Config{})
	before := in.rulesBreached(t)
	if !in.breachedOf(t, pws[0]) {
		t.Fatalf("%q not breached", pws[0])
	}

	// An unchanged file: kept as it is.
	if err := in.srv.ReloadBreached(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "breached-password filter unchanged, kept") {
		t.Error("no log line for a reload of an unchanged file")
	}

	// Corrupted in place (a copy cut short, then a flipped byte): refused.
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 0x40
	for i, data := range [][]byte{good[:len(good)-100], bad} {
		writeFile(t, path, string(data))
		// Past the loaded file's time whatever the file system's
		// granularity: a file of the same size is seen as changed.
		later := time.Now().Add(time.Duration(i+1) * time.Minute)
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
		err := in.srv.ReloadBreached()
		if !errors.Is(err, breached.ErrInvalidFile) {
			t.Fatalf("ReloadBreached of a bad file: %v, want ErrInvalidFile", err)
		}
		for _, p := range pws[:50] {
			if !in.breachedOf(t, p) {
				t.Fatalf("after a refused reload, %q answers not breached", p)
			}
		}
		if got := in.rulesBreached(t); got["sha256"] != before["sha256"] || got["loaded_at"] != before["loaded_at"] {
			t.Errorf("after a refused reload GET /v1/rules shows %v, want %v", got, before)
		}
		if v := metric(t, in, "guardian_breached_entries"); v != float64(len(pws)) {
			t.Errorf("guardian_breached_entries %v after a refused reload", v)
		}
	}
	refused := logs.lines(t, "msg", "breached-password filter reload refused, previous filter kept")
	if len(refused) != 2 || !strings.Contains(str(refused[1]["err"]), "checksum mismatch") || refused[1]["sha256"] != before["sha256"] {
		t.Errorf("refusals logged: %v", refused)
	}

	// A new file, renamed into place: swapped in.
	next := breachedtest.File(t, breached.SHA1, "a-new-password", "another-one")
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	if err := in.srv.ReloadBreached(); err != nil {
		t.Fatal(err)
	}
	if !in.breachedOf(t, "a-new-password") {
		t.Error("the new filter is not in use")
	}
	if got := in.rulesBreached(t); got["format"] != "sha1" || num(got["entries"]) != 2 {
		t.Errorf("GET /v1/rules after the reload: %v", got)
	}
	if v := metric(t, in, "guardian_breached_entries"); v != 2 {
		t.Errorf("guardian_breached_entries %v, want 2", v)
	}
}

// TestBreachedAnswersLeaveNoTrace: neither the hash nor the answer reaches
// a log line (at debug level), the decision log, an audit line or
// /metrics, and a check carrying a breached password_sha1 counts exactly as
// the same check without it.
func TestBreachedAnswersLeaveNoTrace(t *testing.T) {
	const pw = "hunter2"
	decisions, logs := &logBuffer{}, &logBuffer{}
	srv, err := server.New(server.Config{
		Addr: "127.0.0.1:0", SigningKey: testKey, BreachedPath: breachedtest.File(t, breached.Plain, pw), DecisionLog: decisions,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(stop)
	svc := tokens.NewService(testKey)
	in := &instance{srv: srv, base: "http://" + srv.Addr(), checkToken: mustToken(t, svc, tokens.ScopeCheck), adminToken: mustToken(t, svc, tokens.ScopeAdmin)}
	sum := breached.SHA1Sum(pw)
	lower := hex.EncodeToString(sum[:])
	forms := []string{lower, strings.ToUpper(lower), base64.StdEncoding.EncodeToString(sum[:]), base64.RawURLEncoding.EncodeToString(sum[:]), string(sum[:8])}

	for i := range 3 {
		r := in.check(t, map[string]any{"flow": "login", "account": "with-hash", "ip": "203.0.113.7", "password_sha1": strings.ToUpper(lower)})
		if r.body["breached"] != true {
			t.Fatalf("check %d: %s", i, r.raw)
		}
		in.report(t, str(r.body["attempt_id"]), "failure")
		r = in.check(t, map[string]any{"flow": "login", "account": "without-hash", "ip": "198.51.100.7"})
		in.report(t, str(r.body["attempt_id"]), "failure")
		if !in.breachedOf(t, pw) {
			t.Fatal("not breached")
		}
	}
	// The answers are the check's own: the two accounts count alike (to
	// the millisecond their checks were apart).
	status := func(account string) string {
		r := in.do(t, http.MethodGet, "/v1/accounts/status?account="+account, in.adminToken, nil)
		var st struct {
			Blocked             bool  `json:"blocked"`
			ConsecutiveFailures int64 `json:"consecutive_failures"`
			RememberedGuesses   int64 `json:"remembered_guesses"`
			Limits              []struct {
				Rule      string `json:"rule"`
				Remaining int64  `json:"remaining"`
			} `json:"limits"`
		}
		if err := json.Unmarshal(r.raw, &st); err != nil || r.status != http.StatusOK {
			t.Fatalf("status: %d %s", r.status, r.raw)
		}
		return fmt.Sprintf("%+v", st)
	}
	if a, b := status("with-hash"), status("without-hash"); a != b {
		t.Errorf("status with password_sha1 %s, without %s", a, b)
	}
	in.do(t, http.MethodPost, "/v1/accounts/reset", in.adminToken, map[string]string{"account": "with-hash"})
	resp, err := http.Get(in.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	stop() // the decision log is written out
	for what, text := range map[string]string{"log": logs.String(), "decision log": decisions.String(), "metrics": string(metrics)} {
		if text == "" && what != "metrics" {
			t.Errorf("the %s is empty: the test saw nothing", what)
		}
		for _, f := range forms {
			if strings.Contains(text, f) {
				t.Errorf("the %s holds the hash (%q)", what, f)
			}
		}
		if strings.Contains(text, "breached\":") || strings.Contains(text, "breached=") {
			t.Errorf("the %s holds an answer", what)
		}
	}
	if strings.Count(decisions.String(), "\n") < 12 {
		t.Errorf("decision log of %d lines, want every check and report", strings.Count(decisions.String(), "\n"))
	}
	if !strings.Contains(logs.String(), `"audit":true`) {
		t.Error("no audit line: the test saw no admin action")
	}
	if !strings.Contains(logs.String(), `"route":"/v1/passwords/check"`) {
		t.Error("no debug line of a password check: the test saw no request log")
	}
}

// TestBreachedTokens: the call takes a check or an admin token, and no
// other.
func TestBreachedTokens(t *testing.T) {
	in, _ := startBreached(t, breachedtest.File(t, breached.Plain, "x"), server.Config{})
	body := map[string]string{"sha1": breachedtest.SHA1("x")}
	if r := in.do(t, http.MethodPost, "/v1/passwords/check", "", body); r.status != http.StatusUnauthorized {
		t.Errorf("no token: %d", r.status)
	}
	other := mustToken(t, tokens.NewService(mustKey(t, "another-signing-key-0123456789abcdef")), tokens.ScopeCheck)
	if r := in.do(t, http.MethodPost, "/v1/passwords/check", other, body); r.status != http.StatusUnauthorized {
		t.Errorf("a token of another key: %d", r.status)
	}
	if r := in.do(t, http.MethodPost, "/v1/passwords/check", in.adminToken, body); r.status != http.StatusOK || r.body["breached"] != true {
		t.Errorf("an admin token: %d %s", r.status, r.raw)
	}
}
