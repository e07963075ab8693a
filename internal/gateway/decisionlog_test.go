package gateway

import (
	"bytes"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/decisionlog"
	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/rules"
)

func TestDecisionLogLinesNameTheRoute(t *testing.T) {
	up := newTestUpstream(t)
	f, err := Parse("test.yaml", []byte(proxyFile(up.URL, "enforce", "")))
	if err != nil {
		t.Fatal(err)
	}
	eng, key := newTestEngine(t)
	var out bytes.Buffer
	dl := decisionlog.New(decisionlog.Config{Out: &out, Key: key, FlushEvery: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	gw, err := New(Config{File: f, Decider: decisionlog.Wrap(eng, dl), ChallengeKey: key.Derive("c"), FingerprintKey: key.Derive("f")})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw.Handler(0))
	defer srv.Close()
	g := &testGateway{gw: gw, srv: srv, up: up}
	g.basic(t, "hana", "secret-guess-1")
	if err := dl.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want a check and its report:\n%s", len(lines), out.String())
	}
	check, err := event.Parse([]byte(lines[0]))
	if err != nil {
		t.Fatal(err)
	}
	if check.Kind != event.Check || check.Route != "basic" || check.RequestID == "" || check.SecretFingerprint == "" {
		t.Errorf("check line: got %+v, want route basic, a request id and the fingerprint's pseudonym", check)
	}
	report, err := event.Parse([]byte(lines[1]))
	if err != nil || report.Outcome != rules.Failure || report.ID != check.ID {
		t.Errorf("report line: got %+v, %v", report, err)
	}
	if strings.Contains(out.String(), "secret-guess-1") || strings.Contains(out.String(), "hana") {
		t.Error("the decision log holds the secret or the account in clear")
	}
}
