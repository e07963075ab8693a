package server_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/server"
)

// burstTwo limits login per account and otp_send per recipient to 2 back to
// back, then one an hour: the third check of one identity is slowed.
const burstTwo = `version: 1
rules:
  - name: per-account
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1h
    burst: 2
  - name: per-recipient
    flows: [otp_send]
    key: recipient
    type: rate
    limit: 1
    per: 1h
    burst: 2
`

// forms checks a, b, then a again, each from its own address, and returns
// the three decisions with the rule of the last.
func forms(t *testing.T, in *instance, field, flow, a, b string) (string, string, string, string) {
	t.Helper()
	var d [3]response
	for i, v := range []string{a, b, a} {
		d[i] = in.check(t, map[string]any{"flow": flow, field: v, "ip": fmt.Sprintf("198.51.100.%d", i+1)})
		if d[i].status != http.StatusOK && d[i].status != http.StatusTooManyRequests {
			t.Fatalf("%s %+q: status %d %s", field, v, d[i].status, d[i].raw)
		}
	}
	return str(d[0].body["decision"]), str(d[1].body["decision"]), str(d[2].body["decision"]), str(d[2].body["rule"])
}

// oneBucket asserts that every pair of forms shares one bucket of burst 2.
func oneBucket(t *testing.T, in *instance, field, flow, rule string, pairs [][2]string) {
	t.Helper()
	for _, p := range pairs {
		a, b, c, r := forms(t, in, field, flow, p[0], p[1])
		if a != "allow" || b != "allow" || c != "slow" || r != rule {
			t.Errorf("%+q then %+q then the first again: %s, %s, %s by %q; want allow, allow, slow by %s (one bucket)", p[0], p[1], a, b, c, r, rule)
		}
	}
}

// twoBuckets asserts that the forms of every pair keep buckets of their own.
func twoBuckets(t *testing.T, in *instance, field, flow string, pairs [][2]string) {
	t.Helper()
	for _, p := range pairs {
		if a, b, c, _ := forms(t, in, field, flow, p[0], p[1]); a != "allow" || b != "allow" || c != "allow" {
			t.Errorf("%+q then %+q then the first again: %s, %s, %s; want allow three times (two buckets)", p[0], p[1], a, b, c)
		}
	}
}

