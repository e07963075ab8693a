package loginlimits_test

import (
	"bytes"
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/loginlimits"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/tokens"
)

func ExamplePolicy_Trust() {
	k, _ := secret.New(bytes.Repeat([]byte{1}, secret.MinLen))
	h := keys.NewHasher(k)
	p := loginlimits.New(h, tokens.NewDevices(k, 0))
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	alice := h.KeySubject(keys.Key{Kind: "account", ID: "alice@example.com"})
	mallory := h.KeySubject(keys.Key{Kind: "account", ID: "mallory@example.com"})

	// A success earns the device a token for the account.
	tok, _ := p.DeviceToken(&tokens.Attempt{Flow: "login", Account: alice}, now)

	// With it, alice's device counts on a bucket of its own.
	dev, bucket := p.Trust(alice, tok, now.Add(time.Hour))
	fmt.Println(dev != "", bucket != "" && bucket != alice)

	// The same token presented for another account is ignored.
	dev, bucket = p.Trust(mallory, tok, now.Add(time.Hour))
	fmt.Printf("%q %q\n", dev, bucket)
	// Output:
	// true true
	// "" ""
}

func ExampleReadStatus() {
	rs := loginlimits.StatusRules(rules.Default())
	// What the store found for login-account, password-reset-account and
	// login-hard-stop after a hundred failed logins in a row.
	res := []store.Result{
		{Remaining: 0, RetryAfter: time.Minute, ResetAfter: 5 * time.Minute},
		{Allowed: true, Remaining: 10},
		{Remaining: 0, Count: 100, ResetAfter: 90 * 24 * time.Hour},
	}
	st := loginlimits.ReadStatus(rs, res)
	fmt.Println(rs[0].Name, rs[1].Name, rs[2].Name)
	fmt.Printf("%+v\n", st)
	// Output:
	// login-account password-reset-account login-hard-stop
	// {ConsecutiveFailures:100 Blocked:true NextAllowed:1m0s}
}
