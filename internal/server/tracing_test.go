package server_test

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// collector is an OTLP/HTTP trace receiver: it decodes what an exporter
// sends to /v1/traces with the OTLP protobuf types and keeps the spans.
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (c *collector) named(name string) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range c.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v := kv.Value.GetStringValue(); v != "" {
				return v
			}
			if kv.Value.GetBoolValue() {
				return "true"
			}
		}
	}
	return ""
}

// TestTracingExportsChecksAndReports: with an OTLP endpoint, a check is a
// span that continues the caller's traceparent and carries the decision,
// its store call is a child span, and a report is a span too; everything
// reaches a real OTLP receiver by shutdown.
func TestTracingExportsChecksAndReports(t *testing.T) {
	col := &collector{}
	ts := httptest.NewServer(col)
	defer ts.Close()
	srv, err := server.New(server.Config{Addr: "127.0.0.1:0", SigningKey: testKey, OTLPEndpoint: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	in := &instance{srv: srv, base: "http://" + srv.Addr(), checkToken: mustToken(t, tokens.NewService(testKey), tokens.ScopeCheck)}
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	resp := send(t, "POST", in.base+"/v1/check", in.checkToken, `{"flow":"login","account":"alice","ip":"198.51.100.7"}`, map[string]string{
		"traceparent": "00-" + traceID + "-" + parentID + "-01", "X-Request-Id": "traced-1",
	})
	if resp.StatusCode != 200 {
		t.Fatalf("check: %d", resp.StatusCode)
	}
	d := in.check(t, map[string]any{"flow": "login", "account": "bob", "ip": "198.51.100.8"})
	if r := in.report(t, str(d.body["attempt_id"]), "failure"); r.status != 200 {
		t.Fatalf("report: %d", r.status)
	}

	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	var check *tracepb.Span
	for _, s := range col.named("POST /v1/check") {
		if hex.EncodeToString(s.TraceId) == traceID {
			check = s
		}
	}
	if check == nil {
		t.Fatalf("no span of the traced check among %d spans", len(col.spans))
	}
	if got := hex.EncodeToString(check.ParentSpanId); got != parentID {
		t.Errorf("check span's parent = %s, want the caller's %s", got, parentID)
	}
	if check.Kind != tracepb.Span_SPAN_KIND_SERVER || attr(check, "guardian.decision") != "allow" || attr(check, "guardian.request_id") != "traced-1" {
		t.Errorf("check span kind %v, attributes %v; want a server span with decision allow and the request id", check.Kind, check.Attributes)
	}
	var child *tracepb.Span
	for _, s := range col.named("store.do") {
		if string(s.ParentSpanId) == string(check.SpanId) {
			child = s
		}
	}
	if child == nil || string(child.TraceId) != string(check.TraceId) {
		t.Fatalf("no store.do span that is a child of the check span")
	}
	if n := len(col.named("POST /v1/report")); n != 1 {
		t.Errorf("%d report spans, want 1", n)
	}
	if n := len(col.named("store.mark_once")); n == 0 {
		t.Error("the report's store call is not traced")
	}
}
