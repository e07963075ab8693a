package server_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// edges are imports that would point the wrong way: from a package to one
// that builds on it, or to one it has no business knowing. Each holds for
// the package's dependencies as `go list -deps` shows them, however far.
var edges = map[string][]string{
	// The rules file knows nothing of what enforces it or what seals it.
	"internal/rules": {"internal/tokens", "internal/store", "internal/plan", "internal/engine"},
	// The replay format and the audit trail name what the engine decides;
	// they do not decide.
	"internal/event": {"internal/engine"},
	"internal/audit": {"internal/engine"},
	// HTTP knows the store's errors, never a store.
	"internal/httpapi": {"internal/failclosed", "internal/store/memstore", "internal/store/redisstore", "internal/recall"},
	// Attempt ids seal subjects and a mask, never store keys.
	"internal/tokens": {"internal/store", "internal/rules", "internal/plan"},
	// The plan and the features that add to it are below the engine.
	"internal/plan":        {"internal/engine", "internal/loginlimits", "internal/otp", "internal/tokens"},
	"internal/loginlimits": {"internal/engine"},
	"internal/otp":         {"internal/engine", "internal/store"},
	// The store is below everything that uses it.
	"internal/store": {"internal/rules", "internal/keys", "internal/plan", "internal/engine"},
	// The heartbeat, the shadow tallies and the revocations have a loop of
	// their own.
	"internal/fleet":      {"internal/aggregate", "internal/engine"},
	"internal/shadow":     {"internal/aggregate", "internal/engine"},
	"internal/revocation": {"internal/aggregate", "internal/engine"},
}

// TestNoInvertedEdges keeps the package edges above out of the build.
func TestNoInvertedEdges(t *testing.T) {
	const module = "github.com/guardian-sec/guardian/"
	var pkgs []string
	for p := range edges {
		pkgs = append(pkgs, module+p)
	}
	slices.Sort(pkgs)
	out, err := exec.Command("go", append([]string{"list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`}, pkgs...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		forbidden, ok := edges[pkg]
		if !ok {
			t.Fatalf("go list answered for %s, not asked", fields[0])
		}
		seen++
		for _, dep := range fields[1:] {
			if slices.Contains(forbidden, strings.TrimPrefix(dep, module)) {
				t.Errorf("%s depends on %s", pkg, strings.TrimPrefix(dep, module))
			}
		}
	}
	if seen != len(edges) {
		t.Fatalf("go list answered for %d packages, want %d", seen, len(edges))
	}
}
