package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/guardian-sec/guardian/internal/redistest"
)

// consoleRules have a hard stop that three failures reach, a shadow rule
// that every check from one address after the first trips, and familiar
// networks, where an account counts its failures apart.
const consoleRules = `version: 1
familiar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 5
  - name: login-hard-stop
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 3
    action: block
  - name: login-ip-strict
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 1h
    burst: 1
    action: block
    mode: shadow
`

// browserLog is what a page did that the test judges: its console errors
// and every URL it requested.
type browserLog struct {
	mu       sync.Mutex
	errors   []string
	requests []string
}

func (b *browserLog) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
			var args []string
			for _, a := range ev.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			b.errors = append(b.errors, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
		}
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			text += " " + d.Exception.Description
		}
		b.errors = append(b.errors, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, text))
	case *log.EventEntryAdded:
		if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
			b.errors = append(b.errors, fmt.Sprintf("%s %s: %s %s", ev.Entry.Source, ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
		}
	case *network.EventRequestWillBeSent:
		b.requests = append(b.requests, ev.Request.URL)
	}
}

func (b *browserLog) snapshot() (errors, requests []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...), append([]string(nil), b.requests...)
}

// chromium returns the browser the console test drives: Debian's chromium,
// which .ci/run installs.
func chromium(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a browser against guardian on Redis; run without -short (make test)")
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: apt-get install chromium (.ci/run installs it)")
	return ""
}

