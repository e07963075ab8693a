package rules_test

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
)

func TestBound(t *testing.T) {
	tests := []struct {
		name     string
		rule     string
		wantDay  int64
		wantWhat string
		// wantBound is the bound in the rule's own window.
		wantBound string
	}{
		{
			name:      "5 back to back then 1 a minute",
			wantBound: "1445 a day",
			rule:      "key: account\n    type: rate\n    count: failures\n    limit: 1\n    per: 1m\n    burst: 5",
			wantDay:   1445,
			wantWhat:  "at most 1445 failed or unreported checks per account a day (5 back to back, then 1 per 1m); past that, slow",
		},
		{
			name:      "30 per 10 minutes",
			wantBound: "4350 a day",
			rule:      "key: ip\n    type: rate\n    count: failures\n    limit: 30\n    per: 10m",
			wantDay:   4350,
			wantWhat:  "at most 4350 failed or unreported checks per IPv4 /32 or IPv6 /64 a day (30 back to back, then 30 per 10m); past that, slow",
		},
		{
			name:      "attempts, a period that does not divide a day",
			wantBound: "619 a day",
			rule:      "key: recipient\n    type: rate\n    limit: 3\n    per: 7m\n    burst: 2\n    action: block",
			wantDay:   2 + 86400*3/420, // 617.1…, floored
			wantWhat:  "at most 619 checks per recipient a day (2 back to back, then 3 per 7m); past that, block",
		},
		{
			name:      "slower than one a day",
			wantBound: "3 a day",
			rule:      "key: account+ip\n    type: rate\n    limit: 1\n    per: 2d\n    burst: 3",
			wantDay:   3,
			wantWhat:  "at most 3 checks per account and address a day (3 back to back, then 1 per 2d); past that, slow",
		},
		{
			name:      "the largest rate a file accepts does not overflow",
			wantBound: "86400000001 a day",
			rule:      "key: account\n    type: rate\n    limit: 1000000\n    per: 1s\n    burst: 1",
			wantDay:   1 + 86400*1000000, // 24h·limit in ns would overflow int64
			wantWhat:  "at most 86400000001 checks per account a day (1 back to back, then 1000000 per 1s); past that, slow",
		},
		{
			name:      "distinct accounts over a day",
			wantBound: "20 in 1d",
			rule:      "key: ip\n    type: distinct\n    of: account\n    limit: 20\n    per: 24h\n    ipv4_prefix: 24\n    ipv6_prefix: 48",
			wantDay:   20,
			wantWhat:  "at most 20 distinct accounts with failed or unreported checks per IPv4 /24 or IPv6 /48 in 1d (as a HyperLogLog estimates them); past that, challenge that network's checks",
		},
		{
			name:      "distinct accounts over 7 hours: four windows start in a day",
			wantBound: "5 in 7h",
			rule:      "key: ip\n    type: distinct\n    of: account\n    count: attempts\n    limit: 5\n    per: 7h\n    action: slow",
			wantDay:   20,
			wantWhat:  "at most 5 distinct accounts with checks per IPv4 /32 or IPv6 /64 in 7h (as a HyperLogLog estimates them); past that, slow that network's checks",
		},
		{
			name:      "hard stop",
			wantBound: "100 in a row",
			rule:      "key: account\n    type: consecutive_failures\n    limit: 100",
			wantDay:   100,
			wantWhat:  "at most 100 failures in a row per account; then block until the account is reset",
		},
		{
			name:      "consecutive failures by address",
			wantBound: "20 in a row",
			rule:      "key: ip\n    type: consecutive_failures\n    limit: 20\n    action: slow\n    ipv4_prefix: 24",
			wantDay:   20,
			wantWhat:  "at most 20 failures in a row per IPv4 /24 or IPv6 /64; then slow",
		},
		{
			name:      "failure rate",
			wantBound: "1000 in 1m",
			rule:      "key: global\n    type: failure_rate\n    limit: 1000\n    per: 1m",
			wantDay:   1000,
			wantWhat:  "at most 1000 failed or unreported checks of login or otp_verify across every key per 1m; past that, challenge every check without a trusted device or a passed challenge",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "version: 1\nrules:\n  - name: r\n    flows: [login, otp_verify]\n    " + tt.rule + "\n"
			set, err := rules.Parse("rules.yaml", []byte(src), time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			got := set.Rules[0].Bound()
			if got.Rule != "r" || got.Key != set.Rules[0].Key {
				t.Errorf("rule, key = %q, %q; want r, %q", got.Rule, got.Key, set.Rules[0].Key)
			}
			if got.PerDay != tt.wantDay {
				t.Errorf("per_day = %d, want %d", got.PerDay, tt.wantDay)
			}
			if got.What != tt.wantWhat {
				t.Errorf("what = %q\nwant   %q", got.What, tt.wantWhat)
			}
			if got.String() != tt.wantBound {
				t.Errorf("bound = %q, want %q", got.String(), tt.wantBound)
			}
		})
	}
}

func TestExplainMarksShadowRules(t *testing.T) {
	src := `version: 1
rules:
  - name: enforced
    flows: [login]
    key: ip
    type: rate
    limit: 10
    per: 1h
  - name: trial
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1h
    mode: shadow
`
	set, err := rules.Parse("rules.yaml", []byte(src), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := set.Explain()
	want := []rules.Bound{
		{Rule: "enforced", Key: rules.KeyIP, Mode: rules.Enforce, PerDay: 10 + 240, Most: 10 + 240, Window: "a day",
			What: "at most 250 checks per IPv4 /32 or IPv6 /64 a day (10 back to back, then 10 per 1h); past that, slow"},
		{Rule: "trial", Key: rules.KeyIP, Mode: rules.Shadow, PerDay: 1 + 24, Most: 1 + 24, Window: "a day",
			What: "shadow, deciding nothing until promoted; then at most 25 checks per IPv4 /32 or IPv6 /64 a day (1 back to back, then 1 per 1h); past that, slow"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Explain =\n%#v\nwant\n%#v", got, want)
	}
}

func ExampleSet_Explain() {
	for _, b := range rules.Default().Explain() {
		fmt.Printf("%s: %d a day\n", b.Rule, b.PerDay)
	}
	// Output:
	// login-account: 1445 a day
	// password-reset-account: 154 a day
	// login-ip: 4350 a day
	// login-ip6-48: 4350 a day
	// login-ip-distinct-accounts: 20 a day
	// login-hard-stop: 100 a day
	// login-secret-spray: 1450 a day
	// otp-send-recipient: 291 a day
	// otp-verify-recipient: 485 a day
	// login-global-failures: 1000 a day
}
