package client_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocCommentsHaveNoUncompiledCode: the package's code snippets are its
// Example functions, which go test compiles and runs (and the README shows);
// a code block in a doc comment would be one that nothing compiles, free to
// drift into code that skips a challenge.
func TestDocCommentsHaveNoUncompiledCode(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range f.Comments {
			for _, c := range g.List {
				if strings.HasPrefix(c.Text, "//\t") { // gofmt writes a code block so
					t.Errorf("%s: a code block in a comment, %q: make it an Example", name, c.Text)
				}
			}
		}
	}
}
