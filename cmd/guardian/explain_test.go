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
				{Rule: "login-account", Key: "account", Mode: "enforce", PerDay: 1445},
				{Rule: "password-reset-account", Key: "account", Mode: "enforce", PerDay: 154},
				{Rule: "login-ip", Key: "ip", Mode: "enforce", PerDay: 4350},
				{Rule: "login-ip6-48", Key: "ip", Mode: "enforce", PerDay: 4350},
				{Rule: "login-ip-distinct-accounts", Key: "ip", Mode: "enforce", PerDay: 20},
				{Rule: "login-hard-stop", Key: "account", Mode: "enforce", PerDay: 100},
				{Rule: "login-secret-spray", Key: "secret", Mode: "enforce", PerDay: 1450},
				{Rule: "otp-send-recipient", Key: "recipient", Mode: "enforce", PerDay: 291},
				{Rule: "otp-verify-recipient", Key: "recipient", Mode: "enforce", PerDay: 485},
				{Rule: "login-global-failures", Key: "global", Mode: "enforce", PerDay: 1000},
			},
		},
		{
			name:     "a file as json, shadow rules marked",
			args:     []string{"--format", "json", file},
			wantCode: exitOK,
			wantJSON: []bound{{Rule: "per-ip", Key: "ip", Mode: "enforce", PerDay: 4350}, {Rule: "trial", Key: "account", Mode: "shadow", PerDay: 25}},
		},
		{
			name:     "a file as a table",
			args:     []string{file},
			wantCode: exitOK,
			wantLines: []string{
				"RULE    KEY      MODE     PER DAY  WHAT",
				"per-ip  ip       enforce  4350     at most 4350 failed or unreported checks per IPv4 /32 or IPv6 /64 a day (30 back to back, then 30 per 10m); past that, slow",
				"trial   account  shadow   25       shadow, deciding nothing until promoted; then at most 25 checks per account a day (1 back to back, then 1 per 1h); past that, slow",
			},
		},
		{name: "an invalid file", args: []string{bad}, wantCode: exitUsage, wantErr: bad + ":7: limit"},
		{name: "a missing file", args: []string{filepath.Join(dir, "none.yaml")}, wantCode: exitUsage, wantErr: "none.yaml:0:"},
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
					if g.Rule != w.Rule || g.Key != w.Key || g.Mode != w.Mode || g.PerDay != w.PerDay || g.What == "" {
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
