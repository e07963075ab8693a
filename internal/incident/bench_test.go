package incident_test

import (
	"testing"

	"github.com/guardian-sec/guardian/internal/incident"
	"github.com/guardian-sec/guardian/internal/rules"
)

// BenchmarkDecided is what every check adds to its path for the incident
// view: one allowed decision.
func BenchmarkDecided(b *testing.B) {
	bk := incident.NewBook(incident.BookConfig{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bk.Decided(rules.Allow, "")
		}
	})
}

// BenchmarkTripped is what a check an enforced rule stops adds: its
// decision and its key.
func BenchmarkTripped(b *testing.B) {
	bk := incident.NewBook(incident.BookConfig{})
	b.ReportAllocs()
	for i := range b.N {
		bk.Decided(rules.Slow, "login-ip")
		bk.Tripped("login-ip", rules.Slow, []string{"AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"}[i%2])
	}
}
