package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/guardian-sec/guardian/internal/version"
)

var update = flag.Bool("update", false, "rewrite the golden files of the command line tests and README.md's generated tables")

// TestCLIGolden runs the command line as a user would and compares what it
// prints, and its exit status, with testdata/cli/NAME.golden (go test
// -run TestCLIGolden -update rewrites them).
func TestCLIGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"help", []string{"--help"}, nil},
		{"help-short", []string{"-h"}, nil},
		{"help-command", []string{"help"}, nil},
		{"serve-help", []string{"serve", "--help"}, nil},
		{"token-help", []string{"token", "--help"}, nil},
		{"rules-check-help", []string{"rules", "check", "--help"}, nil},
		{"rules-help", []string{"rules", "--help"}, nil},
		{"replay-help", []string{"replay", "--help"}, nil},
		{"simulate-help", []string{"simulate", "--help"}, nil},
		{"simulate-unknown-scenario", []string{"simulate", "--scenario", "phishing"}, nil},
		{"breached-help", []string{"breached", "--help"}, nil},
		{"breached-build-help", []string{"breached", "build", "--help"}, nil},
		{"version", []string{"version"}, nil},
		{"pseudonym-help", []string{"pseudonym", "--help"}, nil},
		{"version-flag", []string{"--version"}, nil},
		{"unknown-command", []string{"frobnicate"}, nil},
		{"unknown-flag", []string{"serve", "--bogus"}, nil},
		{"unknown-flag-no-command", []string{"--bogus"}, nil},
		{"bad-flag-value", []string{"serve", "--fleet-size", "many"}, nil},
		{"missing-flag-value", []string{"token", "--scope"}, nil},
		{"bad-scope", []string{"token", "--scope", "root", "--signing-key", testSigningKey}, nil},
		{"token-no-key", []string{"token", "--scope", "check"}, nil},
		{"serve-bad-log-format", []string{"serve", "--log-format", "xml"}, nil},
		{"serve-bad-log-level", []string{"serve", "--log-level", "loud"}, nil},
		{"serve-argument", []string{"serve", "extra"}, nil},
		{"rules-no-file", []string{"rules", "check"}, nil},
		{"rules-missing-file", []string{"rules", "check", "testdata/cli/no-such-file.yaml"}, nil},
		{"replay-no-rules", []string{"replay", "events.jsonl"}, nil},
		{"version-help", []string{"version", "--help"}, nil},
		{"version-argument", []string{"version", "extra"}, nil},
		{"short-v", []string{"-v"}, nil},
		{"short-v-serve", []string{"serve", "-v"}, nil},
		{"token-short-key-file", []string{"token", "--scope", "check", "--signing-key-file", "testdata/cli/short-key"}, nil},
		{"token-short-key-file-env", []string{"token", "--scope", "check"}, map[string]string{"GUARDIAN_SIGNING_KEY_FILE": "testdata/cli/short-key"}},
		{"token-short-key", []string{"token", "--scope", "check", "--signing-key", "short"}, nil},
		{"token-missing-key-file", []string{"token", "--scope", "check", "--signing-key-file", "testdata/cli/no-such-key"}, nil},
		{"token-scope-env", []string{"token", "--signing-key", testSigningKey}, map[string]string{"GUARDIAN_SCOPE": "check"}},
		{"replay-rules-env", []string{"replay", "events.jsonl"}, map[string]string{"GUARDIAN_RULES": "rules.yaml"}},
		{"simulate-rules-env", []string{"simulate", "--scenario", "phishing"}, map[string]string{"GUARDIAN_RULES": "testdata/cli/no-such-file.yaml"}},
		{"breached-build-out-env", []string{"breached", "build"}, map[string]string{"GUARDIAN_OUT": "filter.bin"}},
		{"rules-explain-help", []string{"rules", "explain", "--help"}, nil},
		{"serve-bad-tenant-metrics", []string{"serve", "--tenant-metrics", "shop,,bank"}, nil},
		{"token-bad-tenant", []string{"token", "--scope", "check", "--signing-key", testSigningKey, "--tenant", "Acme Corp"}, nil},
		{"token-empty-key-file", []string{"token", "--scope", "check", "--signing-key-file", "testdata/cli/empty-key"}, nil},
		{"serve-empty-key-file", []string{"serve", "--signing-key-file", "testdata/cli/empty-key"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, env(tt.env), &out, &errOut)
			got := normalise(fmt.Sprintf("$ guardian %s\nexit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(tt.args, " "), code, out.String(), errOut.String()))
			path := filepath.Join("testdata", "cli", tt.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("guardian %s printed\n%s\nwant\n%s", strings.Join(tt.args, " "), got, want)
			}
		})
	}
}

