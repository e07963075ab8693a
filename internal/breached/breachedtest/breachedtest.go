// Package breachedtest builds breached-password filter files for the tests
// of the packages that load them.
package breachedtest

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
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
		if format == breached.Plain {
			list.WriteString(p)
		} else {
			list.WriteString(Hex(format, p) + ":1")
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

// JohnList is John the Ripper's list of about 3,500 common passwords, from
// Debian's john-data package (.ci/run installs it; it is never committed).
const JohnList = "/usr/share/john/password.lst"

// JohnPasswords returns the passwords of JohnList, its comment lines left
// out, and fails tb when it is not installed.
func JohnPasswords(tb testing.TB) []string {
	tb.Helper()
	b, err := os.ReadFile(JohnList)
	if err != nil {
		tb.Fatalf("%v: install Debian's john-data (apt-get install john-data)", err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if line != "" && !strings.HasPrefix(line, "#!comment:") {
			out = append(out, line)
		}
	}
	return out
}

// Entry is one line of a Have I Been Pwned list: a password, by its hash,
// and how often it was seen.
type Entry struct {
	Password string
	Count    uint64
}

// List writes es as a Have I Been Pwned list of format (sha1 or ntlm) into
// a file in a temporary directory of tb and returns its path: in the order
// given, hex digits in upper and lower case, a few lines with CRLF and the
// last without a newline, as the lists come.
func List(tb testing.TB, format breached.Format, es []Entry) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), string(format)+".txt")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i, e := range es {
		h := Hex(format, e.Password)
		if i%2 == 0 {
			h = strings.ToUpper(h)
		}
		end := "\n"
		if i%7 == 0 {
			end = "\r\n"
		}
		if i == len(es)-1 {
			end = ""
		}
		fmt.Fprintf(w, "%s:%d%s", h, e.Count, end)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Hex is the hash of password a list of format holds, in lower-case hex:
// its NTLM hash for ntlm, its SHA-1 otherwise.
func Hex(format breached.Format, password string) string {
	if format == breached.NTLM {
		h := breached.NTLMHash(password)
		return hex.EncodeToString(h[:])
	}
	return SHA1(password)
}
