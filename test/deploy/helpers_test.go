// Package deploy_test checks what deploy/ ships against the guardian it
// deploys: the container image, the compose fleet end to end, the
// Kubernetes manifests, the Prometheus alerts and scrape configurations, and
// the Grafana dashboard.
package deploy_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
)

// root is the root of the guardian repository, found from this file.
var root = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}()

// repoPath turns a slash-separated path relative to the repository root
// into a file name.
func repoPath(rel string) string { return filepath.Join(root, filepath.FromSlash(rel)) }

// repoFile reads a file given relative to the repository root.
func repoFile(tb testing.TB, rel string) []byte {
	tb.Helper()
	b, err := os.ReadFile(repoPath(rel))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// run runs a command from the repository root with env added to the
// environment, and returns its stdout; it fails the test with stderr when
// the command fails.
func run(tb testing.TB, ctx context.Context, env []string, name string, args ...string) string {
	tb.Helper()
	out, err := runErr(ctx, env, name, args...)
	if err != nil {
		tb.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return out
}

// runErr is run returning the error, with stderr in it.
func runErr(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &cmdError{err: err, stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.String(), nil
}

type cmdError struct {
	err    error
	stderr string
}

func (e *cmdError) Error() string { return e.err.Error() + ": " + e.stderr }
func (e *cmdError) Unwrap() error { return e.err }

// startGuardian runs a real guardian instance in this process on a free
// port of 127.0.0.1, with the rules file at rulesPath (empty: the built-in
// rules), and returns its base URL.
func startGuardian(tb testing.TB, rulesPath string) string {
	tb.Helper()
	srv, err := server.New(server.Config{
		Addr:       "127.0.0.1:0",
		RulesPath:  rulesPath,
		SigningKey: secret.Generate(),
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Error(err)
		}
	})
	return "http://" + srv.Addr()
}

// get fetches url and returns the status and body.
func get(tb testing.TB, url string) (int, []byte) {
	tb.Helper()
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, body
}
