package breached_test

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/guardian-sec/guardian/internal/breached"
)

// FuzzParse feeds the loader arbitrary files, as read and with their
// checksum made right (so the fuzzer reaches the checks past it): each is
// refused with ErrInvalidFile or loads into a filter whose lookups stay in
// bounds.
func FuzzParse(f *testing.F) {
	good := smallFilter(f)
	f.Add(good)
	f.Add(good[:64])
	f.Add(good[:len(good)-1])
	f.Add([]byte("\x89GBF\r\n\x1a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tries := [][]byte{data}
		if len(data) >= 32 {
			tries = append(tries, resum(data))
		}
		for _, d := range tries {
			flt, err := breached.Parse(d)
			if err != nil {
				if !errors.Is(err, breached.ErrInvalidFile) {
					t.Fatalf("Parse: %v, not ErrInvalidFile", err)
				}
				continue
			}
			if flt.Info().Bytes != int64(len(d)) {
				t.Fatalf("Info().Bytes %d of a %d-byte file", flt.Info().Bytes, len(d))
			}
			for i := range 64 {
				flt.ContainsPassword(strconv.Itoa(i))
			}
		}
	})
}

// FuzzParseHashLine reads arbitrary lines as SHA-1 and NTLM lines: a line
// accepted is HASH[:COUNT], and writing back what was read reads the same.
func FuzzParseHashLine(f *testing.F) {
	for _, s := range []string{
		"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:9545824",
		"5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8",
		"8846F7EAEE8FB117AD06BDD830B7586C:7491",
		"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:",
		"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:18446744073709551615",
		":1", "", "123456",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		for _, size := range []int{sha1.Size, breached.NTLMSize} {
			digest := make([]byte, size)
			count, hasCount, err := breached.ParseHashLine(line, digest)
			if err != nil {
				continue
			}
			hash, _, _ := bytes.Cut(line, []byte{':'})
			if !strings.EqualFold(string(hash), hex.EncodeToString(digest)) {
				t.Fatalf("%q read as hash %x", line, digest)
			}
			back := hex.EncodeToString(digest)
			if hasCount {
				back += ":" + strconv.FormatUint(count, 10)
			}
			digest2 := make([]byte, size)
			count2, hasCount2, err := breached.ParseHashLine([]byte(back), digest2)
			if err != nil || count2 != count || hasCount2 != hasCount || !bytes.Equal(digest2, digest) {
				t.Fatalf("%q read as %x %d %v; written back as %q, read as %x %d %v (%v)", line, digest, count, hasCount, back, digest2, count2, hasCount2, err)
			}
		}
	})
}

// FuzzPlainList builds a filter of an arbitrary plain list: every password
// of it is then in the filter.
func FuzzPlainList(f *testing.F) {
	f.Add([]byte("123456\npassword\r\n\n#!comment: x\n\xef\xbb\xbfqwerty"))
	f.Add([]byte("\xef\xbb\xbf\r\n"))
	f.Fuzz(func(t *testing.T, list []byte) {
		if len(list) >= 64<<10 {
			return // a line that long is refused (TestBuildRefusesBadInput)
		}
		b, err := breached.NewBuilder(breached.BuildConfig{Format: breached.Plain})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if err := b.Read(context.Background(), "fuzz", bytes.NewReader(list)); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i, line := range strings.SplitAfter(string(list), "\n") {
			line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
			if i == 0 {
				line = strings.TrimPrefix(line, "\xef\xbb\xbf")
			}
			if line != "" && !strings.HasPrefix(line, "#!comment:") {
				want = append(want, line)
			}
		}
		path := filepath.Join(t.TempDir(), "fuzz.bgf")
		st, err := b.Write(context.Background(), path)
		if len(want) == 0 {
			if !errors.Is(err, breached.ErrEmpty) {
				t.Fatalf("Write of no password: %v, want ErrEmpty", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if st.Lines != int64(len(want)) {
			t.Fatalf("%d lines read, want %d", st.Lines, len(want))
		}
		flt, err := breached.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range want {
			if !flt.ContainsPassword(p) {
				t.Fatalf("%q missing", p)
			}
		}
	})
}
