package tokens_test

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/tokens"
)

func ExampleService() {
	k, _ := secret.New(bytes.Repeat([]byte{1}, secret.MinLen))
	s := tokens.NewService(k)
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

	tok, _ := s.Issue(tokens.ScopeCheck, "auth-api", 24*time.Hour, now)
	c, err := s.Verify(tok, now.Add(time.Hour))
	fmt.Println(c.Subject, c.Scope, c.Scope.Allows(tokens.ScopeAdmin), err)

	_, err = s.Verify(tok, now.Add(25*time.Hour))
	fmt.Println(err)
	// Output:
	// auth-api check false <nil>
	// tokens: invalid token: expired
}

func ExampleAttempts() {
	k, _ := secret.New(bytes.Repeat([]byte{1}, secret.MinLen))
	a := tokens.NewAttempts(k)
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

	id, _ := a.Seal(tokens.Attempt{Issued: now, Rules: "0123456789abcdef", Flow: "login", Cost: 1, Spent: 0b11,
		Account: "AbCdEfGhIjKlMnOpQrStUg", IP: netip.MustParseAddr("203.0.113.7")})
	at, err := a.Open(id, now.Add(time.Minute))
	fmt.Println(at.Flow, at.Rules, at.Spent, at.IP, len(id) <= tokens.MaxAttemptLen, err)

	_, err = a.Open(id, now.Add(11*time.Minute))
	fmt.Println(errors.Is(err, tokens.ErrExpiredAttempt), errors.Is(err, tokens.ErrInvalidAttempt))
	// Output:
	// login 0123456789abcdef 3 203.0.113.7 true <nil>
	// true true
}

func ExampleDevices() {
	k, _ := secret.New(bytes.Repeat([]byte{1}, secret.MinLen))
	d := tokens.NewDevices(k, 0)
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

	tok, id, _ := d.Issue("AbCdEfGhIjKlMnOpQrStUv", now)
	got, err := d.Verify(tok, "AbCdEfGhIjKlMnOpQrStUv", now.Add(time.Hour))
	fmt.Println(got == id, err)

	_, err = d.Verify(tok, "ZyXwVuTsRqPoNmLkJiHgFe", now.Add(time.Hour))
	fmt.Println(err)
	// Output:
	// true <nil>
	// tokens: invalid device token: issued to another account
}
