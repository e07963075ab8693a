// Package tracing exports OpenTelemetry traces of guardian's checks and
// reports over OTLP/HTTP, each with its store calls as child spans. It is
// off unless serve is given --otlp-endpoint; off, nothing is traced and no
// span is made.
package tracing

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/version"
)

// Name is the instrumentation scope of guardian's spans.
const Name = "github.com/guardian-sec/guardian"

// Propagator reads and writes W3C traceparent and tracestate.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Provider is a tracer provider exporting to an OTLP/HTTP collector. Close
// it on shutdown to send what is buffered.
type Provider struct {
	sdk *sdktrace.TracerProvider
}

// New returns a Provider exporting to endpoint, the collector's base URL
// ("http://collector:4318"; spans go to its /v1/traces). Spans are batched
// and sent in the background; a collector that is down costs dropped spans,
// never a slower check.
func New(endpoint string) (*Provider, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracing: %q is not an http or https URL", endpoint)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(u.JoinPath("v1", "traces").String())}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	v := version.Get()
	res := resource.NewSchemaless(semconv.ServiceName("guardian"), semconv.ServiceVersion(v.Version))
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res),
	)
	return &Provider{sdk: sdk}, nil
}

// Tracer returns guardian's tracer.
func (p *Provider) Tracer() trace.Tracer { return p.sdk.Tracer(Name) }

// Close sends the spans still buffered and stops the exporter.
func (p *Provider) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.sdk.Shutdown(ctx)
}

// Store is a store.Store whose every call is a span, a child of the span
// in its context.
type Store struct {
	next   store.Store
	tracer trace.Tracer
}

var _ store.Store = (*Store)(nil)

// WrapStore returns next with its calls traced by tracer.
func WrapStore(next store.Store, tracer trace.Tracer) *Store {
	return &Store{next: next, tracer: tracer}
}

func (s *Store) start(ctx context.Context, op string, n int) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, "store."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.Int("guardian.store.ops", n)))
}

func end(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Do traces next.Do.
func (s *Store) Do(ctx context.Context, ops []store.Op, res []store.Result) error {
	ctx, span := s.start(ctx, "do", len(ops))
	err := s.next.Do(ctx, ops, res)
	degraded(span, res)
	end(span, err)
	return err
}

// Peek traces next.Peek.
func (s *Store) Peek(ctx context.Context, ops []store.Op, res []store.Result) error {
	ctx, span := s.start(ctx, "peek", len(ops))
	err := s.next.Peek(ctx, ops, res)
	degraded(span, res)
	end(span, err)
	return err
}

// Settle traces next.Settle.
func (s *Store) Settle(ctx context.Context, settlements []store.Settlement) error {
	ctx, span := s.start(ctx, "settle", len(settlements))
	err := s.next.Settle(ctx, settlements)
	end(span, err)
	return err
}

// Delete traces next.Delete.
func (s *Store) Delete(ctx context.Context, keys ...string) error {
	ctx, span := s.start(ctx, "delete", len(keys))
	err := s.next.Delete(ctx, keys...)
	end(span, err)
	return err
}

// Familiar traces next.Familiar.
func (s *Store) Familiar(ctx context.Context, key string) ([]string, error) {
	ctx, span := s.start(ctx, "familiar", 1)
	members, err := s.next.Familiar(ctx, key)
	end(span, err)
	return members, err
}

// MarkOnce traces next.MarkOnce.
func (s *Store) MarkOnce(ctx context.Context, key string, ttl time.Duration, settlements ...store.Settlement) (bool, error) {
	ctx, span := s.start(ctx, "mark_once", 1+len(settlements))
	first, err := s.next.MarkOnce(ctx, key, ttl, settlements...)
	end(span, err)
	return first, err
}

// degraded marks a span whose ops the fallback decided.
func degraded(span trace.Span, res []store.Result) {
	for i := range res {
		if res[i].Degraded {
			span.SetAttributes(attribute.Bool("guardian.degraded", true))
			return
		}
	}
}
