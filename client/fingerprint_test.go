package client_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/guardian-sec/guardian/client"
)

// fingerprintForm is what guardian accepts as a secret_fingerprint.
var fingerprintForm = regexp.MustCompile(`^[A-Za-z0-9_-]{16,128}$`)

// TestFingerprintVectors checks Fingerprint against the vectors every
// guardian client shares.
func TestFingerprintVectors(t *testing.T) {
	data, err := os.ReadFile("testdata/fingerprint.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Vectors []struct{ Key, Secret, Fingerprint string }
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	seen := map[string]bool{}
	for _, v := range file.Vectors {
		got := client.Fingerprint([]byte(v.Key), []byte(v.Secret))
		if got != v.Fingerprint {
			t.Errorf("Fingerprint(%q, %q) = %q, want %q", v.Key, v.Secret, got, v.Fingerprint)
		}
		if len(got) != 43 || !fingerprintForm.MatchString(got) {
			t.Errorf("Fingerprint(%q, %q) = %q: not 43 characters of [A-Za-z0-9_-]", v.Key, v.Secret, got)
		}
		if seen[got] {
			t.Errorf("two vectors share the fingerprint %q", got)
		}
		seen[got] = true
	}
}

func ExampleFingerprint() {
	// The auth service's fingerprint key: 32 random bytes or more, from its
	// own secret store, the same on every instance.
	key := []byte("auth-service-fingerprint-key-0001")
	fp := client.Fingerprint(key, []byte("correct horse battery staple"))
	fmt.Println(fp, len(fp))
	// Output: dIIWsk8dJy_fUMsZc2eqEc4ENSJJ2-T8t6bKPStwrbg 43
}