// normalizer returns a Normalizer with o.
func normalizer(t *testing.T, o keys.Options) *keys.Normalizer {
	t.Helper()
	n, err := keys.NewNormalizer(o)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAccountVariantsShareOneBucket(t *testing.T) {
	in := start(t, burstTwo)
	var pairs [][2]string
	for i, invisible := range []string{"\u200b", "\u200d", "\u200c", "\u00ad", "\u2060", "\ufeff", "\ufe0f", "\u200e"} {
		base := fmt.Sprintf("alice%d@example.com", i)
		pairs = append(pairs, [2]string{base, base[:3] + invisible + base[3:]})
	}
	pairs = append(pairs,
		[2]string{"bob@example.com", "ＢＯＢ@ＥＸＡＭＰＬＥ.ＣＯＭ"},
		[2]string{"Straße", "STRASSE"},
		[2]string{"ame\u0301lie", "AMÉLIE"},
	)
	oneBucket(t, in, "account", "login", "per-account", pairs)
	twoBuckets(t, in, "account", "login", [][2]string{
		{"carol", "сarol"}, // Cyrillic с: a confusable, deliberately not merged
		{"zoë", "zoe"},     // accents count unless --account-fold accents
		{"dave", "dave."},
	})

	folded := startConfig(t, burstTwo, server.Config{Normalizer: normalizer(t, keys.Options{FoldAccents: true})})
	oneBucket(t, folded, "account", "login", "per-account", [][2]string{{"zoë", "zoe"}, {"José", "JOSE\u200b"}, {"Ñandú", "nandu"}})
	twoBuckets(t, folded, "account", "login", [][2]string{{"søren", "soren"}, {"erin", "еrin"}})
}

func TestRecipientVariantsShareOneBucket(t *testing.T) {
	gb := startConfig(t, burstTwo, server.Config{Normalizer: normalizer(t, keys.Options{DefaultRegion: "GB"})})
	oneBucket(t, gb, "recipient", "otp_send", "per-recipient", [][2]string{
		{"+44 20 7946 0100", "0044 20 7946 0100"},
		{"+44 20 7946 0101", "+44 (0)20 7946 0101"},
		{"+44 20 7946 0102", "020 7946 0102"},
		{"0044 20 7946 0103", "(020) 7946-0103"},
		{"+1 555 010 0104", "001 555 010 0104"},
	})
	twoBuckets(t, gb, "recipient", "otp_send", [][2]string{{"+44 20 7946 0110", "+44 20 7946 0111"}, {"+44 20 7946 0112", "+1 555 010 0112"}})

	plain := start(t, burstTwo)
	oneBucket(t, plain, "recipient", "otp_send", "per-recipient", [][2]string{
		{"+44 20 7946 0200", "+44 (0)20 7946 0200"},
		{"+44 20 7946 0201", "0044 20 7946 0201"},
		{"+1 (555) 010-0202", "1.555.010.0202"},
		{"bob@example.com", "bob@example.com."},
		{"carol@example.com", "carol@ｅｘａｍｐｌｅ.com"},
		{"dave@example.com", "Dave+otp@Example.COM"},
		{"erin@exämple.de", "erin@xn--exmple-cua.de"},
	})
	// Without --default-region, 020 7946 0203 could be anywhere.
	twoBuckets(t, plain, "recipient", "otp_send", [][2]string{
		{"+44 20 7946 0203", "020 7946 0203"},
		{"frank@example.com", "frank@example.org"},
		{"grace@example.com", "gr.ace@example.com"},
	})

	for _, tt := range []struct {
		in   *instance
		body string
		want string
	}{
		{plain, "+999 1234 5678", "recipient: not a possible phone number"},
		{plain, "+1 555 0100", "recipient: not a possible phone number"},
		{gb, "7946 0958", "recipient: not a possible phone number"},
		{gb, "1 555 010 0000", "recipient: not a possible phone number"},
		{plain, "+1555CALLNOW", "recipient: not a phone number (8 to 15 digits) or an e-mail address"},
	} {
		r := tt.in.check(t, map[string]any{"flow": "otp_send", "recipient": tt.body, "ip": "192.0.2.9"})
		if code := errorCode(t, r); r.status != http.StatusBadRequest || code != "invalid_recipient" || r.body["error"].(map[string]any)["message"] != tt.want {
			t.Errorf("%q: %d %s, want 400 invalid_recipient %q", tt.body, r.status, r.raw, tt.want)
		}
	}
}

func TestStrictJSON(t *testing.T) {
	in := start(t, burstTwo)
	for _, tt := range []struct {
		name, path, body, code string
	}{
		{"duplicated field", "/v1/check", `{"flow":"login","ip":"192.0.2.1","account":"x","account":"y"}`, "invalid_json"},
		{"duplicated field, escaped", "/v1/check", `{"flow":"login","ip":"192.0.2.1","flow":"otp_send","fl\u006fw":"login"}`, "invalid_json"},
		{"name differing by case", "/v1/check", `{"FLOW":"login","ip":"192.0.2.1"}`, "unknown_field"},
		{"name differing by case beside the real one", "/v1/check", `{"flow":"login","ip":"192.0.2.1","Account":"x"}`, "unknown_field"},
		{"Kelvin sign in a name", "/v1/check", "{\"flow\":\"login\",\"ip\":\"192.0.2.1\",\"device_to\u212aen\":\"x\"}", "unknown_field"},
		{"invalid UTF-8", "/v1/check", "{\"flow\":\"login\",\"ip\":\"192.0.2.1\",\"account\":\"al\xffice\"}", "invalid_json"},
		{"half a surrogate pair", "/v1/check", `{"flow":"login","ip":"192.0.2.1","account":"al\ud800ice"}`, "invalid_json"},
		{"report duplicated outcome", "/v1/report", `{"attempt_id":"x","outcome":"failure","outcome":"success"}`, "invalid_json"},
		{"report name differing by case", "/v1/report", `{"attempt_id":"x","Outcome":"success"}`, "unknown_field"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := in.do(t, http.MethodPost, tt.path, in.checkToken, tt.body)
			if got := errorCode(t, r); r.status != http.StatusBadRequest || got != tt.code {
				t.Errorf("status %d, code %q (%s), want 400 %s", r.status, got, r.raw, tt.code)
			}
		})
	}
	// Nothing was counted, and a valid check still works.
	for i := range 2 {
		r := in.check(t, map[string]any{"flow": "login", "account": "x", "ip": "192.0.2.1"})
		if r.status != http.StatusOK || str(r.body["decision"]) != "allow" || num(limit(t, r, "per-account")["remaining"]) != int64(1-i) {
			t.Fatalf("valid check %d after the refused ones: %d %s, want allow with %d left", i, r.status, r.raw, 1-i)
		}
	}
}

