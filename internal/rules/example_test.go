package rules_test

import (
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
)

func ExampleParse() {
	src := `version: 1
rules:
  - name: login-account
    flows: [login, password_reset]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 5
  - name: login-hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 100
`
	set, err := rules.Parse("rules.yaml", []byte(src), time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range set.For(rules.Login) {
		fmt.Printf("%s: %s by %s, limit %d, then %s\n", r.Name, r.Type, r.Key, r.Limit, r.Action)
	}
	// Output:
	// login-account: rate by account, limit 1, then slow
	// login-hard-stop: consecutive_failures by account, limit 100, then block
}

func ExampleParse_errors() {
	src := `version: 1
rules:
  - name: login-ip
    flows: [login]
    key: ip
    type: rate
    limit: 30
  - name: login-ip
    flows: [signup]
    key: account
    type: consecutive_failures
    limit: 100
    per: 1m
`
	_, err := rules.Parse("rules.yaml", []byte(src), time.Time{})
	fmt.Println(err)
	// Output:
	// rules.yaml:3: per: required for type rate
	// rules.yaml:8: name: "login-ip" is already the name of the rule at line 3
	// rules.yaml:9: flows: got "signup", want login, password_reset, otp_send or otp_verify
	// rules.yaml:13: per: not allowed for type consecutive_failures
}

func ExampleFormatDuration() {
	fmt.Println(rules.FormatDuration(90 * time.Second))
	fmt.Println(rules.FormatDuration(90 * 24 * time.Hour))
	// Output:
	// 1m30s
	// 90d
}
