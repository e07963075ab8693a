// Command loginservice is guardian's reference integration: a small login
// service that asks guardian before it verifies a password, tells guardian
// how the attempt went, keeps guardian's device token in an HttpOnly cookie,
// asks for a second factor when guardian challenges, and sends the user to a
// reset flow when guardian blocks.
//
// Run guardian (`make run` prints a development admin token), then:
//
//	GUARDIAN_CHECK_TOKEN=… GUARDIAN_ADMIN_TOKEN=… go run ./examples/loginservice
//	curl -i localhost:8090/login -d '{"username":"alice","password":"correct horse battery staple"}'
//
// The service has one demo user, alice, with second-factor code 424242 and
// reset code reset-alice.
package main

import (
	"crypto/rand"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/guardian-sec/guardian/client"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "loginservice:", err)
		os.Exit(1)
	}
}

// fingerprintKey returns the key of the service's secret fingerprints:
// $LOGINSERVICE_FINGERPRINT_KEY (at least 32 bytes), or for a demo without
// it a random key, which changes at every start and so forgets the guesses
// guardian remembers.
func fingerprintKey() ([]byte, error) {
	if k := os.Getenv("LOGINSERVICE_FINGERPRINT_KEY"); k != "" {
		if len(k) < minFingerprintKey {
			return nil, fmt.Errorf("LOGINSERVICE_FINGERPRINT_KEY: want %d bytes at least", minFingerprintKey)
		}
		return []byte(k), nil
	}
	k := make([]byte, minFingerprintKey)
	_, _ = rand.Read(k) // never fails: crypto/rand crashes the program instead
	return k, nil
}

func run(args []string) error {
	fs := flag.NewFlagSet("loginservice", flag.ContinueOnError)
	addr := fs.String("addr", "localhost:8090", "listen address")
	guardianURL := fs.String("guardian", "http://localhost:8080", "guardian's address")
	certFile := fs.String("cert", "", "TLS certificate; empty serves plain HTTP, for localhost only (browsers keep Secure cookies from localhost)")
	keyFile := fs.String("key", "", "TLS key, with -cert")
	uniform := fs.Bool("uniform", false, "answer a slowed login exactly like a wrong password")
	if err := fs.Parse(args); err != nil {
		return err
	}
	checkToken, adminToken := os.Getenv("GUARDIAN_CHECK_TOKEN"), os.Getenv("GUARDIAN_ADMIN_TOKEN")
	if checkToken == "" || adminToken == "" {
		return errors.New("set GUARDIAN_CHECK_TOKEN and GUARDIAN_ADMIN_TOKEN (see `guardian token`)")
	}

	// While guardian does not answer, logins go on under a strict local
	// limit per account and address: neither a site-wide outage nor an
	// open door.
	check, err := client.New(client.Config{
		BaseURL: *guardianURL, Tokens: client.StaticToken(checkToken), OnUnavailable: client.Local,
	})
	if err != nil {
		return err
	}
	// Lifting a hard stop is not urgent, and never done without guardian.
	admin, err := client.New(client.Config{
		BaseURL: *guardianURL, Tokens: client.StaticToken(adminToken), OnUnavailable: client.FailClosed, Timeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	users, err := NewUsers(bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	if err := users.Add("alice", "correct horse battery staple", "424242", "reset-alice"); err != nil {
		return err
	}
	fpKey, err := fingerprintKey()
	if err != nil {
		return err
	}
	svc, err := New(Config{
		Guardian: check, Admin: admin, Users: users, FingerprintKey: fpKey,
		Responder: client.Responder{SlowAsInvalid: *uniform},
	})
	if err != nil {
		return err
	}

	srv := &http.Server{
		Addr:              *addr,
		Handler:           svc,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
	}
	slog.Info("loginservice listening", "addr", *addr, "guardian", *guardianURL, "tls", *certFile != "")
	if *certFile != "" {
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		return srv.ListenAndServeTLS(*certFile, *keyFile)
	}
	return srv.ListenAndServe()
}
