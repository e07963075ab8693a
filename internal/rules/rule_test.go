package rules

import (
	"reflect"
	"testing"
	"time"
)

func TestInModeChangesOnlyTheMode(t *testing.T) {
	for _, set := range []*Set{Default(), mustParseSet(t, `version: 1
rules:
  - name: a
    flows: [login, otp_verify]
    key: ip
    ipv4_prefix: 20
    ipv6_prefix: 56
    type: rate
    count: failures
    limit: 7
    per: 90s
    burst: 11
    action: block
    on_store_error: closed
  - name: b
    flows: [password_reset]
    key: account
    type: consecutive_failures
    limit: 9
    hold: 3d
    action: challenge
    mode: shadow
  - name: c
    flows: [login]
    key: global
    type: failure_rate
    limit: 50
    per: 2h
    hysteresis: 1m30s
    on_store_error: open
`)} {
		got := set.InMode(Shadow)
		if len(got.Rules) != len(set.Rules) {
			t.Fatalf("%d rules, want %d", len(got.Rules), len(set.Rules))
		}
		for i := range set.Rules {
			want := set.Rules[i]
			want.Mode = Shadow
			if !reflect.DeepEqual(got.Rules[i], want) {
				t.Errorf("rule %d = %+v, want %+v", i, got.Rules[i], want)
			}
		}
		for _, f := range Flows {
			if len(got.For(f)) != len(set.For(f)) {
				t.Errorf("flow %s: %d rules, want %d", f, len(got.For(f)), len(set.For(f)))
			}
		}
	}
	set := Default().InMode(Shadow)
	if set.InMode(Shadow) != set {
		t.Error("InMode of a set already in that mode made a copy")
	}
	if Default().Rules[0].Mode != Enforce {
		t.Error("InMode changed the set it was called on")
	}
}

// mustParseSet parses yaml, failing the test on an error.
func mustParseSet(tb testing.TB, yaml string) *Set {
	tb.Helper()
	set, err := Parse("test.yaml", []byte(yaml), time.Time{})
	if err != nil {
		tb.Fatal(err)
	}
	return set
}
