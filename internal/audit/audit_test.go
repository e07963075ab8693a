package audit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/guardian-sec/guardian/internal/audit"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/requestid"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
)

// A Log hears the engine's hard stops.
var _ engine.Events = (*audit.Log)(nil)

func TestLinesAndPseudonyms(t *testing.T) {
	var buf bytes.Buffer
	key := secret.Generate()
	m := metrics.New(prometheus.NewRegistry())
	l := audit.New(audit.Config{Key: key, Metrics: m, Logger: slog.New(requestid.NewHandler(slog.NewJSONHandler(&buf, nil)))})
	subject, err := keys.NewHasher(key).AccountSubject(nil, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	l.HardStopStarted("", subject)
	l.Action(requestid.With(context.Background(), "req-1"), audit.ActionReset, "ops", audit.ResultOK, " ALICE@example.com")
	l.Action(context.Background(), audit.ActionReset, "ops", audit.ResultError, "")
	l.Reload(requestid.With(context.Background(), "req-2"), "ops", audit.ResultOK,
		&rules.Changes{Added: []string{"new"}, Removed: []string{}, Changed: []rules.RuleChange{}, Settings: []string{}})
	l.Reload(requestid.With(context.Background(), "req-3"), "ops", audit.ResultError, nil)
	l.HardStopEnded("", subject)

	lines := logLines(t, &buf)
	p := l.Pseudonym(subject)
	want := []map[string]any{
		{"level": "INFO", "msg": "hard stop started", "event": "hard_stop_started", "account": p},
		{"level": "INFO", "msg": "admin action", "audit": true, "action": "reset", "subject": "ops", "result": "ok", "account": p, "request_id": "req-1"},
		{"level": "INFO", "msg": "admin action", "audit": true, "action": "reset", "subject": "ops", "result": "error"},
		{"level": "INFO", "msg": "admin action", "audit": true, "action": "reload", "subject": "ops", "result": "ok", "request_id": "req-2",
			"rules_added": []string{"new"}, "rules_removed": []string{}, "rules_changed": []string{}, "rules_promoted": []string{}, "rules_demoted": []string{}, "settings_changed": []string{}},
		{"level": "INFO", "msg": "admin action", "audit": true, "action": "reload", "subject": "ops", "result": "error", "request_id": "req-3"},
		{"level": "INFO", "msg": "hard stop ended", "event": "hard_stop_ended", "account": p},
	}
	if got, w := mustJSON(t, lines), mustJSON(t, want); got != w {
		t.Errorf("lines\n got %s\nwant %s", got, w)
	}
	if strings.Contains(strings.ToLower(buf.String()), "alice") || strings.Contains(buf.String(), subject) {
		t.Errorf("the account, or its store subject, in the log:\n%s", buf.String())
	}
	for _, c := range [][2]string{{"reset", "ok"}, {"reload", "ok"}, {"reload", "error"}} {
		if got := testutil.ToFloat64(m.AdminActions.WithLabelValues(c[0], c[1])); got != 1 {
			t.Errorf("admin actions %s %s = %v, want 1", c[0], c[1], got)
		}
	}
	other := audit.New(audit.Config{Key: secret.Generate(), Metrics: m})
	if other.Pseudonym(subject) == p {
		t.Error("pseudonyms do not depend on the key")
	}
}

// TestTenantLines: the lines of a tenant's account carry the tenant, and
// its account's pseudonym is the tenant's own, whichever line names it.
func TestTenantLines(t *testing.T) {
	var buf bytes.Buffer
	key := secret.Generate()
	l := audit.New(audit.Config{Key: key, Metrics: metrics.New(prometheus.NewRegistry()), Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	h := keys.NewHasher(key)
	inAcme, err := h.Tenant("acme").AccountSubject(nil, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := h.AccountSubject(nil, "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	l.HardStopStarted("acme", inAcme)
	l.Action(keys.WithTenant(context.Background(), "acme"), audit.ActionReset, "acme-ops", audit.ResultOK, "Alice@example.com")
	l.Action(context.Background(), audit.ActionReset, "ops", audit.ResultOK, "alice@example.com")

	lines := logLines(t, &buf)
	pa, p0 := l.Pseudonym(inAcme), l.Pseudonym(plain)
	want := []map[string]any{
		{"level": "INFO", "msg": "hard stop started", "event": "hard_stop_started", "tenant": "acme", "account": pa},
		{"level": "INFO", "msg": "admin action", "audit": true, "action": "reset", "subject": "acme-ops", "result": "ok", "tenant": "acme", "account": pa},
		{"level": "INFO", "msg": "admin action", "audit": true, "action": "reset", "subject": "ops", "result": "ok", "account": p0},
	}
	if got, w := mustJSON(t, lines), mustJSON(t, want); got != w {
		t.Errorf("lines\n got %s\nwant %s", got, w)
	}
	if pa == p0 {
		t.Errorf("one account name in two tenants has one pseudonym %q", pa)
	}
}

// logLines decodes the JSON lines in buf, without their time.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, s := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		delete(v, "time")
		lines = append(lines, v)
	}
	return lines
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
