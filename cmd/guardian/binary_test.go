package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestMain runs the tests, then removes the binary guardianBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// built is the guardian binary the tests that run one share: built once,
// as users build it (without the race detector, whatever the tests run
// with).
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
	out  []byte
}

// guardianBinary returns the path of a guardian binary built from this
// package, building it on the first call.
func guardianBinary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "guardian-test-"); built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "guardian")
		built.out, built.err = exec.Command("go", "build", "-o", built.path, ".").CombinedOutput()
	})
	if built.err != nil {
		t.Fatalf("go build: %v\n%s", built.err, built.out)
	}
	return built.path
}

// runProcess runs the guardian binary bin with args, as runCLI runs the
// command in this process.
func runProcess(t *testing.T, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("guardian %s: %v", strings.Join(args, " "), err)
		}
		code = exit.ExitCode()
	}
	return code, out.String(), errOut.String()
}