// normalise replaces what differs from build to build: the version line.
func normalise(s string) string {
	return strings.ReplaceAll(s, version.Get().String(), "guardian VERSION (revision REVISION, GOVERSION)")
}

// TestEveryCommandHasHelp: each command answers --help and -h with its
// flags on stdout, exit 0, nothing on stderr.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, cmd := range [][]string{{"serve"}, {"token"}, {"rules", "check"}, {"rules", "explain"}, {"replay"}, {"simulate"}, {"breached"}, {"breached", "build"}, {"version"}} {
		for _, h := range []string{"--help", "-h", "-help"} {
			var out, errOut bytes.Buffer
			args := append(append([]string{}, cmd...), h)
			code := run(context.Background(), args, env(nil), &out, &errOut)
			if code != exitOK || errOut.Len() != 0 || !strings.HasPrefix(out.String(), "Usage: guardian "+strings.Join(cmd, " ")) {
				t.Errorf("guardian %s: exit %d, stdout %q, stderr %q; want its usage on stdout, exit 0", strings.Join(args, " "), code, out.String(), errOut.String())
			}
		}
	}
}

// TestOnlyServeReadsTheEnvironment: serve's settings, and the key flags
// token shares with serve, read GUARDIAN_<FLAG>; no other flag of any
// command does, so a variable set for serve never changes another command.
func TestOnlyServeReadsTheEnvironment(t *testing.T) {
	rulesPath := filepath.Join(t.TempDir(), "rules.yaml")
	writeTestFile(t, rulesPath, "version: 1\nrules:\n  - name: only\n    flows: [login]\n    key: ip\n    type: rate\n    limit: 1\n    per: 1m\n")
	hashList := filepath.Join(t.TempDir(), "pwned.txt")
	writeTestFile(t, hashList, "5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:3\n")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		// check says what is wrong with what the command printed.
		check func(code int, out, errOut string) string
	}{
		{"GUARDIAN_FORMAT is not explain's --format", []string{"rules", "explain"}, map[string]string{"GUARDIAN_FORMAT": "json"},
			func(code int, out, _ string) string {
				if code != exitOK || !strings.HasPrefix(out, "RULE") {
					return "want the table, as without the variable"
				}
				return ""
			}},
		{"GUARDIAN_RULES is not explain's file", []string{"rules", "explain"}, map[string]string{"GUARDIAN_RULES": rulesPath},
			func(code int, out, _ string) string {
				if code != exitOK || strings.Contains(out, "only") || !strings.Contains(out, "login-account") {
					return "want the built-in rules"
				}
				return ""
			}},
		{"GUARDIAN_COMPARE is not replay's --compare", []string{"replay", "--rules", rulesPath, "-"}, map[string]string{"GUARDIAN_COMPARE": "true"},
			func(code int, _, errOut string) string {
				if strings.Contains(errOut, "not both") {
					return "want --rules alone, as without the variable"
				}
				return ""
			}},
		{"GUARDIAN_RULES, GUARDIAN_FORMAT and GUARDIAN_POPULATION are not simulate's", []string{"simulate", "--scenario", "phishing"},
			map[string]string{"GUARDIAN_RULES": filepath.Join(t.TempDir(), "no-such.yaml"), "GUARDIAN_FORMAT": "xml", "GUARDIAN_POPULATION": "0"},
			func(code int, _, errOut string) string {
				// Each variable, were it read, would be refused before the
				// scenario is looked up.
				if code != exitUsage || !strings.Contains(errOut, `unknown scenario: "phishing"`) || strings.Count(errOut, "guardian simulate:") != 1 {
					return "want the unknown scenario alone, as without the variables"
				}
				return ""
			}},
		{"GUARDIAN_FORMAT and GUARDIAN_MIN_COUNT are not breached build's", []string{"breached", "build", "--out", filepath.Join(t.TempDir(), "filter.bgf"), hashList},
			map[string]string{"GUARDIAN_FORMAT": "ntlm", "GUARDIAN_MIN_COUNT": "5"},
			func(code int, out, _ string) string {
				if code != exitOK || !strings.Contains(out, " 1 entries from 1 sha1 lines (1 kept)") {
					return "want the SHA-1 seen 3 times kept, as without the variables"
				}
				return ""
			}},
		{"GUARDIAN_OUT is not breached build's --out", []string{"breached", "build", rulesPath}, map[string]string{"GUARDIAN_OUT": filepath.Join(t.TempDir(), "filter.bgf")},
			func(code int, _, errOut string) string {
				if code != exitUsage || !strings.Contains(errOut, "--out FILE is required") {
					return "want --out required, as without the variable"
				}
				return ""
			}},
		{"GUARDIAN_TTL and GUARDIAN_SUBJECT are not token's", []string{"token", "--scope", "check"},
			map[string]string{"GUARDIAN_SIGNING_KEY": testSigningKey, "GUARDIAN_TTL": "-1s", "GUARDIAN_SUBJECT": "from-env"},
			func(code int, out, errOut string) string {
				if code != exitOK {
					return "want a token: GUARDIAN_TTL=-1s is not read"
				}
				claims := jwtClaims(t, strings.TrimSpace(out))
				if claims["sub"] != "guardian-cli" {
					return fmt.Sprintf("subject %v, want the default guardian-cli", claims["sub"])
				}
				return ""
			}},
		{"the signing key is token's as serve's", []string{"token", "--scope", "admin"}, map[string]string{"GUARDIAN_SIGNING_KEY": testSigningKey},
			func(code int, out, _ string) string {
				if code != exitOK || strings.Count(out, ".") != 2 {
					return "want a token signed with GUARDIAN_SIGNING_KEY"
				}
				return ""
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, env(tt.env), &out, &errOut)
			if msg := tt.check(code, out.String(), errOut.String()); msg != "" {
				t.Errorf("guardian %s with %v: exit %d, stdout %q, stderr %q: %s", strings.Join(tt.args, " "), tt.env, code, out.String(), errOut.String(), msg)
			}
		})
	}
}

