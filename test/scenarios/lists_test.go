package scenarios_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/server"
)

// listAdded is the answer to POST /v1/lists/deny and /v1/lists/allow.
type listAdded struct {
	ID        string  `json:"id"`
	ExpiresAt *string `json:"expires_at"`
	Error     *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// addList posts entry to /v1/lists/<list> and returns the status and
// answer.
func (g *guardian) addList(t *testing.T, list string, entry map[string]any) (int, listAdded) {
	t.Helper()
	var out listAdded
	code, _ := g.do(t, http.MethodPost, "/v1/lists/"+list, g.adminToken, entry, &out)
	return code, out
}

// metric returns the /metrics line that starts with series, "" for none.
func (g *guardian) metric(t *testing.T, series string) string {
	t.Helper()
	resp, err := g.client.Get(g.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, series+" ") {
			return line
		}
	}
	return ""
}

// An incident: a credential-stuffing run from one /24. A deny entry on the
// /24 blocks every check from it with deny-list, before any rule spends
// anything: once the entry is deleted, the /24's addresses, the accounts
// it tried and the /24's distinct-account count are exactly as if it had
// never tried: the network's first 21 failing accounts go ahead, the next
// is challenged, as from any fresh network.
func TestDenyListedNetworkSpendsNoBudget(t *testing.T) {
	g := start(t, "")
	code, entry := g.addList(t, "deny", map[string]any{"network": "198.51.100.0/24", "ttl": "1h", "reason": "stuffing"})
	if code != http.StatusCreated || entry.ID == "" || entry.ExpiresAt == nil || *entry.ExpiresAt != t0.Add(time.Hour).Format(time.RFC3339) {
		t.Fatalf("deny: %d %+v", code, entry)
	}
	const tries = 300
	for i := range tries {
		if i == tries/2 {
			g.clock.Advance(10 * time.Minute)
		}
		a := attempt{Flow: "login", Account: fmt.Sprintf("user%03d@example.com", i%100), IP: fmt.Sprintf("198.51.100.%d", i%250+1)}
		d := g.check(t, a)
		wantRetry := int64(time.Hour / time.Millisecond)
		if i >= tries/2 {
			wantRetry = int64(50 * time.Minute / time.Millisecond)
		}
		if d.status != http.StatusTooManyRequests || d.Decision != "block" || d.Rule != "deny-list" || d.RetryAfterMS != wantRetry || d.AttemptID != "" || len(d.Limits) != 0 {
			t.Fatalf("check %d from the denied /24: %v, want block by deny-list, retry %dms, no limits", i, d, wantRetry)
		}
	}
	if got := g.metric(t, `guardian_list_matches_total{list="deny",rule="deny-list"}`); !strings.HasSuffix(got, fmt.Sprintf(" %d", tries)) {
		t.Errorf("list matches: %q, want %d", got, tries)
	}
	// The accounts it tried: untouched, like one never seen.
	fresh := g.status(t, "never-seen@example.com")
	for i := range 100 {
		if st := g.status(t, fmt.Sprintf("user%03d@example.com", i)); fmt.Sprint(st) != fmt.Sprint(fresh) {
			t.Fatalf("user%03d after the denied checks: %+v, want %+v as for an account never seen", i, st, fresh)
		}
	}
	var deleted struct {
		Deleted bool `json:"deleted"`
	}
	if code, _ := g.do(t, http.MethodDelete, "/v1/lists/"+entry.ID, g.adminToken, nil, &deleted); code != http.StatusOK || !deleted.Deleted {
		t.Fatalf("delete: %d", code)
	}
	// The /24 afterwards, exactly as a fresh one: each address's first
	// failure leaves login-ip 29 of 30 and login-ip6-48 299 of 300, each
	// account's login-account 4 of 5; once 21 accounts failed from the
	// /24, the next is challenged.
	for i := range 22 {
		d := g.fail(t, attempt{Flow: "login", Account: fmt.Sprintf("user%03d@example.com", i), IP: fmt.Sprintf("198.51.100.%d", i+1)})
		want := "allow"
		if i == 21 {
			want = "challenge"
		}
		if d.Decision != want || d.remaining(t, "login-ip") != 29 || d.remaining(t, "login-ip6-48") != 299 || d.remaining(t, "login-account") != 4 {
			t.Fatalf("account %d after the delete: %v, want %s with login-ip 29, login-ip6-48 299, login-account 4", i, d, want)
		}
		if want == "challenge" && d.Rule != "login-ip-distinct-accounts" {
			t.Fatalf("account %d after the delete: %v, want the challenge by login-ip-distinct-accounts", i, d)
		}
	}
}

