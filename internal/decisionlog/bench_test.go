package decisionlog_test

import (
	"context"
	"io"
	"testing"

	"github.com/guardian-sec/guardian/internal/decisionlog"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
)

// BenchmarkLogCheck measures what the decision log adds to a check: the
// pseudonyms and the buffered line.
func BenchmarkLogCheck(b *testing.B) {
	for _, ip := range []string{"203.0.113.7", "2001:db8:1:2::7"} {
		b.Run(ip, func(b *testing.B) {
			l := decisionlog.New(decisionlog.Config{Out: io.Discard, Key: testKey})
			defer l.Close()
			req := engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: ip}
			d := engine.Decision{Action: rules.Allow, AttemptID: "an-attempt-id"}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l.Check(ctx, req, d)
			}
		})
	}
}
