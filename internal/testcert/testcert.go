// Package testcert makes the certificates of tests that speak TLS: a CA of
// the test's own, and a server and a client certificate it signed, as PEM
// files in the test's temporary directory. Nothing is committed. Redis's
// TLS tests (package redistest) and guardian's own listeners use it.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Certs are PEM files a test made for TLS: a CA, a server certificate it
// signed for 127.0.0.1 and localhost (and any address given), and a client
// certificate. Nothing is committed; every file lives in the test's
// temporary directory.
type Certs struct {
	Dir string
	// CA is the authority's certificate.
	CA string
	// ServerCert and ServerKey are the server's certificate and key.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client certificate the CA signed, and
	// its key.
	ClientCert, ClientKey string
}

// New makes a CA and a server and a client certificate signed by it,
// valid from now for a day, the server's for 127.0.0.1, localhost and
// hosts (IP addresses or names).
func New(tb testing.TB, hosts ...string) *Certs {
	return newCerts(tb, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), hosts)
}

// NewExpired is New with a server and a client certificate that expired
// an hour ago (the CA is valid).
func NewExpired(tb testing.TB, hosts ...string) *Certs {
	return newCerts(tb, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour), hosts)
}

// Pool returns a certificate pool holding the CA alone, for a client that
// trusts it.
func (c *Certs) Pool(tb testing.TB) *x509.CertPool {
	tb.Helper()
	b, err := os.ReadFile(c.CA)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		tb.Fatalf("%s holds no certificate", c.CA)
	}
	return pool
}

func newCerts(tb testing.TB, from, until time.Time, hosts []string) *Certs {
	tb.Helper()
	dir := tb.TempDir()
	c := &Certs{
		Dir:        dir,
		CA:         filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client-key.pem"),
	}
	caKey := newKey(tb)
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "guardian test CA"},
		NotBefore:             time.Now().Add(-72 * time.Hour),
		NotAfter:              time.Now().Add(72 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER := sign(tb, ca, ca, caKey, caKey)
	writePEM(tb, c.CA, "CERTIFICATE", caDER)
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatal(err)
	}

	server := leaf("guardian test server", from, until,
		// The server certificate is a client certificate too: Redis's
		// replication and cluster bus connect as TLS clients with it.
		x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth)
	server.DNSNames = []string{"localhost"}
	server.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	writePair(tb, c.ServerCert, c.ServerKey, server, caCert, caKey)
	writePair(tb, c.ClientCert, c.ClientKey, leaf("guardian", from, until, x509.ExtKeyUsageClientAuth), caCert, caKey)
	return c
}

// serials numbers the certificates a test binary makes.
var serials atomic.Int64

// leaf returns the template of a certificate for cn, valid from from until
// until, for usages.
func leaf(cn string, from, until time.Time, usages ...x509.ExtKeyUsage) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serials.Add(1) + 1),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    from,
		NotAfter:     until,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
	}
}

// writePair signs tmpl with a new key by the CA and writes the certificate
// and the key.
func writePair(tb testing.TB, certPath, keyPath string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) {
	tb.Helper()
	key := newKey(tb)
	writePEM(tb, certPath, "CERTIFICATE", sign(tb, tmpl, ca, key, caKey))
	writeKey(tb, keyPath, key)
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func sign(tb testing.TB, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) []byte {
	tb.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		tb.Fatal(err)
	}
	return der
}

func writeKey(tb testing.TB, path string, k *ecdsa.PrivateKey) {
	tb.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		tb.Fatal(err)
	}
	writePEM(tb, path, "PRIVATE KEY", der)
}

func writePEM(tb testing.TB, path, kind string, der []byte) {
	tb.Helper()
	// Readable by a container's user: Redis runs as whoever its image
	// says, not as the test's user.
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o644); err != nil {
		tb.Fatal(err)
	}
}
