package rules

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// t0 is the fixed instant the tests load rules at.
var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// ruleFile returns a rules file with one rule made of fields, the first of
// them on line 3 and each next one on the next line.
func ruleFile(fields ...string) string {
	return "version: 1\nrules:\n  - " + strings.Join(fields, "\n    ") + "\n"
}

// rateFields is a valid rate rule on lines 3 to 8.
var rateFields = []string{"name: r", "flows: [login]", "key: account", "type: rate", "limit: 5", "per: 1m"}

// consecutiveFields is a valid consecutive_failures rule on lines 3 to 7.
var consecutiveFields = []string{"name: r", "flows: [login]", "key: account", "type: consecutive_failures", "limit: 100"}

// failureRateFields is a valid failure_rate rule on lines 3 to 8.
var failureRateFields = []string{"name: r", "flows: [login]", "key: global", "type: failure_rate", "limit: 1000", "per: 1m"}

// distinctFields is a valid distinct rule on lines 3 to 9.
var distinctFields = []string{"name: r", "flows: [login]", "key: ip", "type: distinct", "of: account", "limit: 20", "per: 24h"}

// with returns base with its field called name replaced by field, or with
// field appended when base has no such field; name "" always appends.
func with(base []string, field string) []string {
	out := slices.Clone(base)
	name, _, _ := strings.Cut(field, ":")
	for i, f := range out {
		if strings.HasPrefix(f, name+":") {
			out[i] = field
			return out
		}
	}
	return append(out, field)
}

// without returns base without its field called name.
func without(base []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(base), func(f string) bool { return strings.HasPrefix(f, name+":") })
}

