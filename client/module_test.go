package client_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// integrator is a program outside guardian that uses the client, as an auth
// service would.
const integrator = `package main

import (
	"context"
	"fmt"

	"github.com/guardian-sec/guardian/client"
)

func main() {
	c, err := client.New(client.Config{
		BaseURL:       "http://127.0.0.1:1",
		Tokens:        client.StaticToken("t"),
		OnUnavailable: client.FailClosed,
	})
	if err != nil {
		panic(err)
	}
	d, err := c.Check(context.Background(), client.CheckRequest{Flow: client.FlowLogin, Account: "a", IP: "192.0.2.1"})
	fmt.Println(d.Action, d.Unavailable, err, client.Fingerprint([]byte("k"), []byte("s")) != "")
}
`

// TestModuleStandsAlone builds a program of another module against this
// one as the README says to from a checkout: a Go workspace that uses the
// program's module and this one, and no replace directive. Nothing is
// fetched from anywhere: the client's module is the only one in the
// program's graph besides its own, and the program imports no package
// beyond the standard library and the client's.
func TestModuleStandsAlone(t *testing.T) {
	self, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/integrator\n\ngo 1.25\n"
	// What `go work init . CHECKOUT/client` writes.
	gowork := "go 1.25\n\nuse (\n\t.\n\t" + self + "\n)\n"
	for name, text := range map[string]string{"go.mod": gomod, "go.work": gowork, "main.go": integrator} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gocmd := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		// No proxy, and the program's own workspace: whatever the build
		// needs must be here already.
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOPROXY=off", "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}

	modules := strings.Split(gocmd("list", "-m", "-f", "{{.Path}}", "all"), "\n")
	if want := []string{"example.com/integrator", "github.com/guardian-sec/guardian/client"}; !slices.Equal(modules, want) {
		t.Errorf("go list -m all = %q, want %q: the client pulls in other modules", modules, want)
	}
	for _, p := range strings.Split(gocmd("list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "."), "\n") {
		if p != "" && p != "example.com/integrator" && p != "github.com/guardian-sec/guardian/client" {
			t.Errorf("the program imports %s: the client depends on more than the standard library", p)
		}
	}
	bin := filepath.Join(dir, "integrator")
	gocmd("build", "-o", bin, ".")
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("integrator: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "slow true <nil> true"; got != want {
		t.Errorf("integrator printed %q, want %q (FailClosed with guardian unreachable)", got, want)
	}
}
