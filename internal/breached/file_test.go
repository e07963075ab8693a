package breached_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/guardian-sec/guardian/internal/breached"
)

// smallFilter returns the bytes of a filter of a few passwords.
func smallFilter(t testing.TB) []byte {
	t.Helper()
	path, _ := buildFrom(t, breached.BuildConfig{Format: breached.Plain}, "123456\npassword\nqwerty\nletmein\n")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// resum replaces data's checksum with the right one, so that what is
// refused is refused for the change itself.
func resum(data []byte) []byte {
	out := append([]byte(nil), data...)
	sum := sha256.Sum256(out[:len(out)-sha256.Size])
	copy(out[len(out)-sha256.Size:], sum[:])
	return out
}

func TestCorruptFilesAreRefused(t *testing.T) {
	good := smallFilter(t)
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name   string
		data   []byte
		errHas string
	}{
		{"empty", nil, "no filter header"},
		{"another file", []byte("5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:9545824\n"), "no filter header"},
		{"header only", good[:64], "cut short: 64 bytes"},
		{"cut short", good[:len(good)-10], "cut short"},
		{"a byte more", append(append([]byte(nil), good...), 0), "1 bytes more than its header and shard table say"},
		{"a flipped fingerprint", edit(func(b []byte) []byte { b[64+24+3] ^= 0x10; return b }), "checksum mismatch: the file is corrupted"},
		{"a flipped checksum", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), "checksum mismatch"},
		{"a changed entry count", edit(func(b []byte) []byte { b[16]++; return b }), "checksum mismatch"},
		{"version 2", edit(func(b []byte) []byte { b[8] = 2; return b }), "format version 2; this guardian reads version 1"},
		{"CRLF rewritten", edit(func(b []byte) []byte { return append(append(b[:4:4], '\n'), b[6:]...) }), "no filter header"},
		{"unknown source format", resum(edit(func(b []byte) []byte { b[10] = 9; return b })), "unknown source format 9"},
		{"unknown filter kind", resum(edit(func(b []byte) []byte { b[11] = 2; return b })), "unknown filter kind 2"},
		{"too many shard bits", resum(edit(func(b []byte) []byte { b[12] = 17; return b })), "17 shard bits"},
		{"reserved header bytes", resum(edit(func(b []byte) []byte { b[50] = 1; return b })), "reserved header bytes are not zero"},
		{"header entries disagree", resum(edit(func(b []byte) []byte { b[16]++; return b })), "its shards hold 4 entries, its header says 5"},
		{"segment length not a power of two", resum(edit(func(b []byte) []byte {
			// Keep the size: segments × (count+2) the same.
			l := binary.LittleEndian.Uint32(b[64+8:])
			c := binary.LittleEndian.Uint32(b[64+12:])
			binary.LittleEndian.PutUint32(b[64+8:], 3)
			binary.LittleEndian.PutUint32(b[64+12:], l*(c+2)/3-2)
			return b
		})), "segment length 3"},
		{"shard reserved bytes", resum(edit(func(b []byte) []byte { b[64+20] = 1; return b })), "shard 0: reserved bytes are not zero"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.bgf")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := breached.Open(path)
			if err == nil {
				t.Fatalf("Open accepted it: %+v", f.Info())
			}
			if !errors.Is(err, breached.ErrInvalidFile) || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), path) {
				t.Errorf("Open: %v; want ErrInvalidFile naming the file, with %q", err, tc.errHas)
			}
			if _, perr := breached.Parse(tc.data); !errors.Is(perr, breached.ErrInvalidFile) {
				t.Errorf("Parse: %v, want ErrInvalidFile", perr)
			}
		})
	}
	if _, err := breached.Parse(good); err != nil {
		t.Fatalf("the good file: %v", err)
	}
	if _, err := breached.Open(filepath.Join(t.TempDir(), "missing.bgf")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open of no file: %v, want ErrNotExist", err)
	}
	if _, err := breached.Open(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Open of a directory: %v", err)
	}
}

// TestFileIsTheSameForTheSameBuild: a build is deterministic, so two
// builds of one list at one time are one file, and the checksum names it.
func TestFileIsTheSameForTheSameBuild(t *testing.T) {
	a, b := smallFilter(t), smallFilter(t)
	// The build times may differ by a second: compare past them.
	if string(a[:24]) != string(b[:24]) || string(a[32:len(a)-32]) != string(b[32:len(b)-32]) {
		t.Error("two builds of one list differ")
	}
	f, err := breached.Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(a[:len(a)-32])
	if got := f.Info().Checksum; got != hex.EncodeToString(sum[:]) {
		t.Errorf("Checksum %s, want %x", got, sum)
	}
}

// TestZeroFilter: the zero Filter holds nothing.
func TestZeroFilter(t *testing.T) {
	var f breached.Filter
	if f.ContainsPassword("password") {
		t.Error("the zero Filter holds password")
	}
}