// errorLines returns the "FILE:LINE: message" lines of err, which must be an
// Errors matching ErrInvalid.
func errorLines(tb testing.TB, err error) []string {
	tb.Helper()
	if err == nil {
		tb.Fatal("Parse: got no error, want one")
	}
	if !errors.Is(err, ErrInvalid) {
		tb.Errorf("errors.Is(%v, ErrInvalid) = false, want true", err)
	}
	var es Errors
	if !errors.As(err, &es) {
		tb.Fatalf("Parse error %T is not Errors", err)
	}
	return strings.Split(es.Error(), "\n")
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"empty file", "", []string{"f.yaml:1: empty rules file, want version: 1 and a list of rules"}},
		{"comments only", "# nothing\n", []string{"f.yaml:1: empty rules file, want version: 1 and a list of rules"}},
		{"null document", "~\n", []string{"f.yaml:1: empty rules file, want version: 1 and a list of rules"}},
		{"tab indentation", "version: 1\n\trules: []\n", []string{"f.yaml:2: invalid YAML: found a tab character that violates indentation"}},
		{"unclosed list", "version: 1\nrules: [\n", []string{"f.yaml:2: invalid YAML: did not find expected node content"}},
		{"second document", ruleFile(rateFields...) + "---\nversion: 1\n", []string{"f.yaml:9: a second YAML document; a rules file holds one"}},
		{"top level list", "- version: 1\n", []string{"f.yaml:1: top level: got a list, want a mapping with version and rules"}},
		{"top level scalar", "rules\n", []string{`f.yaml:1: top level: got "rules", want a mapping with version and rules`}},
		{"unknown top-level field", ruleFile(rateFields...) + "rule: []\n", []string{`f.yaml:9: unknown field "rule" at top level (want version, rules, familiar_networks and lists)`}},
		{"duplicate top-level field", ruleFile(rateFields...) + "version: 1\n", []string{`f.yaml:9: duplicate field "version" (first at line 1)`}},
		{"version missing", strings.TrimPrefix(ruleFile(rateFields...), "version: 1\n"), []string{"f.yaml:1: version: required, want version: 1"}},
		{"version 2", "version: 2\n" + strings.TrimPrefix(ruleFile(rateFields...), "version: 1\n"), []string{"f.yaml:1: version: got 2, want 1"}},
		{"version quoted", "version: \"1\"\n" + strings.TrimPrefix(ruleFile(rateFields...), "version: 1\n"), []string{`f.yaml:1: version: got "1", want 1`}},
		{"version float", "version: 1.0\n" + strings.TrimPrefix(ruleFile(rateFields...), "version: 1\n"), []string{"f.yaml:1: version: got 1.0, want 1"}},
		{"rules missing", "version: 1\n", []string{"f.yaml:1: rules: required, want a list of rules"}},
		{"rules a mapping", "version: 1\nrules:\n  name: r\n", []string{"f.yaml:2: rules: got a mapping, want a list of rules"}},
		{"rules empty", "version: 1\nrules: []\n", []string{"f.yaml:2: rules: got an empty list, want at least one rule"}},
		{"rule a string", "version: 1\nrules:\n  - login-ip\n", []string{`f.yaml:3: rule: got "login-ip", want a mapping of fields, like name: login-ip`}},
		{"rule empty", "version: 1\nrules:\n  -\n", []string{"f.yaml:3: rule: got nothing, want a mapping of fields, like name: login-ip"}},
		{"unknown rule field", ruleFile(with(rateFields, "limt: 5")...), []string{`f.yaml:9: unknown field "limt" in a rule`}},
		{"duplicate rule field", ruleFile(append(slices.Clone(rateFields), "limit: 6")...), []string{`f.yaml:9: duplicate field "limit" (first at line 7)`}},
		{"merge key", "base: &b {key: account}\n" + ruleFile(with(rateFields, "<<: *b")...), []string{
			`f.yaml:1: unknown field "base" at top level (want version, rules, familiar_networks and lists)`,
			"f.yaml:10: merge keys (<<) are not supported; write each field out",
		}},
		{"field name a list", ruleFile(with(rateFields, "? [a]\n    : b")...), []string{"f.yaml:9: got a list as a field name, want a plain word"}},

		{"name missing", ruleFile(without(rateFields, "name")...), []string{"f.yaml:3: name: required"}},
		{"name upper case", ruleFile(with(rateFields, "name: Login")...), []string{`f.yaml:3: name: got "Login", want 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'`}},
		{"name underscore", ruleFile(with(rateFields, "name: login_ip")...), []string{`f.yaml:3: name: got "login_ip", want 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'`}},
		{"name leading dash", ruleFile(with(rateFields, "name: -ip")...), []string{`f.yaml:3: name: got "-ip", want 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'`}},
		{"name trailing dash", ruleFile(with(rateFields, "name: ip-")...), []string{`f.yaml:3: name: got "ip-", want 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'`}},
		{"name 64 characters", ruleFile(with(rateFields, "name: "+strings.Repeat("a", 64))...), []string{`f.yaml:3: name: got "` + strings.Repeat("a", 64) + `", want 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'`}},
		{"name empty", ruleFile(with(rateFields, `name: ""`)...), []string{`f.yaml:3: name: got "", want 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'`}},
		{"name a list", ruleFile(with(rateFields, "name: [r]")...), []string{"f.yaml:3: name: got a list, want 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'"}},
		{"name duplicate", ruleFile(rateFields...) + "  - " + strings.Join(rateFields, "\n    ") + "\n", []string{`f.yaml:9: name: "r" is already the name of the rule at line 3`}},

		{"flows missing", ruleFile(without(rateFields, "flows")...), []string{"f.yaml:3: flows: required, want a list like [login]"}},
		{"flows a string", ruleFile(with(rateFields, "flows: login")...), []string{`f.yaml:4: flows: got "login", want a list like [login]`}},
		{"flows empty", ruleFile(with(rateFields, "flows: []")...), []string{"f.yaml:4: flows: got an empty list, want at least one of login, password_reset, otp_send or otp_verify"}},
		{"flows unknown", ruleFile(with(rateFields, "flows: [login, signup]")...), []string{`f.yaml:4: flows: got "signup", want login, password_reset, otp_send or otp_verify`}},
		{"flows nested list", ruleFile(with(rateFields, "flows: [[login]]")...), []string{"f.yaml:4: flows: got a list, want login, password_reset, otp_send or otp_verify"}},
		{"flows duplicate", ruleFile(with(rateFields, "flows:\n      - login\n      - otp_send\n      - login")...), []string{"f.yaml:7: flows: login is listed twice"}},

		{"key missing", ruleFile(without(rateFields, "key")...), []string{"f.yaml:3: key: required, want one of account, ip, account+ip, recipient, global or secret"}},
		{"key unknown", ruleFile(with(rateFields, "key: email")...), []string{`f.yaml:5: key: got "email", want account, ip, account+ip, recipient, global or secret`}},
		{"key empty", ruleFile(with(rateFields, "key:")...), []string{"f.yaml:5: key: got nothing, want account, ip, account+ip, recipient, global or secret"}},
		{"type missing", ruleFile(without(rateFields, "type")...), []string{
			"f.yaml:3: type: required, want one of rate, consecutive_failures, failure_rate or distinct",
		}},
		{"type unknown", ruleFile(with(rateFields, "type: token_bucket")...), []string{`f.yaml:6: type: got "token_bucket", want rate, consecutive_failures, failure_rate or distinct`}},

		{"limit missing", ruleFile(without(rateFields, "limit")...), []string{"f.yaml:3: limit: required, want an integer from 1 to 1000000"}},
		{"limit zero", ruleFile(with(rateFields, "limit: 0")...), []string{"f.yaml:7: limit: got 0, want an integer from 1 to 1000000"}},
		{"limit negative", ruleFile(with(rateFields, "limit: -5")...), []string{"f.yaml:7: limit: got -5, want an integer from 1 to 1000000"}},
		{"limit above a million", ruleFile(with(rateFields, "limit: 1000001")...), []string{"f.yaml:7: limit: got 1000001, want an integer from 1 to 1000000"}},
		{"limit beyond int64", ruleFile(with(rateFields, "limit: 99999999999999999999")...), []string{"f.yaml:7: limit: got 99999999999999999999, want an integer from 1 to 1000000"}},
		{"limit float", ruleFile(with(rateFields, "limit: 5.0")...), []string{"f.yaml:7: limit: got 5.0, want an integer from 1 to 1000000"}},
		{"limit quoted", ruleFile(with(rateFields, `limit: "5"`)...), []string{`f.yaml:7: limit: got "5", want an integer from 1 to 1000000`}},
		{"limit a mapping", ruleFile(with(rateFields, "limit: {n: 5}")...), []string{"f.yaml:7: limit: got a mapping, want an integer from 1 to 1000000"}},
		{"limit a boolean", ruleFile(with(rateFields, "limit: true")...), []string{"f.yaml:7: limit: got true, want an integer from 1 to 1000000"}},

		{"per missing for rate", ruleFile(without(rateFields, "per")...), []string{"f.yaml:3: per: required for type rate"}},
		{"per missing for failure_rate", ruleFile(without(failureRateFields, "per")...), []string{"f.yaml:3: per: required for type failure_rate"}},
		{"per for consecutive_failures", ruleFile(with(consecutiveFields, "per: 1m")...), []string{"f.yaml:8: per: not allowed for type consecutive_failures"}},
		{"per without unit", ruleFile(with(rateFields, "per: 60")...), []string{`f.yaml:8: per: invalid duration "60": missing unit after 60 (want ms, s, m, h or d)`}},
		{"per unknown unit", ruleFile(with(rateFields, "per: 1w")...), []string{`f.yaml:8: per: invalid duration "1w": unknown unit "w" (want ms, s, m, h or d)`}},
		{"per fraction", ruleFile(with(rateFields, "per: 1.5h")...), []string{`f.yaml:8: per: invalid duration "1.5h": want whole numbers, like 1h30m rather than 1.5h`}},
		{"per negative", ruleFile(with(rateFields, "per: -1m")...), []string{`f.yaml:8: per: invalid duration "-1m": must not be negative`}},
		{"per zero", ruleFile(with(rateFields, "per: 0s")...), []string{`f.yaml:8: per: got "0s", want more than 0s`}},
		{"per above 366d", ruleFile(with(rateFields, "per: 366d1ms")...), []string{`f.yaml:8: per: invalid duration "366d1ms": above the 366d maximum`}},
		{"per a list", ruleFile(with(rateFields, "per: [1m]")...), []string{"f.yaml:8: per: got a list, want a duration like 1m or 1h30m"}},
		{"per empty", ruleFile(with(rateFields, "per:")...), []string{"f.yaml:8: per: got nothing, want a duration like 1m or 1h30m"}},

		{"count unknown", ruleFile(with(rateFields, "count: checks")...), []string{`f.yaml:9: count: got "checks", want failures or attempts`}},
		{"count for consecutive_failures", ruleFile(with(consecutiveFields, "count: failures")...), []string{"f.yaml:8: count: not allowed for type consecutive_failures"}},
		{"count for failure_rate", ruleFile(with(failureRateFields, "count: failures")...), []string{"f.yaml:9: count: not allowed for type failure_rate"}},
		{"burst zero", ruleFile(with(rateFields, "burst: 0")...), []string{"f.yaml:9: burst: got 0, want an integer from 1 to 1000000"}},
		{"burst above a million", ruleFile(with(rateFields, "burst: 1000001")...), []string{"f.yaml:9: burst: got 1000001, want an integer from 1 to 1000000"}},
		{"burst for consecutive_failures", ruleFile(with(consecutiveFields, "burst: 5")...), []string{"f.yaml:8: burst: not allowed for type consecutive_failures"}},
		{"burst for failure_rate", ruleFile(with(failureRateFields, "burst: 5")...), []string{"f.yaml:9: burst: not allowed for type failure_rate"}},
		{"hold for rate", ruleFile(with(rateFields, "hold: 1d")...), []string{"f.yaml:9: hold: not allowed for type rate"}},
		{"hold for failure_rate", ruleFile(with(failureRateFields, "hold: 1d")...), []string{"f.yaml:9: hold: not allowed for type failure_rate"}},
		{"hold zero", ruleFile(with(consecutiveFields, "hold: 0d")...), []string{`f.yaml:8: hold: got "0d", want more than 0s`}},
		{"hold above 366d", ruleFile(with(consecutiveFields, "hold: 367d")...), []string{`f.yaml:8: hold: invalid duration "367d": above the 366d maximum`}},
		{"hysteresis for rate", ruleFile(with(rateFields, "hysteresis: 30s")...), []string{"f.yaml:9: hysteresis: not allowed for type rate"}},
		{"hysteresis for consecutive_failures", ruleFile(with(consecutiveFields, "hysteresis: 30s")...), []string{"f.yaml:8: hysteresis: not allowed for type consecutive_failures"}},
		{"hysteresis bad", ruleFile(with(failureRateFields, "hysteresis: soon")...), []string{`f.yaml:9: hysteresis: invalid duration "soon": want a number at "soon"`}},

		{"action unknown", ruleFile(with(rateFields, "action: deny")...), []string{`f.yaml:9: action: got "deny", want slow, block or challenge`}},
		{"action allow", ruleFile(with(rateFields, "action: allow")...), []string{`f.yaml:9: action: got "allow", want slow, block or challenge`}},
		{"mode unknown", ruleFile(with(rateFields, "mode: dry-run")...), []string{`f.yaml:9: mode: got "dry-run", want enforce or shadow`}},
		{"on_store_error unknown", ruleFile(with(rateFields, "on_store_error: fail")...), []string{`f.yaml:9: on_store_error: got "fail", want local, closed or open`}},

		{"ipv4_prefix for key account", ruleFile(with(rateFields, "ipv4_prefix: 24")...), []string{"f.yaml:9: ipv4_prefix: not allowed for key account"}},
		{"ipv6_prefix for key account+ip", ruleFile(with(with(rateFields, "key: account+ip"), "ipv6_prefix: 48")...), []string{"f.yaml:9: ipv6_prefix: not allowed for key account+ip"}},
		{"ipv4_prefix zero", ruleFile(with(with(rateFields, "key: ip"), "ipv4_prefix: 0")...), []string{"f.yaml:9: ipv4_prefix: got 0, want an integer from 1 to 32"}},
		{"ipv4_prefix 33", ruleFile(with(with(rateFields, "key: ip"), "ipv4_prefix: 33")...), []string{"f.yaml:9: ipv4_prefix: got 33, want an integer from 1 to 32"}},
		{"ipv6_prefix 129", ruleFile(with(with(rateFields, "key: ip"), "ipv6_prefix: 129")...), []string{"f.yaml:9: ipv6_prefix: got 129, want an integer from 1 to 128"}},

		{"key global for rate", ruleFile(with(rateFields, "key: global")...), []string{"f.yaml:5: key: global is only for type failure_rate"}},
		{"key global for consecutive_failures", ruleFile(with(consecutiveFields, "key: global")...), []string{"f.yaml:5: key: global is only for type failure_rate"}},
		{"failure_rate by account", ruleFile(with(failureRateFields, "key: account")...), []string{"f.yaml:5: key: type failure_rate needs key global, got account"}},

		{"distinct without of", ruleFile(without(distinctFields, "of")...), []string{"f.yaml:3: of: required for type distinct, want account"}},
		{"distinct of ip", ruleFile(with(distinctFields, "of: ip")...), []string{`f.yaml:7: of: got "ip", want account`}},
		{"distinct by account", ruleFile(with(distinctFields, "key: account")...), []string{"f.yaml:5: key: type distinct needs key ip, got account"}},
		{"distinct blocks", ruleFile(with(distinctFields, "action: block")...), []string{"f.yaml:10: action: type distinct takes challenge or slow, got block"}},
		{"distinct with a burst", ruleFile(with(distinctFields, "burst: 5")...), []string{"f.yaml:10: burst: not allowed for type distinct"}},
		{"distinct without per", ruleFile(without(distinctFields, "per")...), []string{"f.yaml:3: per: required for type distinct"}},
		{"of for a rate rule", ruleFile(with(rateFields, "of: account")...), []string{"f.yaml:9: of: not allowed for type rate"}},

		{"familiar_networks a list", ruleFile(rateFields...) + "familiar_networks: [24]\n", []string{"f.yaml:9: familiar_networks: got a list, want a mapping like {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}"}},
		{"familiar_networks without hold", ruleFile(rateFields...) + "familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48}\n", []string{"f.yaml:9: familiar_networks: hold: required"}},
		{"familiar_networks unknown field", ruleFile(rateFields...) + "familiar_networks:\n  ipv4_prefix: 24\n  ipv6_prefix: 48\n  hold: 90d\n  ipv6: 64\n", []string{`f.yaml:13: unknown field "ipv6" in familiar_networks (want ipv4_prefix, ipv6_prefix and hold)`}},
		{"familiar_networks bad values", ruleFile(rateFields...) + "familiar_networks:\n  ipv4_prefix: 33\n  ipv6_prefix: 8\n  hold: 0s\n", []string{
			"f.yaml:10: familiar_networks: ipv4_prefix: got 33, want an integer from 8 to 32",
			"f.yaml:11: familiar_networks: ipv6_prefix: got 8, want an integer from 16 to 128",
			`f.yaml:12: familiar_networks: hold: got "0s", want more than 0s`,
		}},

		{"interval below 1µs", ruleFile(with(with(rateFields, "limit: 1000000"), "per: 999ms")...), []string{"f.yaml:7: limit: per/limit is 999ns, want at least 1µs: lower limit or raise per"}},
		{"tolerance above 366d", ruleFile(with(with(with(rateFields, "limit: 1"), "per: 183d"), "burst: 3")...), []string{"f.yaml:9: burst: burst×per/limit exceeds 366d, the longest tolerance guardian keeps: lower burst or per"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Parse("f.yaml", []byte(tt.src), t0)
			if set != nil {
				t.Errorf("Parse returned a Set along with errors")
			}
			got := errorLines(t, err)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Parse errors:\n got %q\nwant %q\nfile:\n%s", got, tt.want, tt.src)
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	src := `version: 2
rules:
  - name: login-account
    flows: [login, signup]
    key: account
    type: rate
    limit: 0
    per: 1w
    hold: 1d
  - name: login-account
    flows: login
    key: global
    type: consecutive_failures
    limit: 100
    per: 1m
  - name: Global
    flows: [login]
    key: ip
    type: failure_rate
    limit: "1000"
    mode: shadow
    ipv4_prefix: 24
    colour: red
`
	want := `rules.yaml:1: version: got 2, want 1
rules.yaml:4: flows: got "signup", want login, password_reset, otp_send or otp_verify
rules.yaml:7: limit: got 0, want an integer from 1 to 1000000
rules.yaml:8: per: invalid duration "1w": unknown unit "w" (want ms, s, m, h or d)
rules.yaml:9: hold: not allowed for type rate
rules.yaml:10: name: "login-account" is already the name of the rule at line 3
rules.yaml:11: flows: got "login", want a list like [login]
rules.yaml:12: key: global is only for type failure_rate
rules.yaml:15: per: not allowed for type consecutive_failures
rules.yaml:16: name: got "Global", want 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'
rules.yaml:16: per: required for type failure_rate
rules.yaml:18: key: type failure_rate needs key global, got ip
rules.yaml:20: limit: got "1000", want an integer from 1 to 1000000
rules.yaml:23: unknown field "colour" in a rule`

	_, err := Parse("rules.yaml", []byte(src), t0)
	if got := strings.Join(errorLines(t, err), "\n"); got != want {
		t.Errorf("Parse errors:\n got:\n%s\nwant:\n%s", got, want)
	}
}

func TestParseAppliesDefaults(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want Rule
	}{
		{
			name: "rate",
			src:  ruleFile(rateFields...),
			want: Rule{Name: "r", Flows: []Flow{Login}, Key: KeyAccount, Type: Rate, Count: Attempts, Limit: 5,
				Per: time.Minute, Burst: 5, Action: Slow, Mode: Enforce, OnStoreError: Local, Line: 3},
		},
		{
			name: "rate by ip",
			src:  ruleFile(with(rateFields, "key: ip")...),
			want: Rule{Name: "r", Flows: []Flow{Login}, Key: KeyIP, Type: Rate, Count: Attempts, Limit: 5,
				Per: time.Minute, Burst: 5, Action: Slow, Mode: Enforce, OnStoreError: Local,
				IPv4Prefix: 32, IPv6Prefix: 64, Line: 3},
		},
		{
			name: "consecutive_failures",
			src:  ruleFile(consecutiveFields...),
			want: Rule{Name: "r", Flows: []Flow{Login}, Key: KeyAccount, Type: ConsecutiveFailures, Limit: 100,
				Action: Block, Mode: Enforce, OnStoreError: Local, Hold: 90 * 24 * time.Hour, Line: 3},
		},
		{
			name: "failure_rate",
			src:  ruleFile(failureRateFields...),
			want: Rule{Name: "r", Flows: []Flow{Login}, Key: KeyGlobal, Type: FailureRate, Limit: 1000,
				Per: time.Minute, Action: Challenge, Mode: Enforce, OnStoreError: Local,
				Hysteresis: 30 * time.Second, Line: 3},
		},
		{
			name: "everything stated",
			src: ruleFile("name: everything", "flows: [otp_verify, login]", "key: ip", "type: rate",
				"count: failures", "limit: 1_000", "per: 1h30m", "burst: 20", "action: block", "mode: shadow",
				"on_store_error: closed", "ipv4_prefix: 24", "ipv6_prefix: 48"),
			want: Rule{Name: "everything", Flows: []Flow{OTPVerify, Login}, Key: KeyIP, Type: Rate, Count: Failures,
				Limit: 1000, Per: 90 * time.Minute, Burst: 20, Action: Block, Mode: Shadow, OnStoreError: Closed,
				IPv4Prefix: 24, IPv6Prefix: 48, Line: 3},
		},
		{
			name: "hold stated, in a flow mapping",
			src:  "version: 1\nrules:\n  - {name: a, flows: [login], key: account, type: consecutive_failures, limit: 3, hold: 12h, on_store_error: open}\n",
			want: Rule{Name: "a", Flows: []Flow{Login}, Key: KeyAccount, Type: ConsecutiveFailures, Limit: 3,
				Action: Block, Mode: Enforce, OnStoreError: Open, Hold: 12 * time.Hour, Line: 3},
		},
		{
			name: "zero hysteresis",
			src:  ruleFile(with(failureRateFields, "hysteresis: 0s")...),
			want: Rule{Name: "r", Flows: []Flow{Login}, Key: KeyGlobal, Type: FailureRate, Limit: 1000,
				Per: time.Minute, Action: Challenge, Mode: Enforce, OnStoreError: Local, Line: 3},
		},
		{
			name: "smallest interval and widest prefixes",
			src:  ruleFile(with(with(with(with(rateFields, "key: ip"), "limit: 1000"), "per: 1ms"), "ipv6_prefix: 128")...),
			want: Rule{Name: "r", Flows: []Flow{Login}, Key: KeyIP, Type: Rate, Count: Attempts, Limit: 1000,
				Per: time.Millisecond, Burst: 1000, Action: Slow, Mode: Enforce, OnStoreError: Local,
				IPv4Prefix: 32, IPv6Prefix: 128, Line: 3},
		},
		{
			name: "largest tolerance",
			src:  ruleFile(with(with(with(rateFields, "limit: 2"), "per: 366d"), "burst: 2")...),
			want: Rule{Name: "r", Flows: []Flow{Login}, Key: KeyAccount, Type: Rate, Count: Attempts, Limit: 2,
				Per: 366 * 24 * time.Hour, Burst: 2, Action: Slow, Mode: Enforce, OnStoreError: Local, Line: 3},
		},
		{
			name: "longest name",
			src:  ruleFile(with(rateFields, "name: a"+strings.Repeat("-", 61)+"z")...),
			want: Rule{Name: "a" + strings.Repeat("-", 61) + "z", Flows: []Flow{Login}, Key: KeyAccount, Type: Rate,
				Count: Attempts, Limit: 5, Per: time.Minute, Burst: 5, Action: Slow, Mode: Enforce,
				OnStoreError: Local, Line: 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := Parse("f.yaml", []byte(tt.src), t0)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(set.Rules) != 1 {
				t.Fatalf("Parse: got %d rules, want 1", len(set.Rules))
			}
			if got := set.Rules[0]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
			if set.Source != "f.yaml" || !set.LoadedAt.Equal(t0) {
				t.Errorf("Set source, loaded at = %q, %v; want f.yaml, %v", set.Source, set.LoadedAt, t0)
			}
		})
	}
}

