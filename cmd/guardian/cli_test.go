package main

import (
	"bytes"
	"context"
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
	}{
		{"help", []string{"--help"}},
		{"help-short", []string{"-h"}},
		{"help-command", []string{"help"}},
		{"serve-help", []string{"serve", "--help"}},
		{"token-help", []string{"token", "--help"}},
		{"rules-check-help", []string{"rules", "check", "--help"}},
		{"rules-help", []string{"rules", "--help"}},
		{"replay-help", []string{"replay", "--help"}},
		{"simulate-help", []string{"simulate", "--help"}},
		{"simulate-unknown-scenario", []string{"simulate", "--scenario", "phishing"}},
		{"version", []string{"version"}},
		{"version-flag", []string{"--version"}},
		{"unknown-command", []string{"frobnicate"}},
		{"unknown-flag", []string{"serve", "--bogus"}},
		{"unknown-flag-no-command", []string{"--bogus"}},
		{"bad-flag-value", []string{"serve", "--fleet-size", "many"}},
		{"missing-flag-value", []string{"token", "--scope"}},
		{"bad-scope", []string{"token", "--scope", "root", "--signing-key", testSigningKey}},
		{"token-no-key", []string{"token", "--scope", "check"}},
		{"serve-bad-log-format", []string{"serve", "--log-format", "xml"}},
		{"serve-bad-log-level", []string{"serve", "--log-level", "loud"}},
		{"serve-argument", []string{"serve", "extra"}},
		{"rules-no-file", []string{"rules", "check"}},
		{"rules-missing-file", []string{"rules", "check", "testdata/cli/no-such-file.yaml"}},
		{"replay-no-rules", []string{"replay", "events.jsonl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, env(nil), &out, &errOut)
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
	for _, cmd := range [][]string{{"serve"}, {"token"}, {"rules", "check"}, {"replay"}, {"simulate"}} {
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
