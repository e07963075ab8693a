package keys

import (
	"errors"
	"regexp"
	"testing"
)

func TestPseudonym(t *testing.T) {
	h := NewHasher(testKey(t, 0))
	format := regexp.MustCompile(`^h-[A-Za-z0-9_-]{22}$`)
	a := h.Pseudonym(PseudonymAccount, "alice@example.com")
	if !format.MatchString(a) {
		t.Fatalf("pseudonym %q is not h- and 22 base64url characters", a)
	}
	if again := h.Pseudonym(PseudonymAccount, "alice@example.com"); again != a {
		t.Errorf("same account: %q then %q", a, again)
	}
	if r := h.Pseudonym(PseudonymRecipient, "alice@example.com"); r == a {
		t.Errorf("an account and a recipient of the same value share pseudonym %q", a)
	}
	other := NewHasher(testKey(t, 1))
	if o := other.Pseudonym(PseudonymAccount, "alice@example.com"); o == a {
		t.Errorf("two hash keys give the same pseudonym %q", a)
	}
}

func TestPseudonymOfSubject(t *testing.T) {
	h := NewHasher(testKey(t, 0))
	s, err := h.AccountSubject(nil, "Alice@Example.com")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := h.SubjectPseudonym(s), h.Pseudonym(PseudonymAccount, "alice@example.com"); got != want {
		t.Errorf("pseudonym of the account's subject %q, of the account %q", got, want)
	}
	tests := []struct{ a, b string }{
		{"198.51.100.0/24", "198.51.100.7/24"},
		{"192.0.2.1", "192.0.2.1/32"},
	}
	for _, tt := range tests {
		if a, b := h.Pseudonym(PseudonymNetwork, tt.a), h.Pseudonym(PseudonymNetwork, tt.b); a != b {
			t.Errorf("networks %s and %s: pseudonyms %q and %q", tt.a, tt.b, a, b)
		}
	}
}

func TestIsPseudonym(t *testing.T) {
	h := NewHasher(testKey(t, 0))
	tests := []struct {
		in   string
		want bool
	}{
		{h.Pseudonym(PseudonymAccount, "alice"), true},
		{"h-ohjXXnIYOeEQCt9ExlRekQ", true},
		{"h-4427a39b0d703a2356b0dfcc3430d92b", false},
		{"h-ohjXXnIYOeEQCt9ExlRek", false},
		{"x-ohjXXnIYOeEQCt9ExlRekQ", false},
		{"h-ohjXXnIYOeEQCt9ExlRe+Q", false},
		{"alice@example.com", false},
	}
	for _, tt := range tests {
		if got := IsPseudonym(tt.in); got != tt.want {
			t.Errorf("IsPseudonym(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestPseudonymOf(t *testing.T) {
	h := NewHasher(testKey(t, 0))
	tests := []struct {
		kind, in, norm string
	}{
		{PseudonymAccount, " Alice@Example.COM", "alice@example.com"},
		{PseudonymRecipient, "+1 (555) 010-0000", "+15550100000"},
		{PseudonymNetwork, "198.51.100.7/24", "198.51.100.0/24"},
		{PseudonymNetwork, "::ffff:192.0.2.1", "192.0.2.1/32"},
	}
	for _, tt := range tests {
		got, err := h.PseudonymOf(nil, tt.kind, tt.in)
		if want := h.Pseudonym(tt.kind, tt.norm); err != nil || got != want {
			t.Errorf("PseudonymOf(%s, %q) = %q, %v; want %q", tt.kind, tt.in, got, err, want)
		}
	}
	bad := []struct {
		kind, in string
		err      error
	}{
		{PseudonymAccount, "", ErrInvalidAccount},
		{PseudonymRecipient, "555", ErrInvalidRecipient},
		{PseudonymNetwork, "300.1.1.1", ErrInvalidIP},
		{PseudonymNetwork, "192.0.2.0/33", ErrInvalidIP},
		{"device", "x", ErrUnknownKind},
	}
	for _, tt := range bad {
		if _, err := h.PseudonymOf(nil, tt.kind, tt.in); !errors.Is(err, tt.err) {
			t.Errorf("PseudonymOf(%s, %q): %v, want %v", tt.kind, tt.in, err, tt.err)
		}
	}
}