func TestParseAliases(t *testing.T) {
	src := `version: 1
common: &login [login, password_reset]
rules:
  - name: a
    flows: *login
    key: account
    type: rate
    limit: 5
    per: 1m
`
	_, err := Parse("f.yaml", []byte(src), t0)
	if got, want := errorLines(t, err), []string{`f.yaml:2: unknown field "common" at top level (want version, rules, familiar_networks and lists)`}; !slices.Equal(got, want) {
		t.Errorf("Parse errors: got %q, want %q", got, want)
	}

	src = `version: 1
rules:
  - name: a
    flows: &login [login, password_reset]
    key: account
    type: rate
    limit: 5
    per: 1m
  - name: b
    flows: *login
    key: ip
    type: rate
    limit: 30
    per: 10m
`
	set, err := Parse("f.yaml", []byte(src), t0)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []Flow{Login, PasswordReset}
	for _, r := range set.Rules {
		if !slices.Equal(r.Flows, want) {
			t.Errorf("rule %s flows = %v, want %v", r.Name, r.Flows, want)
		}
	}
}

func TestDefault(t *testing.T) {
	set := Default()
	if set.Source != "builtin" {
		t.Errorf("Default().Source = %q, want builtin", set.Source)
	}
	if Default() != set {
		t.Errorf("Default() built a second Set; want the same one on every call")
	}
	minute, day := time.Minute, 24*time.Hour
	want := []Rule{
		{Name: "login-account", Flows: []Flow{Login}, Key: KeyAccount, Type: Rate, Count: Failures,
			Limit: 1, Per: minute, Burst: 5, Action: Slow, Mode: Enforce, OnStoreError: Local},
		{Name: "password-reset-account", Flows: []Flow{PasswordReset}, Key: KeyAccount, Type: Rate, Count: Failures,
			Limit: 6, Per: time.Hour, Burst: 10, Action: Slow, Mode: Enforce, OnStoreError: Local},
		{Name: "login-ip", Flows: []Flow{Login, PasswordReset}, Key: KeyIP, Type: Rate, Count: Failures,
			Limit: 30, Per: 10 * minute, Burst: 30, Action: Slow, Mode: Enforce, OnStoreError: Local,
			IPv4Prefix: 32, IPv6Prefix: 64},
		{Name: "login-ip6-48", Flows: []Flow{Login, PasswordReset}, Key: KeyIP, Type: Rate, Count: Failures,
			Limit: 4050, Per: day, Burst: 300, Action: Slow, Mode: Enforce, OnStoreError: Local,
			IPv4Prefix: 32, IPv6Prefix: 48},
		{Name: "login-ip-distinct-accounts", Flows: []Flow{Login}, Key: KeyIP, Type: Distinct, Of: KeyAccount, Count: Failures,
			Limit: 20, Per: day, Action: Challenge, Mode: Enforce, OnStoreError: Local, IPv4Prefix: 24, IPv6Prefix: 48},
		{Name: "login-hard-stop", Flows: []Flow{Login}, Key: KeyAccount, Type: ConsecutiveFailures,
			Limit: 100, Action: Block, Mode: Enforce, OnStoreError: Local, Hold: 90 * day},
		{Name: "login-secret-spray", Flows: []Flow{Login}, Key: KeySecret, Type: Rate, Count: Failures,
			Limit: 10, Per: 10 * minute, Burst: 10, Action: Challenge, Mode: Enforce, OnStoreError: Local},
		{Name: "otp-send-recipient", Flows: []Flow{OTPSend}, Key: KeyRecipient, Type: Rate, Count: Attempts,
			Limit: 3, Per: 15 * minute, Burst: 3, Action: Slow, Mode: Enforce, OnStoreError: Local},
		{Name: "otp-verify-recipient", Flows: []Flow{OTPVerify}, Key: KeyRecipient, Type: Rate, Count: Failures,
			Limit: 5, Per: 15 * minute, Burst: 5, Action: Slow, Mode: Enforce, OnStoreError: Local},
		{Name: "login-global-failures", Flows: []Flow{Login}, Key: KeyGlobal, Type: FailureRate,
			Limit: 1000, Per: minute, Action: Challenge, Mode: Enforce, OnStoreError: Local,
			Hysteresis: 30 * time.Second},
	}
	if got, want := set.Familiar, (FamiliarNetworks{IPv4Prefix: 24, IPv6Prefix: 48, Hold: 90 * day}); got != want {
		t.Errorf("Default().Familiar = %+v, want %+v", got, want)
	}
	if len(set.Rules) != len(want) {
		t.Fatalf("Default() has %d rules, want %d", len(set.Rules), len(want))
	}
	for i, got := range set.Rules {
		if got.Line < 1 {
			t.Errorf("rule %s: Line = %d, want its line in defaults.yaml", got.Name, got.Line)
		}
		got.Line = 0
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("Default() rule %d:\n got %+v\nwant %+v", i, got, want[i])
		}
	}
}

