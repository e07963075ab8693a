package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRulesExplainCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rules.yaml")
	os.WriteFile(file, []byte(`version: 1
rules:
  - name: per-ip
    flows: [login]
    key: ip
    type: rate
    count: failures
    limit: 30
    per: 10m
  - name: trial
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1h
    mode: shadow
`), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("version: 1\nrules:\n  - name: a\n    flows: [login]\n    key: ip\n    type: rate\n    limit: 0\n    per: 1m\n"), 0o600)

	type bound struct {
		Rule   string `json:"rule"`
		Key    string `json:"key"`
		Mode   string `json:"mode"`
		PerDay int64  `json:"per_day"`
		Bound  int64  `json:"bound"`
		Window string `json:"window"`
		What   string `json:"what"`
	}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		// wantJSON, for --format json, are the rules and figures wanted.
		wantJSON []bound
		// wantLines, for tables, are lines the output must have, in order.
		wantLines []string
		wantErr   string
		// wantOut is text stdout must contain.
		wantOut string
	}{
		{
			name:     "built-in rules as json",
			args:     []string{"--format", "json"},
			wantCode: exitOK,
			wantJSON: []bound{
				{Rule: "login-account", Key: "account", Mode: "enforce", PerDay: 1445, Bound: 1445, Window: "a day"},
				{Rule: "password-reset-account", Key: "account", Mode: "enforce", PerDay: 154, Bound: 154, Window: "a day"},
				{Rule: "login-ip", Key: "ip", Mode: "enforce", PerDay: 4350, Bound: 4350, Window: "a day"},
				{Rule: "login-ip6-48", Key: "ip", Mode: "enforce", PerDay: 4350, Bound: 4350, Window: "a day"},
				{Rule: "login-ip-distinct-accounts", Key: "ip", Mode: "enforce", PerDay: 20, Bound: 20, Window: "in 1d"},
				{Rule: "login-hard-stop", Key: "account", Mode: "enforce", PerDay: 100, Bound: 100, Window: "in a row"},
				{Rule: "login-secret-spray", Key: "secret", Mode: "enforce", PerDay: 1450, Bound: 1450, Window: "a day"},
				{Rule: "otp-send-recipient", Key: "recipient", Mode: "enforce", PerDay: 291, Bound: 291, Window: "a day"},
				{Rule: "otp-verify-recipient", Key: "recipient", Mode: "enforce", PerDay: 485, Bound: 485, Window: "a day"},
				{Rule: "login-global-failures", Key: "global", Mode: "enforce", PerDay: 1000, Bound: 1000, Window: "in 1m"},
			},
		},
		{
			name:     "a file as json, shadow rules marked",
			args:     []string{"--format", "json", file},
			wantCode: exitOK,
			wantJSON: []bound{{Rule: "per-ip", Key: "ip", Mode: "enforce", PerDay: 4350, Bound: 4350, Window: "a day"},
				{Rule: "trial", Key: "account", Mode: "shadow", PerDay: 25, Bound: 25, Window: "a day"}},
		},
		{
			name:     "a file as a table",
			args:     []string{file},
			wantCode: exitOK,
			wantLines: []string{
				"RULE    KEY      MODE     BOUND       WHAT",
				"per-ip  ip       enforce  4350 a day  at most 4350 failed or unreported checks per IPv4 /32 or IPv6 /64 a day (30 back to back, then 30 per 10m); past that, slow",
				"trial   account  shadow   25 a day    shadow, deciding nothing until promoted; then at most 25 checks per account a day (1 back to back, then 1 per 1h); past that, slow",
			},
		},
		{name: "an invalid file", args: []string{bad}, wantCode: exitUsage, wantErr: bad + ":7: limit"},
		{name: "a missing file", args: []string{filepath.Join(dir, "none.yaml")}, wantCode: exitUsage, wantErr: "none.yaml: cannot read the rules file: no such file or directory"},
		{name: "an unknown format", args: []string{"--format", "xml"}, wantCode: exitUsage, wantErr: `"xml" is not table or json`},
		{name: "two files", args: []string{file, file}, wantCode: exitUsage, wantErr: "want at most one rules file"},
		{name: "help", args: []string{"--help"}, wantCode: exitOK, wantOut: "burst + floor(24h × limit / per)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), append([]string{"rules", "explain"}, tt.args...), env(nil), &out, &errOut)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d (stderr %q)", code, tt.wantCode, errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("stderr %q, want it to contain %q", errOut.String(), tt.wantErr)
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("stdout %q, want it to contain %q", out.String(), tt.wantOut)
			}
			if tt.wantJSON != nil {
				var got struct{ Rules []bound }
				if err := json.Unmarshal(out.Bytes(), &got); err != nil {
					t.Fatalf("stdout is not JSON: %v\n%s", err, out.String())
				}
				if len(got.Rules) != len(tt.wantJSON) {
					t.Fatalf("rules %+v, want %+v", got.Rules, tt.wantJSON)
				}
				for i, w := range tt.wantJSON {
					g := got.Rules[i]
					if g.Rule != w.Rule || g.Key != w.Key || g.Mode != w.Mode || g.PerDay != w.PerDay || g.Bound != w.Bound || g.Window != w.Window || g.What == "" {
						t.Errorf("rule %d = %+v, want %+v with words", i, g, w)
					}
				}
			}
			if tt.wantLines != nil {
				got := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
				if strings.Join(got, "\n") != strings.Join(tt.wantLines, "\n") {
					t.Errorf("table:\n%s\nwant:\n%s", out.String(), strings.Join(tt.wantLines, "\n"))
				}
			}
			if tt.wantCode != exitOK && out.Len() != 0 {
				t.Errorf("stdout %q on an error, want nothing", out.String())
			}
		})
	}
}

// TestRulesExplainTableSaysEachRulesWindow: the table's figure is what a
// rule bounds in its own window, never a per-minute or in-a-row limit
// called a day's.
func TestRulesExplainTableSaysEachRulesWindow(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"rules", "explain"}, env(nil), &out, &errOut); code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	lines := strings.Split(out.String(), "\n")
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "RULE KEY MODE BOUND WHAT" {
		t.Errorf("header %q, want RULE KEY MODE BOUND WHAT", lines[0])
	}
	want := map[string]string{
		"login-account":              "1445 a day",
		"login-hard-stop":            "100 in a row",
		"login-global-failures":      "1000 in 1m",
		"login-ip-distinct-accounts": "20 in 1d",
	}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if w, ok := want[f[0]]; ok {
			if f[2] != "enforce" {
				t.Errorf("%s: mode %q, want enforce (line %q)", f[0], f[2], line)
			}
			if got := strings.Join(f[3:3+len(strings.Fields(w))], " "); got != w {
				t.Errorf("%s: bound %q, want %q (line %q)", f[0], got, w, line)
			}
			delete(want, f[0])
		}
	}
	if len(want) != 0 {
		t.Errorf("rules missing from the table: %v\n%s", want, out.String())
	}
}
