package certfile_test

import (
	"bytes"
	"crypto/tls"
	"os"
	"testing"

	"github.com/guardian-sec/guardian/internal/certfile"
	"github.com/guardian-sec/guardian/internal/testcert"
)

// served returns the certificate a Config hands a client.
func served(t *testing.T, cfg *tls.Config) *tls.Certificate {
	t.Helper()
	c, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestReloadKeepsThePairInForceWhenTheNewOneFails(t *testing.T) {
	a, b := testcert.New(t), testcert.New(t)
	dir := t.TempDir()
	cert, key := dir+"/tls.crt", dir+"/tls.key"
	install := func(c *testcert.Certs) {
		t.Helper()
		for from, to := range map[string]string{c.ServerCert: cert, c.ServerKey: key} {
			data, err := os.ReadFile(from)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(to, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(a)
	p, err := certfile.Load(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := p.Config()
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("MinVersion %x, want TLS 1.2", cfg.MinVersion)
	}
	first := served(t, cfg)
	if first.Leaf == nil || !p.NotAfter().Equal(first.Leaf.NotAfter) {
		t.Fatal("the served certificate is not the one loaded")
	}

	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.Reload(); err == nil {
		t.Fatal("a damaged key was taken")
	}
	if served(t, cfg) != first {
		t.Fatal("a refused reload changed the certificate served")
	}

	install(b)
	if err := p.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := served(t, cfg); bytes.Equal(got.Certificate[0], first.Certificate[0]) {
		t.Fatal("a Config made before the reload does not serve the new certificate")
	}
	if _, err := certfile.Load(cert, dir+"/missing.key"); err == nil {
		t.Fatal("Load of a missing key succeeded")
	}
}