func TestDistinctRule(t *testing.T) {
	set, err := Parse("f.yaml", []byte(ruleFile(with(with(distinctFields, "ipv4_prefix: 24"), "ipv6_prefix: 48")...)), t0)
	if err != nil {
		t.Fatal(err)
	}
	got := set.Rules[0]
	got.Line = 0
	want := Rule{Name: "r", Flows: []Flow{Login}, Key: KeyIP, Type: Distinct, Of: KeyAccount, Count: Failures,
		Limit: 20, Per: 24 * time.Hour, Action: Challenge, Mode: Enforce, OnStoreError: Local, IPv4Prefix: 24, IPv6Prefix: 48}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("distinct rule:\n got %+v\nwant %+v", got, want)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if w := `{"name":"r","flows":["login"],"key":"ip","type":"distinct","mode":"enforce","action":"challenge","on_store_error":"local","limit":20,"count":"failures","per":"1d","ipv4_prefix":24,"ipv6_prefix":48,"of":"account"}`; string(b) != w {
		t.Errorf("JSON = %s, want %s", b, w)
	}
}

func TestFamiliarNetworks(t *testing.T) {
	set, err := Parse("f.yaml", []byte(ruleFile(rateFields...)+"familiar_networks: {ipv4_prefix: 16, ipv6_prefix: 56, hold: 30d}\n"), t0)
	if err != nil {
		t.Fatal(err)
	}
	want := FamiliarNetworks{IPv4Prefix: 16, IPv6Prefix: 56, Hold: 30 * 24 * time.Hour}
	if set.Familiar != want || !set.Familiar.On() {
		t.Fatalf("Familiar = %+v, want %+v", set.Familiar, want)
	}
	if got := set.InMode(Shadow).Familiar; got != want {
		t.Errorf("InMode(Shadow).Familiar = %+v, want %+v", got, want)
	}
	set, err = Parse("f.yaml", []byte(ruleFile(rateFields...)), t0)
	if err != nil {
		t.Fatal(err)
	}
	if set.Familiar.On() {
		t.Errorf("a file without familiar_networks learns networks: %+v", set.Familiar)
	}
}

