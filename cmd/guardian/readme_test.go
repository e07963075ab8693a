package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/simulate"
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
			Mode   string `json:"mode"`
			Bound  int64  `json:"bound"`
			Window string `json:"window"`
			What   string `json:"what"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("rules explain --format json: %v\n%s", err, out.String())
	}
	var b strings.Builder
	b.WriteString("| rule | key | mode | per key, in the rule's window | what it bounds |\n|---|---|---|---:|---|\n")
	for _, r := range doc.Rules {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %d %s | %s |\n", r.Rule, r.Key, r.Mode, r.Bound, r.Window, strings.ReplaceAll(r.What, "|", `\|`))
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

// The markers around the README's table of what the built-in rules do to
// the scenarios of guardian simulate.
const (
	simulateBegin = "<!-- begin: guardian simulate (make readme rewrites this table) -->\n"
	simulateEnd   = "<!-- end: guardian simulate -->\n"
)

// simulateTable renders the README's table from the report of `guardian
// simulate --format json` on the built-in rules.
func simulateTable(rep *simulate.Report) string {
	var b strings.Builder
	b.WriteString("| scenario | guesses | went ahead | most on one account | accounts reached | compromised | stopped by | users' logins slowed · challenged · blocked |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---|---|\n")
	pct := func(f float64) string { return fmt.Sprintf("%.2f%%", 100*f) }
	friction := func(f simulate.Friction) string {
		return pct(f.SlowedShare) + " · " + pct(f.ChallengedShare) + " · " + pct(f.BlockedShare)
	}
	for _, s := range rep.Scenarios {
		a := s.Attacker
		var by []string
		for _, r := range s.Rules {
			for _, st := range []struct {
				n    int64
				what string
			}{{r.Attacker.Slowed, "slowed"}, {r.Attacker.Challenged, "challenged"}, {r.Attacker.Blocked, "blocked"}} {
				if st.n > 0 {
					by = append(by, fmt.Sprintf("`%s` %d %s", r.Rule, st.n, st.what))
				}
			}
		}
		if by == nil {
			by = []string{"nothing"}
		}
		fmt.Fprintf(&b, "| `%s` | %d | %d | %d | %d | %d | %s | %s |\n", s.Scenario, a.Guesses, a.Allowed, a.MaxPerAccount, a.AccountsReached, a.AccountsCompromised, strings.Join(by, ", "), friction(s.Users))
		for _, o := range s.Owner {
			fmt.Fprintf(&b, "| `%s`, the owner: %s | | | | | | | %s |\n", s.Scenario, strings.ReplaceAll(o.Way, "_", " "), friction(o.Friction))
		}
	}
	return b.String()
}

// simulateFiguresPath records, each time make readme writes README.md's
// table of guardian simulate, what the table was and what a small run of
// the same simulation gave, so that a test can tell the table's figures
// drifted without running every scenario at its documented size (a minute
// or two): the built-in rules, or what the engine does with them, changed
// the small run's figures.
const simulateFiguresPath = "testdata/readme-simulate.json"

// simulateFigures is the content of simulateFiguresPath.
type simulateFigures struct {
	// Table is the SHA-256 of README.md's table, in hex.
	Table string `json:"readme_table_sha256"`
	// Small is what `guardian simulate` with smallSimulation prints.
	Small json.RawMessage `json:"small"`
}

// smallSimulation are the arguments of the small run: every scenario, at
// the scale of quick, as JSON.
var smallSimulation = append(append([]string{}, quick...), "--format", "json", "--quiet")

