package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/client"
)

// firstCallStarts is how many times TestFirstCheckAfterStart starts
// guardian.
const firstCallStarts = 50

// TestFirstCheckAfterStart starts the real binary fifty times on one Redis
// (a redis-server on loopback, as the Python and TypeScript clients' tests
// use) and checks each at once, as soon as it is ready, with a fresh Go
// client on its defaults: no first check may time out or find guardian
// unavailable, whatever a first request costs guardian and the client.
func TestFirstCheckAfterStart(t *testing.T) {
	redisServer, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server: %v (apt-get install redis-server, as .ci/run does)", err)
	}
	dir := t.TempDir()
	bin := guardianBinary(t)
	redisAddr := freeAddr(t)
	_, port, _ := strings.Cut(redisAddr, ":")
	redis := exec.Command(redisServer, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := redis.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = redis.Process.Kill(); _ = redis.Wait() })
	keyFile := filepath.Join(dir, "signing-key")
	if err := os.WriteFile(keyFile, []byte(testSigningKey), 0o600); err != nil {
		t.Fatal(err)
	}
	var tok bytes.Buffer
	if code := run(context.Background(), []string{"token", "--scope", "check", "--signing-key-file", keyFile}, env(nil), &tok, &bytes.Buffer{}); code != exitOK {
		t.Fatal("guardian token failed")
	}

	var took []time.Duration
	for i := range firstCallStarts {
		addr := freeAddr(t)
		g := exec.Command(bin, "serve", "--addr", addr, "--redis-url", "redis://"+redisAddr+"/0", "--signing-key-file", keyFile, "--log-format", "text")
		if err := g.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			resp, err := http.Get("http://" + addr + "/readyz") // not the client's connection
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		c, err := client.New(client.Config{BaseURL: "http://" + addr, Tokens: client.StaticToken(strings.TrimSpace(tok.String())),
			OnUnavailable: client.FailClosed})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// A key of its own each time: the Redis, and so every count, is shared.
		d, err := c.Check(context.Background(), client.CheckRequest{Flow: client.FlowLogin,
			Account: fmt.Sprintf("first-%d@example.com", i), IP: fmt.Sprintf("198.51.%d.7", i)})
		took = append(took, time.Since(start))
		_ = g.Process.Signal(syscall.SIGTERM)
		_ = g.Wait()
		if err != nil || d.Unavailable || d.Action != client.Allow {
			t.Fatalf("start %d: first check = %+v, %v; want guardian's allow", i+1, d, err)
		}
	}
	slices.Sort(took)
	t.Logf("go first checks: %d/%d answered; min %v median %v max %v", len(took), firstCallStarts,
		took[0].Round(time.Microsecond), took[len(took)/2].Round(time.Microsecond), took[len(took)-1].Round(time.Microsecond))
}
