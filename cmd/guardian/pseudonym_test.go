package main

import (
	"strings"
	"testing"

	"github.com/guardian-sec/guardian/internal/keys"
)

// TestPseudonymCommand prints the pseudonyms serve's Hasher gives: under
// the hash key when one is set, else under the signing key, each value
// normalised as a check's.
func TestPseudonymCommand(t *testing.T) {
	signing, _, _ := (&keyFlags{key: testSigningKey}).load()
	hashText := strings.Repeat("h", 32)
	hash, _, _ := (&keyFlags{key: hashText}).load()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"pseudonym", "--signing-key", testSigningKey, " Alice@Example.com"}, keys.NewHasher(signing).Pseudonym(keys.PseudonymAccount, "alice@example.com")},
		{[]string{"pseudonym", "--signing-key", testSigningKey, "--hash-key", hashText, "alice@example.com"}, keys.NewHasher(hash).Pseudonym(keys.PseudonymAccount, "alice@example.com")},
		{[]string{"pseudonym", "--signing-key", testSigningKey, "--kind", "network", "198.51.100.9/24"}, keys.NewHasher(signing).Pseudonym(keys.PseudonymNetwork, "198.51.100.0/24")},
		{[]string{"pseudonym", "--signing-key", testSigningKey, "--kind", "recipient", "+1 555 010 0000"}, keys.NewHasher(signing).Pseudonym(keys.PseudonymRecipient, "+15550100000")},
		{[]string{"pseudonym", "--signing-key", testSigningKey, "--tenant", "acme", "alice"}, keys.NewHasher(signing).Tenant("acme").Pseudonym(keys.PseudonymAccount, "alice")},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(tt.args...)
		if code != exitOK || out != tt.want+"\n" {
			t.Errorf("%v: exit %d, %q (stderr %q); want %q", tt.args, code, out, errOut, tt.want)
		}
	}
	for _, args := range [][]string{
		{"pseudonym", "alice"},
		{"pseudonym", "--signing-key", testSigningKey},
		{"pseudonym", "--signing-key", testSigningKey, "--kind", "device", "x"},
		{"pseudonym", "--signing-key", testSigningKey, "--kind", "network", "300.1.1.1"},
		{"pseudonym", "--signing-key", testSigningKey, "--tenant", "Not A Tenant", "alice"},
	} {
		if code, out, _ := runCLI(args...); code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want %d and nothing", args, code, out, exitUsage)
		}
	}
}