// TestREADMESimulateTable: the README's table of guardian simulate is the
// one make readme last wrote, and a small run of the same simulation still
// gives the figures it gave then. With -update (make readme) it runs every
// scenario at its documented size and rewrites the table and the record.
// guardian runs as users run it, built without the race detector.
func TestREADMESimulateTable(t *testing.T) {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(readme), simulateBegin)
	if !ok {
		t.Fatalf("README.md has no line %q", simulateBegin)
	}
	got, after, ok := strings.Cut(rest, simulateEnd)
	if !ok {
		t.Fatalf("README.md has no line %q after the table", simulateEnd)
	}
	bin := guardianBinary(t)
	small := compactJSON(t, simulateOutput(t, bin, smallSimulation...))
	if *update {
		start := time.Now()
		out := simulateOutput(t, bin, "simulate", "--format", "json", "--quiet")
		t.Logf("guardian simulate, every scenario: %v", time.Since(start).Round(100*time.Millisecond))
		var rep simulate.Report
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("guardian simulate --format json: %v\n%s", err, out)
		}
		want := simulateTable(&rep)
		if got != want {
			if err := os.WriteFile(readmePath, []byte(before+simulateBegin+want+simulateEnd+after), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		rec, err := json.MarshalIndent(simulateFigures{Table: tableHash(want), Small: small}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(simulateFiguresPath, append(rec, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(simulateFiguresPath)
	if err != nil {
		t.Fatalf("%v: run make readme", err)
	}
	var rec simulateFigures
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatalf("%s: %v", simulateFiguresPath, err)
	}
	if tableHash(got) != rec.Table {
		t.Errorf("README.md's table of what the built-in rules do in `guardian simulate` is not the one make readme wrote; run make readme.\ngot:\n%s", got)
	}
	if want := compactJSON(t, rec.Small); !bytes.Equal(small, want) {
		t.Errorf("guardian %s gives other figures than when make readme wrote README.md's table: the built-in rules, or what guardian does with them, changed; run make readme.\ngot:\n%s\nwant:\n%s",
			strings.Join(smallSimulation, " "), small, want)
	}
	// The table has a row for each scenario and owner's way the small run
	// has, in its order.
	var rep simulate.Report
	if err := json.Unmarshal(small, &rep); err != nil {
		t.Fatal(err)
	}
	if g, w := firstCells(got), firstCells(simulateTable(&rep)); !slices.Equal(g, w) {
		t.Errorf("README.md's table has the rows %q, want %q", g, w)
	}
}

// simulateOutput runs the guardian binary bin with args and returns its
// stdout; it fails the test unless guardian succeeds.
func simulateOutput(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	code, out, errOut := runProcess(t, bin, args...)
	if code != exitOK {
		t.Fatalf("guardian %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	return []byte(out)
}

// compactJSON is b, a JSON document, compacted.
func compactJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return out.Bytes()
}

// tableHash is the SHA-256 of a table, in hex.
func tableHash(table string) string {
	sum := sha256.Sum256([]byte(table))
	return hex.EncodeToString(sum[:])
}

// firstCells returns the first cell of each row of a Markdown table.
func firstCells(table string) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n") {
		if cells := strings.Split(line, "|"); len(cells) > 2 {
			out = append(out, strings.TrimSpace(cells[1]))
		}
	}
	return out
}

// The Go client's examples, which go test runs, are the README's Go
// snippets: each block between these markers is the source of the named
// function of client/example_test.go, and make readme rewrites it.
const (
	examplesPath = "../../client/example_test.go"
	exampleBegin = "<!-- begin: client/example_test.go "
	exampleEnd   = "<!-- end: "
)

// exampleSource returns the source of func name in client/example_test.go.
func exampleSource(t *testing.T, name string) string {
	t.Helper()
	src, err := os.ReadFile(examplesPath)
	if err != nil {
		t.Fatal(err)
	}
	fset := gotoken.NewFileSet()
	f, err := parser.ParseFile(fset, examplesPath, src, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == name && fn.Recv == nil {
			return string(src[fset.Position(fn.Pos()).Offset:fset.Position(fn.End()).Offset])
		}
	}
	t.Fatalf("%s has no func %s", examplesPath, name)
	return ""
}

// TestREADMEGoSnippets: every Go block of README.md and docs/*.md is one of
// the client's examples, exactly, between markers naming it; the examples
// compile and run (with their output checked) in the client's tests.
func TestREADMEGoSnippets(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	generated := 0
	for _, path := range append([]string{readmePath}, files...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text, out := string(b), ""
		for {
			before, rest, ok := strings.Cut(text, exampleBegin)
			if !ok {
				out += text
				break
			}
			header, rest, _ := strings.Cut(rest, "\n")
			name := strings.Fields(header)[0]
			_, after, ok := strings.Cut(rest, exampleEnd+name+" -->\n")
			if !ok {
				t.Fatalf("%s: no %s%s --> after the block of %s", path, exampleEnd, name, name)
			}
			block := "```go\n" + exampleSource(t, name) + "\n```\n"
			got, _, _ := strings.Cut(rest, exampleEnd)
			if got != block && !*update {
				t.Errorf("%s: the block of %s is not client/example_test.go's %s; run make readme.\ngot:\n%s\nwant:\n%s", path, name, name, got, block)
			}
			out += before + exampleBegin + header + "\n" + block + exampleEnd + name + " -->\n"
			text = after
			generated++
		}
		// Whatever Go is left outside the markers is a snippet no test
		// compiles.
		if outside := strings.Count(stripGenerated(out), "```go"); outside != 0 {
			t.Errorf("%s: %d Go blocks are not client examples between markers: no test compiles them", path, outside)
		}
		if *update && out != string(b) {
			if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if generated == 0 {
		t.Error("README.md shows no client example")
	}
}

// stripGenerated removes the generated blocks from text.
func stripGenerated(text string) string {
	var b strings.Builder
	for {
		before, rest, ok := strings.Cut(text, exampleBegin)
		b.WriteString(before)
		if !ok {
			return b.String()
		}
		_, after, ok := strings.Cut(rest, exampleEnd)
		if !ok {
			return b.String()
		}
		text = after
	}
}
