package secret

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewRejectsShortKeys(t *testing.T) {
	if _, err := New(make([]byte, MinLen-1)); !errors.Is(err, ErrTooShort) {
		t.Fatalf("New(31 bytes) error = %v, want ErrTooShort", err)
	}
	if _, err := New(make([]byte, MinLen)); err != nil {
		t.Fatalf("New(32 bytes) error = %v", err)
	}
}

func TestDeriveSeparatesPurposes(t *testing.T) {
	k, err := New(bytes.Repeat([]byte{7}, MinLen))
	if err != nil {
		t.Fatal(err)
	}
	a, b := k.Derive("a"), k.Derive("b")
	if bytes.Equal(a, b) {
		t.Fatal("two purposes derived the same key")
	}
	if !bytes.Equal(a, k.Derive("a")) {
		t.Fatal("Derive is not deterministic")
	}
	if len(a) != 32 {
		t.Fatalf("len = %d, want 32", len(a))
	}
	if bytes.Equal(Generate().Derive("a"), Generate().Derive("a")) {
		t.Fatal("two generated keys derived the same key")
	}
}

func TestParseKeys(t *testing.T) {
	a := bytes.Repeat([]byte{'a'}, MinLen)
	b := bytes.Repeat([]byte{'b'}, MinLen+8)
	tests := []struct {
		name    string
		text    string
		want    [][]byte
		wantErr error
		line    string
	}{
		{"one key, no newline", string(a), [][]byte{a}, nil, ""},
		{"one key, a newline", string(a) + "\n", [][]byte{a}, nil, ""},
		{"two keys, CRLF, blank lines", "\r\n" + string(a) + "\r\n\n" + string(b) + "\n\n", [][]byte{a, b}, nil, ""},
		{"spaces belong to the key", " " + string(a) + " \n", [][]byte{append(append([]byte(" "), a...), ' ')}, nil, ""},
		{"empty", "", nil, ErrNoKey, ""},
		{"blank lines only", "\n\r\n\n", nil, ErrNoKey, ""},
		{"short second key", string(a) + "\nshort\n", nil, ErrTooShort, "line 2: "},
		{"repeated key", string(a) + "\n" + string(b) + "\n" + string(a) + "\n", nil, ErrRepeated, "line 3: "},
	}
	for _, tt := range tests {
		got, err := ParseKeys([]byte(tt.text))
		if !errors.Is(err, tt.wantErr) || (err != nil && !strings.HasPrefix(err.Error(), tt.line)) {
			t.Errorf("%s: error %v, want %v starting %q", tt.name, err, tt.wantErr, tt.line)
			continue
		}
		if len(got) != len(tt.want) {
			t.Errorf("%s: %d keys, want %d", tt.name, len(got), len(tt.want))
			continue
		}
		for i := range got {
			want, _ := New(tt.want[i])
			if !got[i].Equal(want) {
				t.Errorf("%s: key %d differs", tt.name, i+1)
			}
		}
	}
}

func TestReadKeysNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKeys(path); !errors.Is(err, ErrTooShort) || !strings.HasPrefix(err.Error(), path+": line 1: ") {
		t.Errorf("ReadKeys = %v, want the file, the line and ErrTooShort", err)
	}
	if _, err := ReadKeys(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadKeys(missing) = %v, want os.ErrNotExist", err)
	}
}

func TestIDNamesAKeyWithoutRevealingIt(t *testing.T) {
	raw := bytes.Repeat([]byte{'k'}, MinLen)
	k, _ := New(raw)
	same, _ := New(raw)
	other, _ := New(bytes.Repeat([]byte{'l'}, MinLen))
	id := k.ID()
	if id != same.ID() {
		t.Fatal("one key, two ids")
	}
	if id == other.ID() {
		t.Fatal("two keys, one id")
	}
	if len(id) != 12 || strings.ContainsAny(id, "+/=") {
		t.Fatalf("id %q: want 12 characters of unpadded base64url", id)
	}
	for _, d := range [][]byte{k.Derive("guardian service tokens v1"), raw} {
		if strings.Contains(string(d), id) || bytes.Contains(d, []byte(id)) {
			t.Fatal("the id appears in the key or a derived key")
		}
	}
}

func FuzzParseKeys(f *testing.F) {
	f.Add([]byte("0123456789abcdef0123456789abcdef\n"))
	f.Add([]byte("0123456789abcdef0123456789abcdef\r\nfedcba9876543210fedcba9876543210\n\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte("short"))
	f.Fuzz(func(t *testing.T, text []byte) {
		keys, err := ParseKeys(text)
		if err != nil {
			if keys != nil {
				t.Fatal("keys with an error")
			}
			return
		}
		if len(keys) == 0 {
			t.Fatal("no keys and no error")
		}
		for i, k := range keys {
			if len(k.b) < MinLen || bytes.ContainsAny(k.b, "\n") || bytes.HasSuffix(k.b, []byte("\r")) {
				t.Fatalf("key %d of %q: %q", i, text, k.b)
			}
			for _, o := range keys[:i] {
				if o.Equal(k) {
					t.Fatalf("key %d repeated", i)
				}
			}
		}
	})
}
