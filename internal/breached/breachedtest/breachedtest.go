// Package breachedtest builds breached-password filter files for the tests
// of the packages that load them.
package breachedtest

import (
	"context"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/breached"
)

// BuiltAt is the build time of every filter File builds.
var BuiltAt = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// File builds a filter of format holding passwords into a new file in a
// temporary directory of tb, and returns its path. An NTLM filter is built
// from the passwords' NTLM hashes, as Have I Been Pwned's NTLM list has
// them.
func File(tb testing.TB, format breached.Format, passwords ...string) string {
	tb.Helper()
	b, err := breached.NewBuilder(breached.BuildConfig{Format: format, BuiltAt: BuiltAt, TempDir: tb.TempDir()})
	if err != nil {
		tb.Fatal(err)
	}
	defer b.Close()
	var list strings.Builder
	for _, p := range passwords {
		switch format {
		case breached.NTLM:
			h := breached.NTLMHash(p)
			list.WriteString(hex.EncodeToString(h[:]) + ":1")
		case breached.SHA1:
			list.WriteString(SHA1(p) + ":1")
		default:
			list.WriteString(p)
		}
		list.WriteString("\n")
	}
	if err := b.Read(context.Background(), "list", strings.NewReader(list.String())); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), "breached.bgf")
	if _, err := b.Write(context.Background(), path); err != nil {
		tb.Fatal(err)
	}
	return path
}

// SHA1 is the SHA-1 of password in lower-case hex, as a client sends it.
func SHA1(password string) string {
	sum := breached.SHA1Sum(password)
	return hex.EncodeToString(sum[:])
}

// NotIn returns a password that f answers false for (it answers true for 1
// in 256 passwords it does not hold).
func NotIn(tb testing.TB, f *breached.Filter) string {
	tb.Helper()
	for i := range 1000 {
		p := "not-breached-" + strings.Repeat("x", i)
		if !f.ContainsPassword(p) {
			return p
		}
	}
	tb.Fatal("no password outside the filter")
	return ""
}
