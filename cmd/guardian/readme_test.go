package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
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
