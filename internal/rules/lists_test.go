package rules

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

const listRulesHead = `version: 1
rules:
  - {name: login-account, flows: [login], key: account, type: rate, limit: 5, per: 1m}
  - {name: login-ip, flows: [login], key: ip, type: rate, limit: 30, per: 10m}
  - {name: login-hard-stop, flows: [login], key: account, type: consecutive_failures, limit: 100}
  - {name: login-ip-distinct-accounts, flows: [login], key: ip, type: distinct, of: account, limit: 20, per: 24h}
  - {name: login-global, flows: [login], key: global, type: failure_rate, limit: 100, per: 1m}
`

func TestParseLists(t *testing.T) {
	set, err := Parse("f.yaml", []byte(listRulesHead+`lists:
  allow:
    - network: 203.0.113.0/24
      exempt: [login-ip, login-ip-distinct-accounts, login-global, login-ip]
      reason: head office
    - {network: "2001:db8:1::/48", exempt: [login-ip]}
  deny:
    - {network: 198.51.100.7, reason: scanner}
`), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want := Lists{
		Allow: []ListEntry{
			{Network: netip.MustParsePrefix("203.0.113.0/24"), Exempt: []string{"login-ip", "login-ip-distinct-accounts", "login-global"}, Reason: "head office", Line: 10},
			{Network: netip.MustParsePrefix("2001:db8:1::/48"), Exempt: []string{"login-ip"}, Line: 13},
		},
		Deny: []ListEntry{{Network: netip.MustParsePrefix("198.51.100.7/32"), Reason: "scanner", Line: 15}},
	}
	if !slices.EqualFunc(set.Lists.Allow, want.Allow, sameEntry) || !slices.EqualFunc(set.Lists.Deny, want.Deny, sameEntry) {
		t.Errorf("Lists = %+v\nwant %+v", set.Lists, want)
	}
	if same := set.InMode(Shadow); same.Lists.Len() != 3 {
		t.Errorf("InMode dropped the lists: %+v", same.Lists)
	}
	without, err := Parse("f.yaml", []byte(listRulesHead), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if without.Hash() != set.Hash() {
		t.Error("the lists change the rules' hash; no attempt's settlement depends on them")
	}
}

func sameEntry(a, b ListEntry) bool {
	return a.Network == b.Network && slices.Equal(a.Exempt, b.Exempt) && a.Reason == b.Reason && a.Line == b.Line
}

func TestParseListsErrors(t *testing.T) {
	tests := []struct {
		name, lists string
		want        []string
	}{
		{"not a mapping", "lists: [1]", []string{"f.yaml:8: lists: got a list, want a mapping"}},
		{"unknown field", "lists: {block: []}", []string{`f.yaml:8: unknown field "block" in lists`}},
		{"allow not a list", "lists: {allow: 3}", []string{"f.yaml:8: lists: allow: got"}},
		{"exempt an account rule", "lists:\n  allow:\n    - {network: 203.0.113.0/24, exempt: [login-account]}", []string{"f.yaml:10: lists: allow: exempt: rule login-account has key: account"}},
		{"exempt the hard stop", "lists:\n  allow:\n    - network: 203.0.113.0/24\n      exempt:\n        - login-ip\n        - login-hard-stop", []string{"f.yaml:13: lists: allow: exempt: rule login-hard-stop has key: account and type: consecutive_failures"}},
		{"exempt an unknown rule", "lists:\n  allow:\n    - {network: 203.0.113.0/24, exempt: [login-ipp]}", []string{`f.yaml:10: lists: allow: exempt: no rule is called "login-ipp"`}},
		{"no exempt", "lists:\n  allow:\n    - {network: 203.0.113.0/24}", []string{"f.yaml:10: lists: allow: exempt: required"}},
		{"empty exempt", "lists:\n  allow:\n    - {network: 203.0.113.0/24, exempt: []}", []string{"f.yaml:10: lists: allow: exempt: got"}},
		{"bad network", "lists:\n  deny:\n    - {network: 198.51.100.7/24}", []string{"f.yaml:10: lists: deny: network: \"198.51.100.7/24\" has bits set past /24: write 198.51.100.0/24"}},
		{"no network", "lists:\n  deny:\n    - {reason: x}", []string{"f.yaml:10: lists: deny: network: required"}},
		{"deny with exempt", "lists:\n  deny:\n    - {network: 198.51.100.0/24, exempt: [login-ip]}", []string{`f.yaml:10: unknown field "exempt" in a deny entry`}},
		{"deny with ttl", "lists:\n  deny:\n    - {network: 198.51.100.0/24, ttl: 1h}", []string{`f.yaml:10: unknown field "ttl" in a deny entry`}},
		{"reason not text", "lists:\n  deny:\n    - {network: 198.51.100.0/24, reason: [x]}", []string{"f.yaml:10: lists: deny: reason: got"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(listRulesHead+tt.lists+"\n"), time.Time{})
			var es Errors
			if !errors.As(err, &es) || len(es) != len(tt.want) {
				t.Fatalf("Parse = %v, want %d errors", err, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(es[i].Error(), w) {
					t.Errorf("error %d = %q, want it to start %q", i, es[i].Error(), w)
				}
			}
		})
	}
}

func TestDenyListIsNoRuleName(t *testing.T) {
	_, err := Parse("f.yaml", []byte("version: 1\nrules:\n  - {name: deny-list, flows: [login], key: ip, type: rate, limit: 1, per: 1m}\n"), time.Time{})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `f.yaml:3: name: "deny-list"`) {
		t.Errorf("Parse = %v, want deny-list refused at line 3", err)
	}
}

func TestCheckExempt(t *testing.T) {
	set := Default()
	if err := set.CheckExempt([]string{"login-ip", "login-ip6-48", "login-ip-distinct-accounts", "login-global-failures"}); err != nil {
		t.Errorf("CheckExempt of address, distinct and global rules = %v", err)
	}
	for name, want := range map[string]error{
		"login-account": ErrNotExemptable, "login-hard-stop": ErrNotExemptable, "login-secret-spray": ErrNotExemptable,
		"otp-send-recipient": ErrNotExemptable, "nope": ErrUnknownRule,
	} {
		if err := set.CheckExempt([]string{"login-ip", name}); !errors.Is(err, want) {
			t.Errorf("CheckExempt(%s) = %v, want %v", name, err, want)
		}
	}
}

// An allow entry names rules by name, and a reload may give a name to
// another rule: a consecutive-failure count is never exemptable, whatever
// its key, nor is a rule of an account's, so a renamed rule cannot lift one.
func TestExemptableByKind(t *testing.T) {
	for _, tt := range []struct {
		r    Rule
		want bool
	}{
		{Rule{Type: Rate, Key: KeyIP}, true},
		{Rule{Type: Distinct, Key: KeyIP}, true},
		{Rule{Type: FailureRate, Key: KeyGlobal}, true},
		{Rule{Type: ConsecutiveFailures, Key: KeyIP}, false},
		{Rule{Type: ConsecutiveFailures, Key: KeyAccount}, false},
		{Rule{Type: Rate, Key: KeyAccount}, false},
		{Rule{Type: Rate, Key: KeyAccountIP}, false},
		{Rule{Type: Rate, Key: KeyRecipient}, false},
		{Rule{Type: Rate, Key: KeySecret}, false},
	} {
		if got := Exemptable(&tt.r); got != tt.want {
			t.Errorf("Exemptable(%s key %s) = %t, want %t", tt.r.Type, tt.r.Key, got, tt.want)
		}
	}
}
