package rules

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestRuleMarshalJSON(t *testing.T) {
	tests := []struct {
		name string
		rule Rule
		want string
	}{
		{
			name: "rate by ip",
			rule: Rule{Name: "login-ip", Flows: []Flow{Login, PasswordReset}, Key: KeyIP, Type: Rate, Count: Failures,
				Limit: 30, Per: 10 * time.Minute, Burst: 30, Action: Slow, Mode: Shadow, OnStoreError: Local,
				IPv4Prefix: 32, IPv6Prefix: 64, Line: 12},
			want: `{"name":"login-ip","flows":["login","password_reset"],"key":"ip","type":"rate","mode":"shadow",` +
				`"action":"slow","on_store_error":"local","limit":30,"count":"failures","per":"10m","burst":30,` +
				`"ipv4_prefix":32,"ipv6_prefix":64}`,
		},
		{
			name: "rate by account",
			rule: Rule{Name: "a", Flows: []Flow{Login}, Key: KeyAccount, Type: Rate, Count: Attempts,
				Limit: 1, Per: 90 * time.Second, Burst: 5, Action: Slow, Mode: Enforce, OnStoreError: Closed},
			want: `{"name":"a","flows":["login"],"key":"account","type":"rate","mode":"enforce","action":"slow",` +
				`"on_store_error":"closed","limit":1,"count":"attempts","per":"1m30s","burst":5}`,
		},
		{
			name: "consecutive_failures",
			rule: Rule{Name: "login-hard-stop", Flows: []Flow{Login}, Key: KeyAccount, Type: ConsecutiveFailures,
				Limit: 100, Action: Block, Mode: Enforce, OnStoreError: Local, Hold: 90 * 24 * time.Hour},
			want: `{"name":"login-hard-stop","flows":["login"],"key":"account","type":"consecutive_failures",` +
				`"mode":"enforce","action":"block","on_store_error":"local","limit":100,"hold":"90d"}`,
		},
		{
			name: "failure_rate with zero hysteresis",
			rule: Rule{Name: "g", Flows: []Flow{Login}, Key: KeyGlobal, Type: FailureRate, Limit: 1000,
				Per: time.Minute, Action: Challenge, Mode: Enforce, OnStoreError: Open},
			want: `{"name":"g","flows":["login"],"key":"global","type":"failure_rate","mode":"enforce",` +
				`"action":"challenge","on_store_error":"open","limit":1000,"per":"1m","hysteresis":"0s"}`,
		},
		{
			name: "zero rule",
			rule: Rule{},
			want: `{"name":"","flows":[],"key":"","type":"","mode":"","action":"","on_store_error":"","limit":0}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.rule)
			if err != nil {
				t.Fatalf("json.Marshal: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("json.Marshal:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestMarshalJSONReadsBackAsRules checks that GET /v1/rules shows rules in
// the rules-file syntax: its JSON, which is YAML, parses back to the same rules.
func TestMarshalJSONReadsBackAsRules(t *testing.T) {
	want := Default().Rules
	data, err := json.Marshal(map[string]any{"version": 1, "rules": want})
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	set, err := Parse("from-json", data, t0)
	if err != nil {
		t.Fatalf("Parse(JSON of the defaults): %v\n%s", err, data)
	}
	assertSameRules(t, set.Rules, want)
}

// assertSameRules fails unless got and want hold the same rules, lines aside.
func assertSameRules(tb testing.TB, got, want []Rule) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("got %d rules, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		g.Line, w.Line = 0, 0
		if !reflect.DeepEqual(g, w) {
			tb.Errorf("rule %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}
