package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/logtest"
	"github.com/guardian-sec/guardian/internal/rules"
)

const testSigningKey = "guardian-cli-test-signing-key-0123456789"

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestTokenCommand(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantCode int
		wantOut  bool
	}{
		{"flag key", []string{"--scope", "check", "--signing-key", testSigningKey}, nil, exitOK, true},
		{"env key", []string{"--scope", "admin"}, map[string]string{"GUARDIAN_SIGNING_KEY": testSigningKey}, exitOK, true},
		{"no key", []string{"--scope", "admin"}, nil, exitUsage, false},
		{"short key", []string{"--scope", "admin", "--signing-key", "short"}, nil, exitUsage, false},
		{"bad scope", []string{"--scope", "root", "--signing-key", testSigningKey}, nil, exitUsage, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"token"}, tt.args...), env(tt.env), &out, &errOut)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.wantCode, errOut.String())
			}
			lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
			if tt.wantOut && (len(lines) != 1 || strings.Count(lines[0], ".") != 2) {
				t.Fatalf("stdout %q, want one JWT on one line", out.String())
			}
			if !tt.wantOut && out.Len() != 0 {
				t.Fatalf("stdout %q, want nothing", out.String())
			}
		})
	}
}

func TestFlagWinsOverEnvironment(t *testing.T) {
	var out, errOut bytes.Buffer
	// The environment's key is too short; the flag's key wins, so it works.
	code := run(context.Background(), []string{"token", "--scope", "check", "--signing-key", testSigningKey},
		env(map[string]string{"GUARDIAN_SIGNING_KEY": "short"}), &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
}

func TestRulesCheckCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("version: 1\nrules:\n  - name: a\n    flows: [login]\n    key: ip\n    type: rate\n    limit: 1\n    per: 1m\n"), 0o600)
	os.WriteFile(bad, []byte("version: 1\nrules:\n  - name: a\n    flows: [login]\n    key: ip\n    type: rate\n    limit: 0\n    per: 1m\n    colour: red\n"), 0o600)

	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"rules", "check", good}, env(nil), &out, &errOut); code != exitOK {
		t.Fatalf("valid file: exit %d, stderr %q", code, errOut.String())
	}
	set, err := rules.Load(good, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%s: 1 rules, valid, hash %s\n", good, set.Hash()); out.String() != want {
		t.Fatalf("valid file: stdout %q, want %q (the hash guardian_rules_info shows)", out.String(), want)
	}
	out.Reset()
	errOut.Reset()
	if code := run(context.Background(), []string{"rules", "check", bad}, env(nil), &out, &errOut); code != exitUsage {
		t.Fatalf("invalid file: exit %d, want 2", code)
	}
	lines := strings.Split(strings.TrimRight(errOut.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], bad+":7: ") || !strings.HasPrefix(lines[1], bad+":9: ") {
		t.Fatalf("stderr %q, want two errors, at lines 7 and 9", errOut.String())
	}
}

func TestRulesCheckProxyFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "proxy.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("version: 1\nproxies:\n  - listen: 127.0.0.1:8081\n    upstream: http://127.0.0.1:5232\n    routes:\n      - name: caldav\n        match: {path_prefix: /}\n        flow: login\n        account: {basic_auth: user}\n        outcome: {failure: [{status: 401}], success: [{status: 207}]}\n"), 0o600)
	os.WriteFile(bad, []byte("version: 1\nproxies:\n  - listen: 127.0.0.1:8081\n    upstream: ftp://x\n    routes:\n      - name: caldav\n        match: {path_prefix: /}\n        flow: login\n        account: {cookie: sid}\n        outcome: {failure: [{status: 401}], success: [{status: 207}]}\n"), 0o600)
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"rules", "check", "--proxy", good}, env(nil), &out, &errOut); code != exitOK || out.String() != good+": 1 proxies, 1 routes, valid\n" {
		t.Fatalf("valid proxy file: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"rules", "check", "--proxy", bad}, env(nil), &out, &errOut); code != exitUsage {
		t.Fatalf("invalid proxy file: exit %d, want 2", code)
	}
	lines := strings.Split(strings.TrimRight(errOut.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], bad+":4: upstream") || !strings.HasPrefix(lines[1], bad+":9: account") {
		t.Fatalf("stderr %q, want errors at lines 4 and 9", errOut.String())
	}
}

func TestServeRefusesBadNormalisationFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown fold", []string{"--account-fold", "case"}, nil, `guardian serve: --account-fold: "case" is not accents`},
		{"not a region", []string{"--default-region", "UK"}, nil, `guardian serve: --default-region: keys: invalid default region: "UK" is not an ISO 3166-1 alpha-2 region with phone numbering metadata`},
		{"region from the environment", nil, map[string]string{"GUARDIAN_DEFAULT_REGION": "GBR"}, `guardian serve: --default-region: keys: invalid default region: "GBR" is not`},
		{"fold from the environment", nil, map[string]string{"GUARDIAN_ACCOUNT_FOLD": "none"}, `guardian serve: --account-fold: "none" is not accents`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"serve", "--addr", "127.0.0.1:0"}, tt.args...), env(tt.env), &out, &errOut)
			if code != exitUsage || !strings.HasPrefix(errOut.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, errOut.String(), tt.want)
			}
		})
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"frobnicate"}, env(nil), &out, &errOut); code != exitUsage {
		t.Fatalf("exit %d, want 2", code)
	}
}

// TestServeReloadsOnSIGHUPAndDrainsOnSIGTERM runs the real binary.
func TestServeReloadsOnSIGHUPAndDrainsOnSIGTERM(t *testing.T) {
	bin := guardianBinary(t)
	rulesPath := filepath.Join(t.TempDir(), "rules.yaml")
	write := func(burst string) {
		t.Helper()
		yaml := "version: 1\nrules:\n  - name: r\n    flows: [login]\n    key: ip\n    type: rate\n    limit: 1\n    per: 1m\n    burst: " + burst + "\n"
		if err := os.WriteFile(rulesPath, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("3")
	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--addr", addr, "--rules", rulesPath)
	cmd.Env = append(os.Environ(), "GUARDIAN_SIGNING_KEY="+testSigningKey, "GUARDIAN_LOG_FORMAT=text")
	var stderr logtest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	var tok bytes.Buffer
	if code := run(context.Background(), []string{"token", "--scope", "admin", "--signing-key", testSigningKey}, env(nil), &tok, &bytes.Buffer{}); code != 0 {
		t.Fatal("token failed")
	}
	burst := func() float64 {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/rules", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(tok.String()))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var body struct {
			Rules []struct {
				Burst float64 `json:"burst"`
			} `json:"rules"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Rules) != 1 {
			t.Fatalf("GET /v1/rules: %v", err)
		}
		return body.Rules[0].Burst
	}
	waitFor(t, func() bool { return burst() == 3 })

	write("7")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return burst() == 7 })

	os.WriteFile(rulesPath, []byte("version: 1\nrules: nonsense\n"), 0o600)
	cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "reload refused") })
	if got := burst(); got != 7 {
		t.Fatalf("burst after an invalid reload = %v, want 7 (old rules kept)", got)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("guardian did not exit within 10s of SIGTERM")
	}
}

// TestDevModePrintsAToken checks the development mode start: a warning and one
// admin token on stderr.
func TestDevModePrintsAToken(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var errOut logtest.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, env(nil), &bytes.Buffer{}, &errOut)
	}()
	waitFor(t, func() bool { return strings.Contains(errOut.String(), "development token") })
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d", code)
	}
	out := errOut.String()
	if !strings.Contains(out, "DEVELOPMENT MODE: no --signing-key or --signing-key-file (GUARDIAN_SIGNING_KEY)") {
		t.Fatalf("no warning naming the documented flags in %q", out)
	}
	if n := strings.Count(out, "eyJhbGci"); n != 1 { // a JWT header starts so
		t.Fatalf("%d tokens printed, want 1", n)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDevModeInvalidRulesPrintsNoToken: a start that an invalid rules file
// aborts says why, once, and prints no development token.
func TestDevModeInvalidRulesPrintsNoToken(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nrules: nonsense\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0", "--rules", bad}, env(nil), &out, &errOut)
	if code != exitFailure {
		t.Fatalf("exit %d, want 1; stderr %q", code, errOut.String())
	}
	if strings.Contains(errOut.String(), "eyJhbGci") || strings.Contains(errOut.String(), "development token") {
		t.Fatalf("a token was printed before the start failed: %q", errOut.String())
	}
	if n := strings.Count(errOut.String(), "cannot start"); n != 1 {
		t.Fatalf("%d lines say the start failed, want 1: %q", n, errOut.String())
	}
}

// TestServeLogIsJSONWithRedisDown: with Redis refusing connections, every
// line serve writes is JSON: go-redis's own lines go through guardian's
// log, at debug level.
func TestServeLogIsJSONWithRedisDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var errOut logtest.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--redis-url", "redis://" + freeAddr(t), "--log-level", "debug"},
			env(map[string]string{"GUARDIAN_SIGNING_KEY": testSigningKey}), &bytes.Buffer{}, &errOut)
	}()
	waitFor(t, func() bool { return strings.Contains(errOut.String(), "guardian started") })
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d", code)
	}
	redisLines := 0
	for _, rec := range logtest.JSONLines(t, errOut.String()) {
		if rec["msg"] == "redis client" {
			redisLines++
			if rec["level"] != "DEBUG" {
				t.Errorf("go-redis line at %v, want DEBUG: %v", rec["level"], rec)
			}
		}
	}
	if redisLines == 0 {
		t.Fatalf("no go-redis line in the log, want its failed dials at debug level:\n%s", errOut.String())
	}
}

// TestLogDurationsAreStrings: every duration guardian logs, in either
// format, at the top level or in a group, reads as Go writes it.
func TestLogDurationsAreStrings(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var buf bytes.Buffer
		log, err := newLogger(format, "info", &buf)
		if err != nil {
			t.Fatal(err)
		}
		log.With("held", 90*24*time.Hour).Info("m", "left", 24*time.Hour, slog.Group("g", slog.Duration("took", 1500*time.Microsecond)),
			slog.Any("any", 5*time.Millisecond))
		out := buf.String()
		for _, want := range []string{"2160h0m0s", "24h0m0s", "1.5ms", "5ms"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: %q lacks %s", format, out, want)
			}
		}
		if strings.Contains(out, "86400000000000") || strings.Contains(out, "1500000") {
			t.Errorf("%s: a duration in nanoseconds in %q", format, out)
		}
	}
}

// TestServeLogsDurationsAsStrings runs serve and reads a duration it logs
// (a request's took, at debug level) off its JSON log.
func TestServeLogsDurationsAsStrings(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addr := freeAddr(t)
	var errOut logtest.Buffer
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--log-level", "debug"},
			env(map[string]string{"GUARDIAN_SIGNING_KEY": testSigningKey}), &bytes.Buffer{}, &errOut)
	}()
	waitFor(t, func() bool { return strings.Contains(errOut.String(), "guardian started") })
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, func() bool { return strings.Contains(errOut.String(), `"took"`) })
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d", code)
	}
	durations := 0
	for _, rec := range logtest.JSONLines(t, errOut.String()) {
		for _, k := range []string{"took", "left", "after"} {
			v, ok := rec[k]
			if !ok {
				continue
			}
			s, isString := v.(string)
			if _, err := time.ParseDuration(s); !isString || err != nil {
				t.Errorf("%s = %v (%T) in %v, want a duration string", k, v, v, rec)
			}
			durations++
		}
	}
	if durations == 0 {
		t.Fatalf("no duration in the log:\n%s", errOut.String())
	}
}
