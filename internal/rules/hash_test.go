package rules_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
)

const hashBase = `version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 5
  - name: login-ip
    flows: [login]
    key: ip
    type: rate
    limit: 30
    per: 10m
    mode: shadow
`

func mustParse(t *testing.T, src string) *rules.Set {
	t.Helper()
	s, err := rules.Parse("rules.yaml", []byte(src), time.Unix(0, 0))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	return s
}

func TestSetHashSameDefinition(t *testing.T) {
	base := mustParse(t, hashBase)
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(base.Hash()) {
		t.Fatalf("Hash() = %q, want 16 lowercase hex digits", base.Hash())
	}
	same := map[string]string{
		"comments and blank lines": "# the rules\n\n" + hashBase + "\n# end\n",
		"defaults spelled out": `version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 60s
    burst: 5
    action: slow
    mode: enforce
    on_store_error: local
  - name: login-ip
    flows: [login]
    key: ip
    type: rate
    count: attempts
    limit: 30
    per: 10m
    burst: 30
    mode: shadow
    ipv4_prefix: 32
    ipv6_prefix: 64
`,
	}
	for name, src := range same {
		if got := mustParse(t, src).Hash(); got != base.Hash() {
			t.Errorf("%s: Hash() = %s, want %s", name, got, base.Hash())
		}
	}
	if got := rules.Default().Hash(); got == base.Hash() {
		t.Errorf("the built-in rules hash like another set: %s", got)
	}
}

func TestHashChangesWithEveryField(t *testing.T) {
	base := mustParse(t, hashBase)
	baseRule, _ := base.Rule("login-ip")
	changes := map[string][2]string{
		"name":           {"name: login-ip\n", "name: login-ip2\n"},
		"flows":          {"flows: [login]\n    key: ip", "flows: [login, password_reset]\n    key: ip"},
		"limit":          {"limit: 30", "limit: 31"},
		"per":            {"per: 10m", "per: 11m"},
		"mode":           {"mode: shadow", "mode: enforce"},
		"action":         {"mode: shadow", "mode: shadow\n    action: block"},
		"burst":          {"mode: shadow", "mode: shadow\n    burst: 40"},
		"count":          {"mode: shadow", "mode: shadow\n    count: failures"},
		"on_store_error": {"mode: shadow", "mode: shadow\n    on_store_error: closed"},
		"ipv4_prefix":    {"mode: shadow", "mode: shadow\n    ipv4_prefix: 24"},
		"ipv6_prefix":    {"mode: shadow", "mode: shadow\n    ipv6_prefix: 48"},
	}
	for field, c := range changes {
		src := regexp.MustCompile(regexp.QuoteMeta(c[0])).ReplaceAllLiteralString(hashBase, c[1])
		if src == hashBase {
			t.Fatalf("%s: the change does not apply", field)
		}
		set := mustParse(t, src)
		if set.Hash() == base.Hash() {
			t.Errorf("%s changed, set Hash() stayed %s", field, base.Hash())
		}
		r := &set.Rules[1]
		if r.Hash() == baseRule.Hash() {
			t.Errorf("%s changed, rule Hash() stayed %s", field, baseRule.Hash())
		}
		if other := &set.Rules[0]; field != "name" && other.Hash() != base.Rules[0].Hash() {
			t.Errorf("%s of login-ip changed, login-account's Hash() changed too", field)
		}
	}
}

func TestRuleHashIgnoresLine(t *testing.T) {
	a := mustParse(t, hashBase)
	b := mustParse(t, "\n\n\n"+hashBase)
	ra, rb := &a.Rules[0], &b.Rules[0]
	if ra.Line == rb.Line {
		t.Fatal("the rules are on the same line")
	}
	if ra.Hash() != rb.Hash() {
		t.Errorf("Hash() differs with the line: %s, %s", ra.Hash(), rb.Hash())
	}
}

func TestSetHashCoversFamiliarNetworks(t *testing.T) {
	base := mustParse(t, hashBase)
	fam := "familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}\n"
	with := mustParse(t, fam+hashBase)
	if with.Hash() == base.Hash() {
		t.Errorf("familiar_networks added, set Hash() stayed %s", base.Hash())
	}
	for _, other := range []string{
		"familiar_networks: {ipv4_prefix: 16, ipv6_prefix: 48, hold: 90d}\n",
		"familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 56, hold: 90d}\n",
		"familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 30d}\n",
	} {
		if got := mustParse(t, other+hashBase).Hash(); got == with.Hash() {
			t.Errorf("%q hashes like %q: %s", other, fam, got)
		}
	}
	if got := mustParse(t, "familiar_networks: {hold: 2160h, ipv6_prefix: 48, ipv4_prefix: 24}\n"+hashBase).Hash(); got != with.Hash() {
		t.Errorf("familiar_networks respelled: Hash() = %s, want %s", got, with.Hash())
	}
	if got := with.InMode(rules.Shadow).Familiar; got != with.Familiar {
		t.Errorf("InMode: Familiar = %+v, want %+v", got, with.Familiar)
	}
}
