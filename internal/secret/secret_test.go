package secret

import (
	"bytes"
	"errors"
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
