package redistest

import (
	"testing"

	"github.com/guardian-sec/guardian/internal/testcert"
)

// Certs are PEM files a test made for TLS to Redis: a CA, a server
// certificate it signed for 127.0.0.1 and localhost (and any address
// given), and a client certificate (package testcert).
type Certs = testcert.Certs

// NewCerts is testcert.New: a CA and a server and a client certificate
// signed by it, valid from now for a day.
func NewCerts(tb testing.TB, hosts ...string) *Certs { return testcert.New(tb, hosts...) }

// NewExpiredCerts is testcert.NewExpired: a server and a client certificate
// that expired an hour ago (the CA is valid).
func NewExpiredCerts(tb testing.TB, hosts ...string) *Certs { return testcert.NewExpired(tb, hosts...) }
