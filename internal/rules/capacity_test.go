package rules

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// manyRules returns a rules file of n rules on flows, each made by rule(i)
// as its fields after name and flows, and the line each rule starts on.
func manyRules(n int, flows string, rule func(i int) []string) (string, []int) {
	var b strings.Builder
	b.WriteString("version: 1\nrules:\n")
	line := 3
	lines := make([]int, n)
	for i := range n {
		lines[i] = line
		fields := append([]string{fmt.Sprintf("name: r%d", i), "flows: " + flows}, rule(i)...)
		b.WriteString("  - " + strings.Join(fields, "\n    ") + "\n")
		line += len(fields)
	}
	return b.String(), lines
}

// failuresRule is a rate rule counting failures; every third is a
// consecutive-failure count instead, the other kind a success gives back to.
func failuresRule(i int) []string {
	if i%3 == 2 {
		return []string{"key: account", "type: consecutive_failures", "limit: 100"}
	}
	return []string{"key: account", "type: rate", "count: failures", "limit: 5", "per: 1m"}
}

func TestParseRefusesMoreSettlingRulesThanAnAttemptRecords(t *testing.T) {
	if MaxSettlingRules != 63 {
		t.Fatalf("MaxSettlingRules = %d; this test is written for 63", MaxSettlingRules)
	}
	full, _ := manyRules(63, "[login, password_reset]", failuresRule)
	if _, err := Parse("rules.yaml", []byte(full), t0); err != nil {
		t.Fatalf("63 rules a report settles: %v, want valid", err)
	}

	over, lines := manyRules(64, "[login, password_reset]", failuresRule)
	_, err := Parse("rules.yaml", []byte(over), t0)
	want := []string{
		fmt.Sprintf("rules.yaml:%d: flows: flow login has more than 63 rules that a report settles (type rate or distinct with count: failures, or consecutive_failures); an attempt id records at most 63", lines[63]),
		fmt.Sprintf("rules.yaml:%d: flows: flow password_reset has more than 63 rules that a report settles (type rate or distinct with count: failures, or consecutive_failures); an attempt id records at most 63", lines[63]),
	}
	if got := errorLines(t, err); !slices.Equal(got, want) {
		t.Fatalf("64 rules: errors\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Rules a report settles nothing of, or on other flows, do not count.
	mixed, _ := manyRules(120, "[login]", func(i int) []string {
		if i%2 == 0 {
			return []string{"key: ip", "type: rate", "count: attempts", "limit: 5", "per: 1m"}
		}
		return failuresRule(i)
	})
	if _, err := Parse("rules.yaml", []byte(mixed), t0); err != nil {
		t.Errorf("60 rules a report settles among 120: %v, want valid", err)
	}
	split, _ := manyRules(120, "[login]", failuresRule)
	split = strings.Replace(split, "flows: [login]", "flows: [otp_verify]", 60)
	if _, err := Parse("rules.yaml", []byte(split), t0); err != nil {
		t.Errorf("120 such rules, 60 on each of two flows: %v, want valid", err)
	}
	shadow, lines := manyRules(64, "[login]", func(i int) []string { return append(failuresRule(i), "mode: shadow") })
	if got := errorLines(t, func() error { _, err := Parse("r", []byte(shadow), t0); return err }()); len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("r:%d: flows: flow login has more than 63", lines[63])) {
		t.Errorf("64 shadow rules: errors %q, want one at the 64th rule", got)
	}
}
