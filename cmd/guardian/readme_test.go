package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// With -update (cli_test.go), the README's generated parts are rewritten
// from the commands they come from: go test ./cmd/guardian -run TestREADME
// -update (or make readme).

const readmePath = "../../README.md"

// The markers around the README's table of what each built-in rule bounds.
const (
	boundsBegin = "<!-- begin: guardian rules explain (make readme rewrites this table) -->\n"
	boundsEnd   = "<!-- end: guardian rules explain -->\n"
)

// boundsTable is the README's table, rendered from `guardian rules explain
// --format json` on the built-in rules.
func boundsTable(t *testing.T) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"rules", "explain", "--format", "json"}, env(nil), &out, &errOut); code != exitOK {
		t.Fatalf("rules explain: exit %d, stderr %q", code, errOut.String())
	}
	var doc struct {
		Rules []struct {
			Rule   string `json:"rule"`
			Key    string `json:"key"`
			Bound  int64  `json:"bound"`
			Window string `json:"window"`
			What   string `json:"what"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("rules explain --format json: %v\n%s", err, out.String())
	}
	var b strings.Builder
	b.WriteString("| rule | key | per key, in the rule's window | what it bounds |\n|---|---|---:|---|\n")
	for _, r := range doc.Rules {
		fmt.Fprintf(&b, "| `%s` | %s | %d %s | %s |\n", r.Rule, r.Key, r.Bound, r.Window, strings.ReplaceAll(r.What, "|", `\|`))
	}
	return b.String()
}

func TestREADMERulesTable(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(readme), boundsBegin)
	if !ok {
		t.Fatalf("README.md has no line %q", boundsBegin)
	}
	got, after, ok := strings.Cut(rest, boundsEnd)
	if !ok {
		t.Fatalf("README.md has no line %q after the table", boundsEnd)
	}
	want := boundsTable(t)
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(readmePath, []byte(before+boundsBegin+want+boundsEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's table of what each built-in rule bounds is not what `guardian rules explain` says; run make readme.\ngot:\n%s\nwant:\n%s", got, want)
}
