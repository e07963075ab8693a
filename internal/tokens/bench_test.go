package tokens

import (
	"testing"
	"time"
)

func BenchmarkVerifyCached(b *testing.B) {
	s := NewService(testKey(b, 1))
	tok, err := s.Issue(ScopeCheck, "auth-api", time.Hour, t0)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Verify(tok, t0); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(tok, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyCachedParallel(b *testing.B) {
	s := NewService(testKey(b, 1))
	tok, err := s.Issue(ScopeCheck, "auth-api", time.Hour, t0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Verify(tok, t0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkVerifyUncached measures what a token costs the first time it is
// seen: parsing and checking it, without the cache.
func BenchmarkVerifyUncached(b *testing.B) {
	s := NewService(testKey(b, 1))
	tok, err := s.Issue(ScopeCheck, "auth-api", time.Hour, t0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSeal(b *testing.B) {
	a := NewAttempts(testKey(b, 1))
	at := sampleAttempt()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Seal(at); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	a := NewAttempts(testKey(b, 1))
	tok, err := a.Seal(sampleAttempt())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.Open(tok, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeviceVerify(b *testing.B) {
	d := NewDevices(testKey(b, 1), 0)
	tok, _, err := d.Issue(alice, t0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Verify(tok, alice, t0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeviceIssue(b *testing.B) {
	d := NewDevices(testKey(b, 1), 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := d.Issue(alice, t0); err != nil {
			b.Fatal(err)
		}
	}
}