// TestHelpNamesEveryVariableOnce: each variable a --help lists belongs to
// one setting: it is serve's, or one of the key flags token shares with
// serve (the same setting on both).
func TestHelpNamesEveryVariableOnce(t *testing.T) {
	shared := map[string]bool{"GUARDIAN_SIGNING_KEY": true, "GUARDIAN_SIGNING_KEY_FILE": true}
	owner := map[string]string{}
	for _, cmd := range [][]string{{"serve"}, {"token"}, {"rules", "check"}, {"rules", "explain"}, {"replay"}, {"simulate"}, {"breached", "build"}, {"breached", "info"}, {"version"}} {
		var out bytes.Buffer
		if code := run(context.Background(), append(append([]string{}, cmd...), "--help"), env(nil), &out, &bytes.Buffer{}); code != exitOK {
			t.Fatalf("guardian %s --help: exit %d", strings.Join(cmd, " "), code)
		}
		name := strings.Join(cmd, " ")
		for _, f := range strings.Fields(out.String()) {
			if !strings.HasPrefix(f, "[GUARDIAN_") {
				continue
			}
			v := strings.Trim(f, "[]")
			if name != "serve" && !shared[v] {
				t.Errorf("guardian %s --help lists %s: only serve's settings read the environment", name, v)
			}
			if prev, ok := owner[v]; ok && !shared[v] {
				t.Errorf("%s is listed by guardian %s and guardian %s", v, prev, name)
			}
			owner[v] = name
		}
	}
	if owner["GUARDIAN_REDIS_URL"] != "serve" || owner["GUARDIAN_SIGNING_KEY"] == "" {
		t.Errorf("variables listed: %v; want serve's, and the signing key's", owner)
	}
}

// jwtClaims returns the claims of a JWT, unverified.
func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("%q is not a JWT", tok)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}