// A deny entry on an account blocks its checks from everywhere, for the
// entry's remaining time, and its owner's trusted device too: an incident
// call, lifted by deleting it.
func TestDenyListedAccount(t *testing.T) {
	g := start(t, "")
	const victim = "victim@example.com"
	device := g.login(t, attempt{Flow: "login", Account: victim, IP: "192.0.2.1"})
	if code, _ := g.addList(t, "deny", map[string]any{"account": "Victim@Example.com", "ttl": "30m", "reason": "takeover"}); code != http.StatusCreated {
		t.Fatalf("deny: %d", code)
	}
	for _, a := range []attempt{
		{Flow: "login", Account: victim, IP: "203.0.113.5"},
		{Flow: "login", Account: victim, IP: "192.0.2.1", DeviceToken: device},
		{Flow: "password_reset", Account: victim, IP: "192.0.2.1"},
	} {
		if d := g.check(t, a); d.Decision != "block" || d.Rule != "deny-list" || d.RetryAfterMS != int64(30*time.Minute/time.Millisecond) {
			t.Errorf("check %+v: %v, want block by deny-list for 30m", a, d)
		}
	}
	if d := g.check(t, attempt{Flow: "login", Account: "other@example.com", IP: "203.0.113.5"}); d.Decision != "allow" {
		t.Errorf("another account: %v, want allow", d)
	}
	var lists struct {
		Deny []map[string]any `json:"deny"`
	}
	g.do(t, http.MethodGet, "/v1/lists", g.adminToken, nil, &lists)
	if len(lists.Deny) != 1 || !strings.HasPrefix(fmt.Sprint(lists.Deny[0]["account"]), "h-") || lists.Deny[0]["subject"] != "scenario" {
		t.Errorf("GET /v1/lists: %+v, want the account as its pseudonym and the token's subject", lists.Deny)
	}
	g.clock.Advance(30 * time.Minute)
	if d := g.check(t, attempt{Flow: "login", Account: victim, IP: "203.0.113.5"}); d.Decision != "allow" {
		t.Errorf("after the entry's ttl: %v, want allow", d)
	}
}

// An office NAT on a Monday morning after a password change: 30
// colleagues behind one /24 each mistype, then log in. From an ordinary
// /24, once 21 of them failed, the others are challenged by
// login-ip-distinct-accounts; from the office, allow-listed and exempt from
// that rule, none of them is, while each colleague's own account limit
// counts the mistype as anywhere.
func TestAllowListedOfficeIsNotChallenged(t *testing.T) {
	g := start(t, "")
	if code, _ := g.addList(t, "allow", map[string]any{"network": "203.0.113.0/24", "exempt": []string{"login-ip-distinct-accounts"}, "reason": "head office"}); code != http.StatusCreated {
		t.Fatalf("allow: %d", code)
	}
	office := func(prefix string) (challenged int) {
		t.Helper()
		colleague := func(i int) attempt {
			return attempt{Flow: "login", Account: fmt.Sprintf("colleague%02d@%s.example", i, strings.ReplaceAll(prefix, ".", "-")), IP: fmt.Sprintf("%s.%d", prefix, i+1)}
		}
		for i := range 30 {
			d := g.fail(t, colleague(i))
			if d.Decision == "challenge" && d.Rule == "login-ip-distinct-accounts" {
				challenged++
			} else if d.Decision != "allow" || d.remaining(t, "login-account") != 4 {
				t.Fatalf("colleague %d's mistype from %s: %v, want allow with login-account 4", i, prefix, d)
			}
		}
		for i := range 30 {
			d := g.check(t, colleague(i))
			if d.Decision == "challenge" && d.Rule == "login-ip-distinct-accounts" {
				challenged++
			} else if d.Decision != "allow" {
				t.Fatalf("colleague %d's login from %s: %v", i, prefix, d)
			}
			g.report(t, d, "success")
		}
		return challenged
	}
	if got := office("192.0.2"); got < 30-21 {
		t.Fatalf("30 colleagues failing from an ordinary /24: %d checks challenged, want at least %d; the allow list would prove nothing", got, 30-21)
	}
	if got := office("203.0.113"); got != 0 {
		t.Errorf("30 colleagues from the allow-listed office: %d checks challenged, want 0", got)
	}
	if got := g.metric(t, `guardian_list_matches_total{list="allow",rule="login-ip-distinct-accounts"}`); !strings.HasSuffix(got, " 60") {
		t.Errorf("list matches: %q, want 60", got)
	}
}

