package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"slices"
	"testing"
	"time"
)

func mustSet(t *testing.T, yaml string) *Set {
	t.Helper()
	s, err := Parse("rules.yaml", []byte(yaml), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const diffBase = `version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 5
  - name: trial
    flows: [login]
    key: ip
    type: rate
    limit: 10
    per: 1m
    mode: shadow
  - name: gone
    flows: [otp_send]
    key: recipient
    type: rate
    limit: 3
    per: 15m
`

func TestDiff(t *testing.T) {
	tests := []struct {
		name string
		old  string
		next string
		want Changes
	}{
		{
			name: "the same rules, another order",
			old:  diffBase,
			next: `version: 1
rules:
  - name: gone
    flows: [otp_send]
    key: recipient
    type: rate
    limit: 3
    per: 15m
  - name: trial
    flows: [login]
    key: ip
    type: rate
    limit: 10
    per: 1m
    mode: shadow
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 5
`,
			want: Changes{Added: []string{}, Removed: []string{}, Changed: []RuleChange{}, Settings: []string{}},
		},
		{
			name: "promoted, retuned, one removed, one added, familiar networks on",
			old:  diffBase,
			next: `version: 1
familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 2
    per: 1m
    burst: 10
  - name: trial
    flows: [login]
    key: ip
    type: rate
    limit: 10
    per: 1m
  - name: fresh
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1m
`,
			want: Changes{
				Added:   []string{"fresh"},
				Removed: []string{"gone"},
				Changed: []RuleChange{
					{Rule: "login-account", Fields: []string{"limit", "burst"}},
					{Rule: "trial", Fields: []string{"mode"}, From: Shadow, To: Enforce},
				},
				Settings: []string{"familiar_networks"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Diff(mustSet(t, tt.old), mustSet(t, tt.next))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Diff =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestDiffFromNothingAddsEveryRule(t *testing.T) {
	got := Diff(nil, mustSet(t, diffBase))
	if want := []string{"login-account", "trial", "gone"}; !slices.Equal(got.Added, want) || len(got.Removed)+len(got.Changed)+len(got.Settings) != 0 {
		t.Errorf("Diff(nil, …) = %+v, want %v added", got, want)
	}
}

// TestDiffSeesEveryField changes each field of a rule in turn, and wants
// Diff to name it, and it alone, under a name of its own: a field added to
// Rule without a line in diffFields fails here.
func TestDiffSeesEveryField(t *testing.T) {
	old := mustSet(t, diffBase)
	seen := map[string]string{}
	rt := reflect.TypeOf(Rule{})
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Name == "Name" || f.Name == "Line" {
			continue
		}
		next := *old
		next.Rules = slices.Clone(old.Rules)
		v := reflect.ValueOf(&next.Rules[0]).Elem().Field(i)
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Slice:
			v.Set(reflect.Append(v, reflect.ValueOf(OTPSend)))
		default:
			t.Fatalf("field %s of kind %s: teach this test to change it", f.Name, v.Kind())
		}
		got := Diff(old, &next)
		if len(got.Changed) != 1 || len(got.Changed[0].Fields) != 1 {
			t.Errorf("changing %s: Diff = %+v, want one rule with one field", f.Name, got)
			continue
		}
		name := got.Changed[0].Fields[0]
		if other, dup := seen[name]; dup {
			t.Errorf("%s and %s are both named %q", other, f.Name, name)
		}
		seen[name] = f.Name
	}
}

func TestChangesAttrs(t *testing.T) {
	ch := Diff(mustSet(t, diffBase), mustSet(t, diffBase+"    mode: shadow\n"))
	var b bytes.Buffer
	slog.New(slog.NewJSONHandler(&b, nil)).LogAttrs(context.Background(), slog.LevelInfo, "rules reloaded", ch.Attrs()...)
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"rules_added":      []any{},
		"rules_removed":    []any{},
		"rules_changed":    []any{map[string]any{"rule": "gone", "fields": []any{"mode"}, "mode_from": "enforce", "mode_to": "shadow"}},
		"rules_promoted":   []any{},
		"rules_demoted":    []any{"gone"},
		"settings_changed": []any{},
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s = %#v, want %#v", k, got[k], w)
		}
	}
}
