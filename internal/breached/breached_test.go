package breached_test

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/breached"
	"github.com/guardian-sec/guardian/internal/breached/breachedtest"
)

// build builds a filter of cfg from the named files into a file in a
// temporary directory, and returns its path and the build's stats.
func build(t testing.TB, cfg breached.BuildConfig, inputs ...string) (string, breached.Stats) {
	t.Helper()
	b, err := breached.NewBuilder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, in := range inputs {
		f, err := os.Open(in)
		if err != nil {
			t.Fatal(err)
		}
		err = b.Read(context.Background(), in, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "breached.bgf")
	st, err := b.Write(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}

// buildFrom builds a filter of cfg from input into a file in a temporary
// directory, and returns its path and the build's stats.
func buildFrom(t testing.TB, cfg breached.BuildConfig, input string) (string, breached.Stats) {
	t.Helper()
	b, err := breached.NewBuilder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Read(context.Background(), "-", strings.NewReader(input)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.bgf")
	st, err := b.Write(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return path, st
}

func open(t testing.TB, path string) *breached.Filter {
	t.Helper()
	f, err := breached.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// falsePositives counts the random passwords, none of them in any list a
// test builds, that f reports breached.
func falsePositives(t *testing.T, f *breached.Filter, n int) int {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 11))
	var raw [12]byte
	fp := 0
	for range n {
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		// "random-" keeps them apart from every generated list.
		if f.ContainsPassword("random-" + base64.RawURLEncoding.EncodeToString(raw[:])) {
			fp++
		}
	}
	return fp
}

// checkFalsePositives measures f's false-positive rate over a million
// random passwords and fails t above 0.5%.
func checkFalsePositives(t *testing.T, f *breached.Filter) {
	t.Helper()
	const n = 1_000_000
	fp := falsePositives(t, f, n)
	rate := float64(fp) / n
	t.Logf("false positives: %d of %d random passwords (%.3f%%; expected %.3f%%)", fp, n, 100*rate, 100*breached.FalsePositiveRate)
	if rate > 0.005 {
		t.Errorf("false-positive rate %.3f%%, want at most 0.5%%", 100*rate)
	}
}

func TestJohnTheRipperList(t *testing.T) {
	pws := breachedtest.JohnPasswords(t)
	path, st := build(t, breached.BuildConfig{Format: breached.Plain}, breachedtest.JohnList)
	distinct := map[string]bool{}
	for _, p := range pws {
		distinct[p] = true
	}
	if st.Entries != uint64(len(distinct)) || st.Lines != int64(len(pws)) {
		t.Errorf("stats %+v, want %d lines and %d entries", st, len(pws), len(distinct))
	}
	f := open(t, path)
	info := f.Info()
	if info.Format != breached.Plain || info.Entries != uint64(len(distinct)) || info.Bytes != st.Bytes || info.MinCount != 0 {
		t.Errorf("info %+v, want plain, %d entries, %d bytes", info, len(distinct), st.Bytes)
	}
	t.Logf("%d passwords: %d bytes, %.1f bits an entry", len(distinct), st.Bytes, st.BitsPerEntry())
	for _, p := range pws {
		if !f.ContainsPassword(p) {
			t.Errorf("ContainsPassword(%q) = false, want true", p)
		}
		in, err := f.ContainsSHA1(sha1.Sum([]byte(p)))
		if !in || err != nil {
			t.Errorf("ContainsSHA1(sha1(%q)) = %v, %v; want true", p, in, err)
		}
	}
	if _, err := f.ContainsNTLM(breached.NTLMHash("password")); !errors.Is(err, breached.ErrWrongHash) {
		t.Errorf("ContainsNTLM on a plain filter: %v, want ErrWrongHash", err)
	}
	checkFalsePositives(t, f)
}

// generated returns n made-up passwords with counts from 1 to 100.
func generated(n int, seed uint64) []breachedtest.Entry {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]breachedtest.Entry, n)
	for i := range out {
		out[i] = breachedtest.Entry{Password: fmt.Sprintf("pw-%d-%x", i, rng.Uint64()), Count: 1 + rng.Uint64N(100)}
	}
	return out
}

func TestHIBPListsWithMinCount(t *testing.T) {
	es := generated(200_000, 3)
	for _, format := range []breached.Format{breached.SHA1, breached.NTLM} {
		t.Run(string(format), func(t *testing.T) {
			list := breachedtest.List(t, format, es)
			path, st := build(t, breached.BuildConfig{Format: format, MinCount: 10}, list)
			f := open(t, path)
			var kept, droppedIn, dropped int
			for _, e := range es {
				in := f.ContainsPassword(e.Password)
				if e.Count >= 10 {
					kept++
					if !in {
						t.Fatalf("%q (count %d) not in the filter", e.Password, e.Count)
					}
					continue
				}
				dropped++
				if in {
					droppedIn++
				}
			}
			if st.Entries != uint64(kept) || st.Kept != int64(kept) || st.Lines != int64(len(es)) {
				t.Errorf("stats %+v, want %d lines, %d kept and entries", st, len(es), kept)
			}
			if info := f.Info(); info.Format != format || info.MinCount != 10 || info.Entries != uint64(kept) {
				t.Errorf("info %+v", info)
			}
			// Passwords below the minimum are left out: only false
			// positives answer true.
			if rate := float64(droppedIn) / float64(dropped); rate > 0.005 {
				t.Errorf("%d of %d passwords below --min-count answer true (%.2f%%)", droppedIn, dropped, 100*rate)
			}
			t.Logf("%s: %d entries, %d bytes, %.2f bits an entry", format, st.Entries, st.Bytes, st.BitsPerEntry())
			checkFalsePositives(t, f)
		})
	}
}

func TestNTLMFilter(t *testing.T) {
	// Known values: the NTLM hash of "password" and its SHA-1.
	const ntlmPassword = "8846f7eaee8fb117ad06bdd830b7586c"
	if got := breached.NTLMHash("password"); hex.EncodeToString(got[:]) != ntlmPassword {
		t.Fatalf("NTLMHash(password) = %x, want %s", got, ntlmPassword)
	}
	list := filepath.Join(t.TempDir(), "ntlm.txt")
	if err := os.WriteFile(list, []byte(strings.ToUpper(ntlmPassword)+":9545824\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path, _ := build(t, breached.BuildConfig{Format: breached.NTLM}, list)
	f := open(t, path)
	if !f.ContainsPassword("password") {
		t.Error("ContainsPassword(password) = false on its NTLM filter")
	}
	if in, err := f.ContainsNTLM(breached.NTLMHash("password")); !in || err != nil {
		t.Errorf("ContainsNTLM = %v, %v", in, err)
	}
	if _, err := f.ContainsSHA1(sha1.Sum([]byte("password"))); !errors.Is(err, breached.ErrWrongHash) {
		t.Errorf("ContainsSHA1 on an NTLM filter: %v, want ErrWrongHash", err)
	}
}

// TestSpilledBuild builds the same list in memory and through spill files:
// both hold every entry and no other.
func TestSpilledBuild(t *testing.T) {
	es := generated(60_000, 5)
	// Duplicates, across spills: one entry counted once.
	list := breachedtest.List(t, breached.SHA1, append(es, es[:5000]...))
	mem, memSt := build(t, breached.BuildConfig{Format: breached.SHA1}, list)
	// Shards of at most 1,000 keys: 64 for 60,000 distinct keys in
	// memory; 128 spilled, where the count is of lines kept (65,000).
	sharded, shardSt := build(t, breached.BuildConfig{Format: breached.SHA1, ShardKeys: 1000}, list)
	spillDir := t.TempDir()
	spilled, spillSt := build(t, breached.BuildConfig{Format: breached.SHA1, MemoryKeys: 4096, ShardKeys: 1000, TempDir: spillDir}, list)
	// Shards as large as they come: one spill file each, 256.
	files, filesSt := build(t, breached.BuildConfig{Format: breached.SHA1, MemoryKeys: 4096, ShardKeys: 1, TempDir: spillDir}, list)
	if memSt.Spilled || shardSt.Spilled || !spillSt.Spilled || !filesSt.Spilled {
		t.Fatalf("spilled: %v %v %v %v, want the last two only", memSt.Spilled, shardSt.Spilled, spillSt.Spilled, filesSt.Spilled)
	}
	for _, c := range []struct {
		st     breached.Stats
		shards int
	}{{memSt, 1}, {shardSt, 64}, {spillSt, 128}, {filesSt, 256}} {
		if c.st.Entries != uint64(len(es)) || c.st.Shards != c.shards {
			t.Errorf("%d entries in %d shards, want %d in %d", c.st.Entries, c.st.Shards, len(es), c.shards)
		}
	}
	left, err := os.ReadDir(spillDir)
	if err != nil || len(left) != 0 {
		t.Errorf("spill directory after the build: %v, %v; want empty", left, err)
	}
	for _, path := range []string{mem, sharded, spilled, files} {
		f := open(t, path)
		for _, e := range es {
			if !f.ContainsPassword(e.Password) {
				t.Fatalf("%s: %q missing", filepath.Base(path), e.Password)
			}
		}
		if fp := falsePositives(t, f, 100_000); fp > 500 {
			t.Errorf("%d false positives in 100,000", fp)
		}
	}
}

func TestBuildRefusesBadInput(t *testing.T) {
	sha := breachedtest.Hex(breached.SHA1, "x")
	ntlm := breachedtest.Hex(breached.NTLM, "x")
	for _, tc := range []struct {
		name   string
		cfg    breached.BuildConfig
		input  string
		errHas string
	}{
		{"ntlm in a sha1 build", breached.BuildConfig{Format: breached.SHA1}, sha + ":1\n" + ntlm + ":2\n", "list.txt:2: a hash of 32 characters, like NTLM (--format ntlm)"},
		{"sha1 in an ntlm build", breached.BuildConfig{Format: breached.NTLM}, sha + ":1\n", "list.txt:1: a hash of 40 characters, like SHA-1 (--format sha1)"},
		{"passwords in a sha1 build", breached.BuildConfig{Format: breached.SHA1}, "123456\n", "list.txt:1: a hash of 6 characters; want 40 hex digits (SHA-1) (a list of passwords is --format plain)"},
		{"not hex", breached.BuildConfig{Format: breached.SHA1}, strings.Repeat("g", 40) + ":1\n", "list.txt:1: the hash has a character that is not a hex digit"},
		{"bad count", breached.BuildConfig{Format: breached.SHA1}, sha + ":-1\n", "list.txt:1: the count is not a decimal number"},
		{"empty count", breached.BuildConfig{Format: breached.SHA1}, sha + ":\n", "list.txt:1: no count after ':'"},
		{"huge count", breached.BuildConfig{Format: breached.SHA1}, sha + ":18446744073709551616\n", "list.txt:1: the count does not fit 64 bits"},
		{"no count with a minimum", breached.BuildConfig{Format: breached.SHA1, MinCount: 2}, sha + "\n", "list.txt:1: no count, and --min-count needs one"},
		{"long line", breached.BuildConfig{Format: breached.Plain}, strings.Repeat("a", 70_000) + "\n", "list.txt:1: a line longer than 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := breached.NewBuilder(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			err = b.Read(context.Background(), "list.txt", strings.NewReader(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("Read: %v, want an error with %q", err, tc.errHas)
			}
		})
	}
	if _, err := breached.NewBuilder(breached.BuildConfig{Format: breached.Plain, MinCount: 5}); err == nil {
		t.Error("a plain build with a minimum count was accepted")
	}
	if _, err := breached.NewBuilder(breached.BuildConfig{Format: "md5"}); err == nil {
		t.Error("format md5 was accepted")
	}
	b, err := breached.NewBuilder(breached.BuildConfig{Format: breached.SHA1, MinCount: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Read(context.Background(), "low.txt", strings.NewReader(sha+":3\n\n"+sha+":0\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write(context.Background(), filepath.Join(t.TempDir(), "x.bgf")); !errors.Is(err, breached.ErrEmpty) {
		t.Errorf("Write of nothing kept: %v, want ErrEmpty", err)
	}
}

// TestHashLinesAsTheyCome reads the line forms a list may have: either
// case, a bare hash, CRLF, blank lines, a last line without a newline, and
// the padding entries of the range API (count 0), which are left out.
func TestHashLinesAsTheyCome(t *testing.T) {
	pw := func(i int) string { return fmt.Sprintf("line-%d", i) }
	input := strings.ToUpper(breachedtest.Hex(breached.SHA1, pw(0))) + ":5\r\n" +
		breachedtest.Hex(breached.SHA1, pw(1)) + "\n\n" +
		breachedtest.Hex(breached.SHA1, pw(2)) + ":0\n" +
		breachedtest.Hex(breached.SHA1, pw(3)) + ":1"
	path, st := buildFrom(t, breached.BuildConfig{Format: breached.SHA1, BuiltAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)}, input)
	if st.Lines != 4 || st.Entries != 3 {
		t.Errorf("stats %+v, want 4 lines and 3 entries", st)
	}
	f := open(t, path)
	// The padding entry is not an entry (3 of 4); the others are in.
	for _, i := range []int{0, 1, 3} {
		if !f.ContainsPassword(pw(i)) {
			t.Errorf("ContainsPassword(%s) = false, want true", pw(i))
		}
	}
	if got := f.Info().BuiltAt; !got.Equal(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("BuiltAt %v", got)
	}
}

func TestPlainListsAsTheyCome(t *testing.T) {
	// A byte order mark, CRLF, blank lines, a comment, and a password
	// with spaces kept as it is.
	input := "\xef\xbb\xbfhunter2\r\n\n#!comment: not a password\ncorrect horse battery staple \nhunter2\n"
	path, st := buildFrom(t, breached.BuildConfig{Format: breached.Plain}, input)
	if st.Lines != 3 || st.Entries != 2 {
		t.Errorf("stats %+v, want 3 lines and 2 entries", st)
	}
	f := open(t, path)
	for _, p := range []string{"hunter2", "correct horse battery staple "} {
		if !f.ContainsPassword(p) {
			t.Errorf("%q missing", p)
		}
	}
}

func TestParseSHA1(t *testing.T) {
	const sum = "5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8" // SHA-1 of "password"
	for _, s := range []string{sum, strings.ToLower(sum), "5baa61e4C9B93F3F0682250B6CF8331B7EE68FD8"} {
		got, ok := breached.ParseSHA1(s)
		if !ok || got != sha1.Sum([]byte("password")) {
			t.Errorf("ParseSHA1(%s) = %x, %v", s, got, ok)
		}
	}
	for _, s := range []string{"", sum[:39], sum + "0", "g" + sum[1:], " " + sum[1:]} {
		if _, ok := breached.ParseSHA1(s); ok {
			t.Errorf("ParseSHA1(%q) accepted", s)
		}
	}
}

// TestCancelledBuild: a build stopped midway leaves no file, no part of
// one and no spill file behind.
func TestCancelledBuild(t *testing.T) {
	es := generated(1<<17, 9)
	list := breachedtest.List(t, breached.SHA1, es)
	dir, spillDir := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	b, err := breached.NewBuilder(breached.BuildConfig{Format: breached.SHA1, MemoryKeys: 1000, TempDir: spillDir})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(list)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cancel()
	if err := b.Read(ctx, list, f); !errors.Is(err, context.Canceled) {
		t.Errorf("Read after cancel: %v, want context.Canceled", err)
	}
	if _, err := b.Write(ctx, filepath.Join(dir, "x.bgf")); !errors.Is(err, context.Canceled) {
		t.Errorf("Write after cancel: %v, want context.Canceled", err)
	}
	for _, d := range []string{dir, spillDir} {
		if left, _ := os.ReadDir(d); len(left) != 0 {
			t.Errorf("%s after a cancelled build: %v", d, left)
		}
	}
}
