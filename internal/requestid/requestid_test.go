package requestid_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/guardian-sec/guardian/internal/requestid"
)

func TestValid(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"a", true},
		{"req-42_x.y:z/~!", true},
		{strings.Repeat("x", 128), true},
		{strings.Repeat("x", 129), false},
		{"", false},
		{"has space", false},
		{"tab\there", false},
		{"new\nline", false},
		{"del\x7f", false},
		{"é", false},
	}
	for _, tt := range tests {
		if got := requestid.Valid(tt.id); got != tt.want {
			t.Errorf("Valid(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestNew(t *testing.T) {
	a, b := requestid.New(), requestid.New()
	if !requestid.Valid(a) || len(a) != 32 || a == b {
		t.Fatalf("New() = %q, %q; want two different 32-character ids", a, b)
	}
}

func TestHandlerAddsTheRequestAndItsTrace(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(requestid.NewHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	ctx := requestid.With(context.Background(), "req-1")
	ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	})
	log.InfoContext(ctx, "about the request")
	log.Info("about nothing in particular")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2: %q", len(lines), buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"request_id": "req-1",
		"trace_id":   "4bf92f3577b34da6a3ce929d0e0e4736",
		"span_id":    "00f067aa0ba902b7",
		"component":  "test",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %q (line %s)", k, got[k], v, lines[0])
		}
	}
	if strings.Contains(lines[1], "request_id") || strings.Contains(lines[1], "trace_id") {
		t.Errorf("a line without a request carries its fields: %s", lines[1])
	}
	if sc := trace.SpanContextFromContext(ctx); !sc.IsRemote() {
		t.Error("the extracted span context is not remote")
	}
}