func TestDefaultsFileIsValid(t *testing.T) {
	if _, err := Parse("defaults.yaml", defaultsYAML, t0); err != nil {
		t.Fatalf("defaults.yaml does not validate:\n%v", err)
	}
}

func TestSetFor(t *testing.T) {
	src := `version: 1
rules:
  - {name: a, flows: [login], key: account, type: rate, limit: 1, per: 1m}
  - {name: b, flows: [otp_send], key: recipient, type: rate, limit: 3, per: 15m}
  - {name: c, flows: [password_reset, login], key: ip, type: rate, limit: 30, per: 10m}
  - {name: d, flows: [login], key: account, type: consecutive_failures, limit: 100}
`
	set, err := Parse("f.yaml", []byte(src), t0)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	tests := []struct {
		flow Flow
		want []string
	}{
		{Login, []string{"a", "c", "d"}},
		{PasswordReset, []string{"c"}},
		{OTPSend, []string{"b"}},
		{OTPVerify, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, r := range set.For(tt.flow) {
			got = append(got, r.Name)
			if !slices.Contains(r.Flows, tt.flow) {
				t.Errorf("For(%s) returned %s, which does not apply to it", tt.flow, r.Name)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("For(%s) = %v, want %v", tt.flow, got, tt.want)
		}
	}
	if r, ok := set.Rule("c"); !ok || r.Line != 5 {
		t.Errorf(`Rule("c") = %v, %t; want the rule at line 5`, r, ok)
	}
	if _, ok := set.Rule("z"); ok {
		t.Errorf(`Rule("z") found a rule, want none`)
	}
}

func TestHolderSwapKeepsOldSetForItsHolder(t *testing.T) {
	var h Holder
	if got := h.Load(); got != nil {
		t.Fatalf("zero Holder Load() = %v, want nil", got)
	}
	old, err := Parse("old.yaml", []byte(ruleFile(rateFields...)), t0)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	next, err := Parse("new.yaml", []byte(ruleFile(with(rateFields, "limit: 9")...)), t0.Add(time.Minute))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	h.Store(old)

	loaded, swapped := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	var gotSource string
	var gotLimit int64
	wg.Go(func() {
		s := h.Load()
		close(loaded)
		<-swapped
		// A check that loaded the old set finishes on it.
		gotSource, gotLimit = s.Source, s.For(Login)[0].Limit
	})
	<-loaded
	h.Store(next)
	close(swapped)
	wg.Wait()

	if gotSource != "old.yaml" || gotLimit != 5 {
		t.Errorf("holder of the old set saw %s limit %d, want old.yaml limit 5", gotSource, gotLimit)
	}
	if got := h.Load(); got != next {
		t.Errorf("Load() after Store = %s, want new.yaml", got.Source)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(good, []byte(ruleFile(rateFields...)), 0o600); err != nil {
		t.Fatal(err)
	}
	set, err := Load(good, t0)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if set.Source != good || len(set.Rules) != 1 {
		t.Errorf("Load: source %q with %d rules, want %q with 1", set.Source, len(set.Rules), good)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(ruleFile(with(rateFields, "limit: 0")...)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad, t0)
	if got, want := errorLines(t, err), []string{bad + ":7: limit: got 0, want an integer from 1 to 1000000"}; !slices.Equal(got, want) {
		t.Errorf("Load(bad) errors = %q, want %q", got, want)
	}

	_, err = Load(filepath.Join(dir, "missing.yaml"), t0)
	if err == nil || errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v; want an os.ErrNotExist error that is not ErrInvalid", err)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "rules: ") {
		t.Errorf("Load(missing) error %q lacks the rules: prefix", err)
	}
}

func TestErrorsFormat(t *testing.T) {
	es := Errors{{File: "a.yaml", Line: 2, Msg: "first"}, {File: "a.yaml", Line: 10, Msg: "second"}}
	if got, want := es.Error(), "a.yaml:2: first\na.yaml:10: second"; got != want {
		t.Errorf("Errors.Error() = %q, want %q", got, want)
	}
	var err error = es
	if !errors.Is(err, ErrInvalid) || !errors.Is(es[0], ErrInvalid) {
		t.Errorf("errors.Is(Errors or Error, ErrInvalid) = false, want true")
	}
	if errors.Is(err, os.ErrNotExist) {
		t.Errorf("errors.Is(Errors, os.ErrNotExist) = true, want false")
	}
}

func TestShadowNames(t *testing.T) {
	set, err := Parse("rules.yaml", []byte(`version: 1
rules:
  - {name: b-shadow, flows: [login], key: ip, type: rate, limit: 1, per: 1m, mode: shadow}
  - {name: enforced, flows: [login], key: ip, type: rate, limit: 1, per: 1m}
  - {name: a-shadow, flows: [login], key: account, type: rate, limit: 1, per: 1m, mode: shadow}
`), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := set.ShadowNames(), []string{"b-shadow", "a-shadow"}; !slices.Equal(got, want) {
		t.Errorf("ShadowNames = %v, want %v (file order)", got, want)
	}
	if got := Default().ShadowNames(); len(got) != 0 {
		t.Errorf("built-in rules: ShadowNames = %v, want none", got)
	}
}
