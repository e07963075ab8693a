package keys

import (
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
