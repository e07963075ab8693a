package rules

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics, that its errors are sorted and
// located, and that every Set it returns keeps the invariants the store
// relies on. Seeds live in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add(defaultsYAML)
	f.Add([]byte(ruleFile(rateFields...)))
	f.Add([]byte(ruleFile(with(failureRateFields, "hysteresis: 0s")...)))
	f.Add([]byte(ruleFile(with(distinctFields, "action: slow")...)))
	f.Add([]byte(listRulesHead + "lists:\n  allow:\n    - {network: 203.0.113.0/24, exempt: [login-ip], reason: office}\n  deny:\n    - {network: \"2001:db8::1\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Parse("f.yaml", data, t0)
		if err != nil {
			checkErrors(t, err)
			return
		}
		checkSet(t, set)
	})
}

// checkErrors asserts that err is a non-empty Errors, sorted by line, with
// every line at least 1, matching ErrInvalid.
func checkErrors(tb testing.TB, err error) {
	tb.Helper()
	var es Errors
	if !errors.As(err, &es) || len(es) == 0 || !errors.Is(err, ErrInvalid) {
		tb.Fatalf("Parse error %v (%T) is not a non-empty Errors matching ErrInvalid", err, err)
	}
	if !slices.IsSortedFunc(es, func(a, b Error) int { return a.Line - b.Line }) {
		tb.Fatalf("Parse errors not sorted by line:\n%v", err)
	}
	for _, e := range es {
		if e.Line < 1 || e.File != "f.yaml" || e.Msg == "" {
			tb.Fatalf("Parse error %+v lacks a file, a line or a message", e)
		}
	}
}

// checkSet asserts the invariants of a parsed Set: what the store and the
// engine may rely on without checking again.
func checkSet(tb testing.TB, set *Set) {
	tb.Helper()
	if len(set.Rules) == 0 {
		tb.Fatal("Parse returned a Set without rules")
	}
	names := make(map[string]bool)
	for i := range set.Rules {
		r := &set.Rules[i]
		if names[r.Name] || !ruleName.MatchString(r.Name) {
			tb.Errorf("rule %q: name repeated or invalid", r.Name)
		}
		names[r.Name] = true
		if len(r.Flows) == 0 || r.Limit < 1 || r.Limit > maxLimit || r.Line < 1 {
			tb.Errorf("rule %q: flows %v, limit %d, line %d", r.Name, r.Flows, r.Limit, r.Line)
		}
		if (r.Of != "") != (r.Type == Distinct) {
			tb.Errorf("rule %q: of %q with type %s", r.Name, r.Of, r.Type)
		}
		if r.Action.Severity() == 0 || r.Mode == "" || r.OnStoreError == "" {
			tb.Errorf("rule %q: action %q, mode %q, on_store_error %q", r.Name, r.Action, r.Mode, r.OnStoreError)
		}
		if (r.Key == KeyGlobal) != (r.Type == FailureRate) {
			tb.Errorf("rule %q: key %s with type %s", r.Name, r.Key, r.Type)
		}
		switch r.Type {
		case Rate:
			iv := r.Interval()
			if r.Per <= 0 || r.Per > MaxDuration || r.Burst < 1 || r.Count == "" {
				tb.Errorf("rule %q: per %v, burst %d, count %q", r.Name, r.Per, r.Burst, r.Count)
			}
			if iv < time.Microsecond || iv > MaxDuration/time.Duration(r.Burst) {
				tb.Errorf("rule %q: interval %v with burst %d: below 1µs or tolerance above 366d", r.Name, iv, r.Burst)
			}
		case ConsecutiveFailures:
			if r.Per != 0 || r.Hold <= 0 || r.Hold > MaxDuration {
				tb.Errorf("rule %q: per %v, hold %v", r.Name, r.Per, r.Hold)
			}
		case FailureRate:
			if r.Per <= 0 || r.Per > MaxDuration || r.Hysteresis < 0 || r.Hysteresis > MaxDuration {
				tb.Errorf("rule %q: per %v, hysteresis %v", r.Name, r.Per, r.Hysteresis)
			}
		case Distinct:
			if r.Per <= 0 || r.Per > MaxDuration || r.Key != KeyIP || r.Of != KeyAccount || r.Count == "" || r.Action == Block {
				tb.Errorf("rule %q: per %v, key %s, of %q, count %q, action %s", r.Name, r.Per, r.Key, r.Of, r.Count, r.Action)
			}
		default:
			tb.Errorf("rule %q: type %q", r.Name, r.Type)
		}
		ip := r.Key == KeyIP
		if ip != (r.IPv4Prefix >= 1 && r.IPv4Prefix <= 32) || ip != (r.IPv6Prefix >= 1 && r.IPv6Prefix <= 128) {
			tb.Errorf("rule %q: key %s with prefixes %d, %d", r.Name, r.Key, r.IPv4Prefix, r.IPv6Prefix)
		}
	}
	checkLists(tb, set)
	for _, flow := range Flows {
		for _, r := range set.For(flow) {
			if !slices.Contains(r.Flows, flow) {
				tb.Errorf("For(%s) holds %q, which does not list it", flow, r.Name)
			}
		}
	}
	// What GET /v1/rules shows must read back as the same rules.
	data, err := json.Marshal(map[string]any{"version": 1, "rules": set.Rules})
	if err != nil {
		tb.Fatalf("json.Marshal: %v", err)
	}
	back, err := Parse("json", data, t0)
	if err != nil {
		tb.Fatalf("Parse(JSON of a valid set): %v\n%s", err, data)
	}
	assertSameRules(tb, back.Rules, set.Rules)
}

// checkLists asserts the invariants of a set's static lists: valid masked
// networks, allow entries exempting only from rules of the set they may
// exempt from, deny entries exempting from nothing.
func checkLists(tb testing.TB, set *Set) {
	tb.Helper()
	if set.Lists.Len() > MaxStaticEntries {
		tb.Errorf("%d list entries", set.Lists.Len())
	}
	for _, e := range slices.Concat(set.Lists.Allow, set.Lists.Deny) {
		if !e.Network.IsValid() || e.Network.Masked() != e.Network || e.Network.Addr().Is4In6() || len(e.Reason) > MaxReasonLen || e.Line < 1 {
			tb.Errorf("list entry %+v", e)
		}
	}
	for _, e := range set.Lists.Allow {
		if len(e.Exempt) == 0 || set.CheckExempt(e.Exempt) != nil {
			tb.Errorf("allow entry %+v exempts from %v", e, e.Exempt)
		}
	}
	for _, e := range set.Lists.Deny {
		if len(e.Exempt) != 0 {
			tb.Errorf("deny entry %+v exempts", e)
		}
	}
}
