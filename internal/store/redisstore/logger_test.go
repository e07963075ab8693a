package redisstore_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/logtest"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// TestRouteLogs: with RouteLogs, a dial go-redis cannot make is a debug
// line of guardian's JSON log, and nothing else is written.
func TestRouteLogs(t *testing.T) {
	var buf logtest.Buffer
	redisstore.RouteLogs(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { redisstore.RouteLogs(slog.New(slog.DiscardHandler)) })

	client, err := redisstore.Open(closedAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := client.Ping(ctx).Err(); err == nil {
		t.Fatal("ping of a closed port succeeded")
	}
	client.Close()
	found := false
	for _, rec := range logtest.JSONLines(t, buf.String()) {
		if rec["level"] != "DEBUG" {
			t.Errorf("line %v: level %v, want DEBUG", rec, rec["level"])
		}
		detail, _ := rec["detail"].(string)
		found = found || strings.Contains(detail, "dial")
	}
	if !found {
		t.Fatalf("no line about the failed dial in %q", buf.String())
	}
}

// TestOneAttemptPerCall: a refused connection fails the call at once with
// the refusal, not after a retry with the deadline's error.
func TestOneAttemptPerCall(t *testing.T) {
	redisstore.RouteLogs(slog.New(slog.DiscardHandler))
	client, err := redisstore.Open(closedAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		err := client.Ping(ctx).Err()
		cancel()
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "dial" {
			t.Fatalf("ping of a closed port = %v, want the dial error", err)
		}
	}
}

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