// An allow list never lifts an account's limits: exempting an account rule,
// the hard stop, a recipient or a secret rule is refused, by the API and in
// the rules file, and so is an unknown rule.
func TestAllowListRefusesAccountRules(t *testing.T) {
	g := start(t, "")
	for _, rule := range []string{"login-account", "login-hard-stop", "otp-send-recipient", "login-secret-spray", "no-such-rule"} {
		code, out := g.addList(t, "allow", map[string]any{"network": "203.0.113.0/24", "exempt": []string{"login-ip", rule}})
		if code != http.StatusBadRequest || out.Error == nil || out.Error.Code != "invalid_field" || !strings.Contains(out.Error.Message, rule) {
			t.Errorf("exempt %s: %d %+v, want 400 invalid_field naming it", rule, code, out.Error)
		}
	}
	var lists struct {
		Deny, Allow []any
	}
	g.do(t, http.MethodGet, "/v1/lists", g.adminToken, nil, &lists)
	if len(lists.Deny)+len(lists.Allow) != 0 {
		t.Errorf("entries after the refusals: %+v", lists)
	}
	path := filepath.Join(t.TempDir(), "rules.yaml")
	file := builtinRules(t) + "\nlists:\n  allow:\n    - {network: 203.0.113.0/24, exempt: [login-hard-stop]}\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	line := strings.Count(file, "\n")
	_, err := server.New(server.Config{Addr: "127.0.0.1:0", SigningKey: signingKey, RulesPath: path})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("rules.yaml:%d: lists: allow: exempt: rule login-hard-stop", line)) {
		t.Errorf("a rules file exempting the hard stop: %v, want it refused at line %d", err, line)
	}
}

// A rules file's lists apply from the start, show in GET /v1/lists with
// their source, and cannot be deleted through the API.
func TestStaticLists(t *testing.T) {
	g := start(t, builtinRules(t)+`
lists:
  allow:
    - {network: 203.0.113.0/24, exempt: [login-ip], reason: office NAT}
  deny:
    - {network: 198.51.100.0/24, reason: known botnet}
`)
	if d := g.check(t, attempt{Flow: "login", Account: "a@example.com", IP: "198.51.100.9"}); d.Decision != "block" || d.Rule != "deny-list" || d.RetryAfterMS != int64(24*time.Hour/time.Millisecond) {
		t.Errorf("check from the static deny: %v, want block by deny-list for 24h", d)
	}
	d := g.check(t, attempt{Flow: "login", Account: "a@example.com", IP: "203.0.113.9"})
	for _, l := range d.Limits {
		if l.Rule == "login-ip" {
			t.Errorf("check from the static allow counted on login-ip: %v", d)
		}
	}
	var lists struct {
		Deny, Allow []map[string]any
	}
	g.do(t, http.MethodGet, "/v1/lists", g.adminToken, nil, &lists)
	if len(lists.Deny) != 1 || lists.Deny[0]["id"] != "rules-deny-1" || !strings.HasSuffix(fmt.Sprint(lists.Deny[0]["source"]), "rules.yaml") || lists.Deny[0]["expires_at"] != nil ||
		len(lists.Allow) != 1 || lists.Allow[0]["reason"] != "office NAT" {
		t.Errorf("GET /v1/lists: %+v", lists)
	}
	var e apiError
	if code, _ := g.do(t, http.MethodDelete, "/v1/lists/rules-deny-1", g.adminToken, nil, &e); code != http.StatusConflict || e.Error.Code != "static_entry" {
		t.Errorf("delete of a static entry: %d %+v, want 409 static_entry", code, e)
	}
}
