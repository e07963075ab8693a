package server_test

import (
	"net/http"
	"strings"
	"testing"
)

const staticListRules = `version: 1
rules:
  - {name: login-ip, flows: [login], key: ip, type: rate, count: failures, limit: 30, per: 10m}
lists:
  deny:
    - {network: 198.51.100.0/24, reason: botnet}
`

// TestStaticListsReload: a rules file's lists are replaced by those of the
// file a reload reads, and an invalid one keeps them; the API's entries
// stay whatever the reload.
func TestStaticListsReload(t *testing.T) {
	in := start(t, staticListRules)
	botnet := map[string]any{"flow": "login", "account": "a", "ip": "198.51.100.4"}
	scanner := map[string]any{"flow": "login", "account": "a", "ip": "192.0.2.66"}
	denied := func(body any) bool {
		t.Helper()
		r := in.check(t, body)
		return r.status == http.StatusTooManyRequests && str(r.body["rule"]) == "deny-list"
	}
	if !denied(botnet) || denied(scanner) {
		t.Fatal("the rules file's deny entry at start")
	}
	api := in.do(t, http.MethodPost, "/v1/lists/deny", in.adminToken, map[string]any{"network": "203.0.113.0/24", "ttl": "1h"})
	if api.status != http.StatusCreated {
		t.Fatalf("deny: %d %s", api.status, api.raw)
	}
	writeFile(t, in.rulesPath, strings.Replace(staticListRules, "198.51.100.0/24, reason: botnet", "192.0.2.66, reason: scanner", 1))
	if _, err := in.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if denied(botnet) || !denied(scanner) {
		t.Error("after the reload, the old file's entry applies or the new one's does not")
	}
	office := map[string]any{"flow": "login", "account": "a", "ip": "203.0.113.1"}
	if !denied(office) {
		t.Error("the reload dropped the API's entry")
	}
	writeFile(t, in.rulesPath, strings.Replace(staticListRules, "{network: 198.51.100.0/24, reason: botnet}", "{network: 192.0.2.66, exempt: [login-ip]}", 1))
	if _, err := in.srv.Reload(); err == nil {
		t.Fatal("a deny entry with exempt reloaded")
	}
	if !denied(scanner) {
		t.Error("a refused reload dropped the entries in force")
	}
	r := in.do(t, http.MethodGet, "/v1/lists", in.adminToken, nil)
	if !strings.Contains(string(r.raw), `"network":"192.0.2.66/32"`) || !strings.Contains(string(r.raw), `"source":"`+in.rulesPath+`"`) || !strings.Contains(string(r.raw), `"network":"203.0.113.0/24"`) {
		t.Errorf("GET /v1/lists: %s", r.raw)
	}
}