// artefactDir is where the console test leaves its screenshot:
// $GUARDIAN_TEST_ARTEFACTS when set, a temporary directory otherwise.
func artefactDir(t *testing.T) string {
	if d := os.Getenv("GUARDIAN_TEST_ARTEFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestConsoleInABrowser drives the operator console in headless Chromium
// against two guardian instances sharing one Redis: the page asks for a
// token, shows both instances, a shadow rule's trips summed over the fleet
// and a hard-stopped account, and resets it only after a confirmation. The
// token stays out of every URL, cookie and the page's HTML, the page
// requests nothing from another origin and logs no error.
func TestConsoleInABrowser(t *testing.T) {
	browser := chromium(t)
	redis := redistest.Start(t)
	fleet := startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: consoleRules})

	// The victim's success from 192.0.2.10 makes 192.0.2.0/24 familiar to
	// it; two failures from other addresses there count on that network
	// alone (each address's first check, which the shadow rule lets by).
	owner := fleet[0].check(t, map[string]any{"flow": "login", "account": "victim@example.com", "ip": "192.0.2.10"})
	fleet[0].report(t, owner.str("attempt_id"), "success")
	for i, ip := range []string{"192.0.2.20", "192.0.2.21"} {
		a := fleet[i%2].check(t, map[string]any{"flow": "login", "account": "victim@example.com", "ip": ip})
		if decision(t, a) != "allow" || a.str("trust") != "network" {
			t.Fatalf("check from the familiar network: %v, want allow in its bucket", a.body)
		}
		fleet[i%2].report(t, a.str("attempt_id"), "failure")
	}

	// Three failures of one account, alternating instances, reach its hard
	// stop; two more accounts from the same address. The shadow rule lets
	// the first of the five checks through and would block the other four,
	// two on each instance.
	const ip = "203.0.113.9"
	for i, account := range []string{"victim@example.com", "victim@example.com", "victim@example.com", "a1@example.com", "a2@example.com"} {
		a := fleet[i%2].check(t, map[string]any{"flow": "login", "account": account, "ip": ip})
		if decision(t, a) != "allow" {
			t.Fatalf("check %d: %v, want allow", i, a.body)
		}
		fleet[i%2].report(t, a.str("attempt_id"), "failure")
	}
	if st := fleet[1].must(t, "POST", "/v1/accounts/status", adminToken, map[string]any{"account": "victim@example.com"}); st.body["blocked"] != true {
		t.Fatalf("status before the console: %v, want blocked", st.body)
	}
	// One check at the hard stop: an enforced block, on the other instance
	// than the one the console asks.
	if a := fleet[1].check(t, map[string]any{"flow": "login", "account": "victim@example.com", "ip": "198.51.100.1"}); a.status != 429 || a.str("decision") != "block" {
		t.Fatalf("check at the hard stop: %d %s, want 429 block", a.status, a.raw)
	}
	victim := fleet[0].must(t, "POST", "/v1/pseudonyms", adminToken, map[string]any{"account": "victim@example.com"}).str("pseudonym")
	network := fleet[0].must(t, "POST", "/v1/pseudonyms", adminToken, map[string]any{"network": ip}).str("pseudonym")
	familiar := fleet[0].must(t, "POST", "/v1/pseudonyms", adminToken, map[string]any{"network": "192.0.2.0/24"}).str("pseudonym")
	listsAnswer := fleet[0].must(t, "GET", "/v1/lists", adminToken, nil).status

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1280, 1500))...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	var seen browserLog
	if err := chromedp.Listen(tab, seen.listen); err != nil {
		t.Fatalf("start chromium: %v", err)
	}

	base := fleet[0].base
	page := base + "/console"
	wait := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(tab, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			errs, _ := seen.snapshot()
			t.Fatalf("%s: %v (page errors %q)", what, err, errs)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		s, err := chromedp.Run(tab, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return s
	}

	// The page asks for a token and shows nothing else until it has one.
	if err := chromedp.Do(tab, chromedp.Navigate(page), chromedp.WaitVisible("#token")); err != nil {
		t.Fatal(err)
	}
	if eval(`String(document.getElementById("main").hidden)`) != "true" {
		t.Fatal("the console shows the admin view before it has a token")
	}
	if err := chromedp.Do(tab, chromedp.SendKeys("#token", adminToken), chromedp.Click(`#token-form button`)); err != nil {
		t.Fatal(err)
	}
	wait("the admin view", `!document.getElementById("main").hidden`)

	// Two instances, one store, consistent rules.
	wait("two instances in the fleet", `document.querySelectorAll("#fleet tbody tr").length === 2`)
	wait("both instances' store ok", `document.getElementById("n-degraded").textContent === "0 of 2"`)
	wait("rules consistent", `document.getElementById("n-consistent").textContent === "yes"`)
	// The rules with what each bounds in its own window: 5 + 1440 a day per
	// account, 3 failures in a row, and the shadow rule's 1 + 24 a day
	// once promoted.
	for _, b := range []struct{ rule, bound string }{
		{"login-account", "1,445 a day"}, {"login-hard-stop", "3 in a row"}, {"login-ip-strict", "25 a day"},
	} {
		wait("the bound of "+b.rule, fmt.Sprintf(`[...document.querySelectorAll("#rules tbody tr")].some(r => r.textContent.includes(%q) && r.textContent.includes(%q))`, b.rule, b.bound))
	}
	wait("the shadow rule marked so", `[...document.querySelectorAll("#rules tbody tr")].some(r => r.textContent.includes("login-ip-strict") && r.textContent.includes("shadow, deciding nothing until promoted"))`)

	// The shadow rule's trips, from both instances.
	// Every instance sums the fleet's within 5 s.
	for deadline := time.Now().Add(7 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		shadow := fleet[1].must(t, "GET", "/v1/shadow", adminToken, nil)
		got := shadowCount(t, shadow.raw, "login-ip-strict")
		if got == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /v1/shadow on the second instance: login-ip-strict would_block %d, want 4 (the fleet's): %s", got, shadow.raw)
		}
	}
	wait("the shadow rule's fleet-wide trips", `(document.querySelector('#shadow tr[data-rule="login-ip-strict"] .would-block') || {}).textContent === "4"`)
	wait("its top key, the address's pseudonym", fmt.Sprintf(`document.querySelector('#shadow tr[data-rule="login-ip-strict"]').textContent.includes(%q)`, network+" 4"))

	// The incident view: the block by the hard stop, seen on the other
	// instance, its key and the hard stop named by the account's pseudonym.
	wait("the fleet-wide incident view", `document.getElementById("incident-scope").textContent === "fleet-wide, 2 instances"`)
	wait("the enforced block", `(document.querySelector('#decisions tr[data-rule="login-hard-stop"][data-decision="block"] .total') || {}).textContent === "1"`)
	wait("the hard stop's top key", fmt.Sprintf(`(document.querySelector('#top-keys tr[data-rule="login-hard-stop"]') || {textContent: ""}).textContent.includes(%q)`, victim+" 1"))
	wait("the hard stop", fmt.Sprintf(`(document.querySelector('#hard-stops tr[data-account=%q]') || {textContent: ""}).textContent.includes("blocked")`, victim))
	wait("one hard stop in force", `document.getElementById("n-stops").textContent === "1"`)
	wait("no global challenge", `document.getElementById("n-global").textContent === "off"`)
	if listsAnswer == 404 {
		wait("lists not available", `!document.getElementById("lists-unavailable").hidden`)
	} else {
		wait("the lists", `!document.getElementById("lists").hidden`)
	}
	// Two more trips show as a bar of the chart once the page's next poll
	// sees them.
	for _, account := range []string{"a3@example.com", "a4@example.com"} {
		fleet[1].check(t, map[string]any{"flow": "login", "account": account, "ip": ip})
	}
	wait("the new trips", `document.querySelector('#shadow tr[data-rule="login-ip-strict"] .would-block').textContent === "6"`)
	wait("a bar of trips in the chart", `[...document.querySelectorAll("#chart rect.bar")].some(r => +r.getAttribute("height") > 0)`)

	// The account's status.
	if err := chromedp.Do(tab, chromedp.SendKeys("#account", "victim@example.com"), chromedp.Click(`#account-form button`)); err != nil {
		t.Fatal(err)
	}
	wait("the account's hard stop", `(document.querySelector('[data-fact="hard stop"]') || {}).textContent === "BLOCKED until reset"`)
	wait("its consecutive failures", `document.querySelector('[data-fact="consecutive failures"]').textContent === "3"`)
	wait("its limits", `document.querySelectorAll("#account-limits tbody tr").length === 2`)
	wait("its pseudonym", fmt.Sprintf(`document.querySelector('[data-fact="pseudonym"]').textContent === %q`, victim))
	// Its familiar network, by pseudonym, with the two failures made there
	// and no hard stop: the account's block is that of other networks.
	wait("its familiar network", fmt.Sprintf(`document.querySelectorAll("#account-networks tbody tr").length === 1 && !!document.querySelector('#account-networks tr[data-network=%q]')`, familiar))
	if got := eval(fmt.Sprintf(`[...document.querySelector('#account-networks tr[data-network=%q]').cells].map(c => c.textContent).join("|")`, familiar)); got != familiar+"|2|no" {
		t.Errorf("the familiar network's row: %q, want %q", got, familiar+"|2|no")
	}
	if eval(`String(document.getElementById("account-networks-empty").hidden)`) != "true" {
		t.Error("the console says the account has no familiar network")
	}

	// Asking for the reset only asks: the account stays blocked until the
	// operator confirms.
	if err := chromedp.Do(tab, chromedp.Click("#reset"), chromedp.WaitVisible("#confirm")); err != nil {
		t.Fatal(err)
	}
	if got := eval(`document.getElementById("confirm-account").textContent`); got != "victim@example.com" {
		t.Fatalf("the confirmation names %q", got)
	}
	screenshot(t, tab, "console.png")
	if st := fleet[1].must(t, "POST", "/v1/accounts/status", adminToken, map[string]any{"account": "victim@example.com"}); st.body["blocked"] != true {
		t.Fatalf("the account was reset before the confirmation: %v", st.body)
	}
	if err := chromedp.Do(tab, chromedp.Click("#confirm-yes")); err != nil {
		t.Fatal(err)
	}
	wait("the reset done", `document.getElementById("reset-done").textContent === "Reset done."`)
	wait("the hard stop gone on the page", `document.querySelector('[data-fact="hard stop"]').textContent === "no"`)
	wait("its familiar networks forgotten by the reset", `document.querySelectorAll("#account-networks tbody tr").length === 0 && !document.getElementById("account-networks-empty").hidden`)
	if st := fleet[1].must(t, "POST", "/v1/accounts/status", adminToken, map[string]any{"account": "victim@example.com"}); st.body["blocked"] != false || st.body["consecutive_failures"] != 0.0 {
		t.Fatalf("status after the console's reset: %v, want not blocked, no failures", st.body)
	}
	wait("the hard stop reset in the incident view", fmt.Sprintf(`(document.querySelector('#hard-stops tr[data-account=%q]') || {textContent: ""}).textContent.includes("reset")`, victim))

	// The outage: with Redis paused the page says the fleet view is
	// unavailable and shows this instance alone, never "rules consistent".
	redis.Pause(t)
	wait("the outage banner", `!document.getElementById("outage").hidden`)
	wait("no claim of consistent rules", `document.getElementById("n-consistent").textContent === "unknown"`)
	wait("the instances unavailable", `document.getElementById("n-instances").textContent === "unavailable"`)
	wait("the shadow trips of this instance", `document.getElementById("trips-scope").textContent.endsWith("(this instance)")`)
	wait("the incident view of this instance alone", `document.getElementById("incident-scope").textContent.startsWith("this instance alone") && document.querySelectorAll("#incident-instances tbody tr").length === 1`)
	screenshot(t, tab, "console-outage.png")
	redis.Unpause(t)
	wait("the fleet view back", `document.getElementById("outage").hidden && document.getElementById("n-consistent").textContent === "yes"`)

	// The token: in the tab's sessionStorage, nowhere else.
	if eval(`Object.values(sessionStorage).join(" ")`) != adminToken {
		t.Error("the token is not in the tab's sessionStorage")
	}
	for what, expr := range map[string]string{
		"the page's URL":    `location.href`,
		"a cookie":          `document.cookie`,
		"the page's HTML":   `document.documentElement.outerHTML`,
		"localStorage":      `Object.values(localStorage).join(" ")`,
		"the history state": `JSON.stringify(history.state)`,
	} {
		if strings.Contains(eval(expr), adminToken) {
			t.Errorf("the token is in %s", what)
		}
	}
	errs, requests := seen.snapshot()
	origin, _ := url.Parse(base)
	for _, r := range requests {
		if strings.Contains(r, "victim") {
			t.Errorf("an account is in the requested URL %q", r)
		}
		u, err := url.Parse(r)
		if err != nil || u.Scheme != origin.Scheme || u.Host != origin.Host {
			t.Errorf("the page requested %q, another origin than %s", r, base)
		}
		if strings.Contains(r, adminToken) {
			t.Errorf("the token is in the requested URL %q", r)
		}
	}
	if len(requests) < 5 {
		t.Errorf("saw %d requests, want the page, its files and its API calls: %q", len(requests), requests)
	}
	// A guardian without lists answers 404 for them, which the browser
	// logs; the page shows "not available" for it.
	errs = slices.DeleteFunc(errs, func(e string) bool {
		return listsAnswer == 404 && strings.Contains(e, "404") && strings.HasSuffix(e, "/v1/lists")
	})
	if len(errs) > 0 {
		t.Errorf("the page logged errors:\n\t%s", strings.Join(errs, "\n\t"))
	}

	// Forgetting the token asks for one again and keeps nothing.
	if err := chromedp.Do(tab, chromedp.Click("#forget"), chromedp.WaitVisible("#token")); err != nil {
		t.Fatal(err)
	}
	if n := eval(`String(sessionStorage.length)`); n != "0" {
		t.Errorf("sessionStorage holds %s items after forgetting the token", n)
	}
}

// screenshot writes the whole page of tab to name in the artefact
// directory.
func screenshot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(artefactDir(t), name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// shadowCount is a shadow rule's would_block in a GET /v1/shadow body.
func shadowCount(t *testing.T, raw []byte, rule string) int {
	t.Helper()
	var rep struct {
		Rules []struct {
			Rule       string `json:"rule"`
			WouldBlock int    `json:"would_block"`
		} `json:"rules"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rules {
		if r.Rule == rule {
			return r.WouldBlock
		}
	}
	return -1
}