func TestBearerSchemeInAnyCase(t *testing.T) {
	in := start(t, "")
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		req, err := http.NewRequest(http.MethodPost, in.base+"/v1/check", strings.NewReader(`{"flow":"login","ip":"192.0.2.1"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", scheme+" "+in.checkToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("scheme %q: status %d, want 200", scheme, resp.StatusCode)
		}
	}
}

func TestCostAboveBurst(t *testing.T) {
	in := start(t, burstTwo+`  - name: tight-shadow
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 1
    mode: shadow
`)
	r := in.check(t, map[string]any{"flow": "login", "account": "heidi", "ip": "192.0.2.1", "cost": 3})
	want := "cost: 3 is more than the burst of rule per-account (2), so no wait would let it through"
	if errorCode(t, r) != "invalid_field" || r.status != http.StatusBadRequest || r.body["error"].(map[string]any)["message"] != want {
		t.Fatalf("cost 3 against burst 2: %d %s, want 400 invalid_field %q", r.status, r.raw, want)
	}
	// Without an account the rule does not apply, and a shadow rule with a
	// smaller burst never refuses a check.
	if r := in.check(t, map[string]any{"flow": "login", "ip": "192.0.2.1", "cost": 3}); r.status != http.StatusOK {
		t.Fatalf("cost 3 without an account: %d %s, want 200", r.status, r.raw)
	}
	if r := in.check(t, map[string]any{"flow": "login", "account": "heidi", "ip": "192.0.2.2", "cost": 2}); str(r.body["decision"]) != "allow" || num(limit(t, r, "per-account")["remaining"]) != 0 {
		t.Fatalf("cost 2 against burst 2: %s, want allow with 0 left", r.raw)
	}
}

func TestThirtyTwoRefundingRulesFitOneAttempt(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\nrules:\n")
	for i := range 32 {
		fmt.Fprintf(&b, "  - {name: r%d, flows: [login], key: account, type: rate, count: failures, limit: 1, per: 1h, burst: 3}\n", i)
	}
	in := start(t, b.String())
	r := in.check(t, map[string]any{"flow": "login", "account": "ivan", "ip": "192.0.2.1"})
	if r.status != http.StatusOK || len(r.body["limits"].([]any)) != 32 {
		t.Fatalf("check under 32 rules: %d %s", r.status, r.raw)
	}
	if rep := in.report(t, str(r.body["attempt_id"]), "success"); rep.status != http.StatusOK {
		t.Fatalf("success report of a check under 32 rules: %d %s, want 200", rep.status, rep.raw)
	}
	r = in.check(t, map[string]any{"flow": "login", "account": "ivan", "ip": "192.0.2.1"})
	if got := num(limit(t, r, "r31")["remaining"]); got != 2 {
		t.Fatalf("after a success: r31 remaining %d, want 2 (the reservation given back)", got)
	}
}

// rulesHash is the hash guardian shows for a rules file.
func rulesHash(t *testing.T, yaml string) string {
	t.Helper()
	set, err := rules.Parse("rules.yaml", []byte(yaml), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return set.Hash()
}

func TestReloadShowsRuleCountAndHash(t *testing.T) {
	logs := &logBuffer{}
	in := startConfig(t, burstTwo, server.Config{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	metricsHave := func(hash, gone string, enforced int) {
		t.Helper()
		for prefix, want := range map[string]float64{
			`guardian_rules_info{hash="` + hash + `"}`: 1,
			`guardian_rules_info{hash="` + gone + `"}`: -1, // no such series
			`guardian_rules{mode="enforce"}`:           float64(enforced),
			`guardian_rules{mode="shadow"}`:            0,
		} {
			if got := metric(t, in, prefix); got != want {
				t.Errorf("%s = %v, want %v", prefix, got, want)
			}
		}
	}
	full := rulesHash(t, burstTwo)
	cut := burstTwo[:strings.Index(burstTwo, "  - name: per-recipient")]
	short := rulesHash(t, cut)
	metricsHave(full, short, 2)

	// A file cut short but still valid: one rule fewer, and another hash,
	// in the log line, the metrics and GET /v1/rules.
	writeFile(t, in.rulesPath, cut)
	r := in.do(t, http.MethodPost, "/v1/rules/reload", in.adminToken, nil)
	if r.status != http.StatusOK || r.body["hash"] != short || len(r.body["rules"].([]any)) != 1 {
		t.Fatalf("reload: %d %s, want 200 with hash %s and one rule", r.status, r.raw, short)
	}
	reloaded := logs.lines(t, "msg", "rules reloaded")
	if len(reloaded) != 1 || reloaded[0]["hash"] != short || reloaded[0]["rule_count"] != float64(1) {
		t.Errorf("reload log lines %v, want one with hash %s and rule_count 1", reloaded, short)
	}
	metricsHave(short, full, 1)
	if g := in.do(t, http.MethodGet, "/v1/rules", in.adminToken, nil); g.body["hash"] != short {
		t.Errorf("GET /v1/rules hash %v, want %s", g.body["hash"], short)
	}
}
