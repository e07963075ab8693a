// Package certfile serves TLS with a certificate and key read from PEM
// files, and read again on demand (SIGHUP, or a change of either file), so
// that a renewed certificate is served to new connections without a
// restart while connections already open carry on.
package certfile

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync/atomic"
	"time"
)

// Pair is a certificate and its key, read from two PEM files. Its Config
// serves whichever pair was read last. A Pair is safe for concurrent use;
// build one with Load.
type Pair struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]
}

// Load reads the certificate (with its chain, leaf first) and the key.
func Load(certFile, keyFile string) (*Pair, error) {
	p := &Pair{certFile: certFile, keyFile: keyFile}
	if err := p.Reload(); err != nil {
		return nil, err
	}
	return p, nil
}

// Reload reads both files again. When they do not make a valid pair (one
// rewritten before the other, a damaged file), it returns the error and the
// pair in force stays.
func (p *Pair) Reload() error {
	c, err := tls.LoadX509KeyPair(p.certFile, p.keyFile)
	if err != nil {
		return fmt.Errorf("certfile: %s, %s: %w", p.certFile, p.keyFile, err)
	}
	p.cur.Store(&c)
	return nil
}

// Files returns the certificate and key files.
func (p *Pair) Files() (certFile, keyFile string) { return p.certFile, p.keyFile }

// Leaf returns the certificate in force, parsed.
func (p *Pair) Leaf() *x509.Certificate { return p.cur.Load().Leaf }

// NotAfter is when the certificate in force expires.
func (p *Pair) NotAfter() time.Time { return p.Leaf().NotAfter }

// Config returns a TLS configuration for a server, TLS 1.2 at least, that
// serves the pair in force on each new connection. Each call returns a
// Config of its own, for one listener.
func (p *Pair) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.cur.Load(), nil
		},
	}
}
