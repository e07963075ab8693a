package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	guardianclient "github.com/guardian-sec/guardian/client"
	"github.com/guardian-sec/guardian/internal/gateway"
	"github.com/guardian-sec/guardian/internal/redistest"
)

// challengeRules challenge an account's second login attempt within an
// hour.
const challengeRules = `version: 1
rules:
  - name: login-challenge
    flows: [login]
    key: account
    type: rate
    count: attempts
    limit: 1
    per: 1h
    burst: 1
    action: challenge
`

// formApp is a form login: GET /login shows the form, POST /login answers
// 200 "Welcome" for alice with "right" and 401 otherwise. It counts the
// logins that reach it.
func formApp(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var logins atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.Method != http.MethodPost {
			fmt.Fprint(w, `<!doctype html><title>Sign in</title><form method="post" action="/login"><input id="u" name="u"><input id="p" name="p" type="password"><button id="go">Sign in</button></form>`)
			return
		}
		logins.Add(1)
		if r.PostFormValue("u") == "alice" && r.PostFormValue("p") == "right" {
			fmt.Fprint(w, `<!doctype html><title>Welcome</title><h1 id="welcome">Welcome, alice</h1>`)
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `<!doctype html><title>Wrong</title><h1 id="wrong">Wrong password</h1>`)
	}))
	t.Cleanup(srv.Close)
	return srv, &logins
}

func challengeProxy(listen, upstream string) string {
	return fmt.Sprintf(`version: 1
proxies:
  - listen: %s
    upstream: %s
    routes:
      - name: form
        match: {path: /login, methods: [POST]}
        flow: login
        account: {form: u}
        secret: {form: p}
        outcome:
          failure: [{status: [401]}]
          success: [{status: [200]}]
        challenge: {type: proof_of_work, difficulty: 12}
`, listen, upstream)
}

// TestGatewayProofOfWorkInABrowser: a browser's second login is answered
// with the proof-of-work page, which solves the challenge with
// crypto.subtle, posts it and goes back to the form; the next submission
// goes ahead as a passed challenge. The page loads nothing from another
// origin and breaks no rule of its Content-Security-Policy.
func TestGatewayProofOfWorkInABrowser(t *testing.T) {
	browser := chromium(t)
	app, logins := formApp(t)
	listen := freeAddr(t)
	in := startFleet(t, 1, fleetConfig{rulesYAML: challengeRules, proxy: challengeProxy(listen, app.URL)})[0]
	base := "http://" + listen

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox)...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(alloc)
	defer cancelTab()
	var seen browserLog
	if err := chromedp.Listen(tab, seen.listen); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// wait polls expr across navigations, which end a poll under way.
	wait := func(what, expr string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](expr))
			if err == nil && ok {
				return
			}
			if time.Now().After(deadline) {
				errs, _ := seen.snapshot()
				t.Fatalf("%s: %v (page errors %q)", what, err, errs)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	submit := func(pass string) {
		t.Helper()
		if err := chromedp.Do(tab, chromedp.WaitVisible("#u"), chromedp.SetValue("#u", "alice"), chromedp.SetValue("#p", pass), chromedp.Click("#go")); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(tab, chromedp.Navigate(base+"/login")); err != nil {
		t.Fatal(err)
	}
	submit("first-try")
	wait("the app's answer to the first login", `document.getElementById("wrong") !== null`)
	if err := chromedp.Do(tab, chromedp.Navigate(base+"/login")); err != nil {
		t.Fatal(err)
	}
	submit("right")
	// The page solves, posts, and goes back to the form.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, requests := seen.snapshot()
		if slices.Contains(requests, base+gateway.ChallengePath) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page never posted a solution; requests %q", requests)
		}
	}
	wait("the challenge page solved and back at the form", `document.getElementById("u") !== null`)
	if got := logins.Load(); got != 1 {
		t.Fatalf("the app saw %d logins, want 1: the challenged one must not reach it", got)
	}
	submit("right")
	wait("signed in after the challenge", `document.getElementById("welcome") !== null`)
	if got := logins.Load(); got != 2 {
		t.Errorf("the app saw %d logins, want 2", got)
	}
	errs, requests := seen.snapshot()
	for _, r := range requests {
		if !strings.HasPrefix(r, base+"/") && !strings.HasPrefix(r, "data:") {
			t.Errorf("the browser requested %s, outside the proxy's origin", r)
		}
	}
	if !slices.Contains(requests, base+"/.guardian/challenge.js") {
		t.Errorf("the browser never loaded the challenge page's script: %q", requests)
	}
	for _, e := range errs {
		if strings.Contains(e, "Content Security Policy") || strings.Contains(e, "exception") {
			t.Errorf("page error: %s", e)
		}
	}

	// The console lists the proxy and its route.
	if err := chromedp.Do(tab, chromedp.Navigate(in.base+"/console"), chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", adminToken), chromedp.Click(`#token-form button`)); err != nil {
		t.Fatal(err)
	}
	wait("the console's gateway proxies", `!document.getElementById("proxies-card").hidden && document.querySelector("#proxies tbody").textContent.includes("form")`)
	if row, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("#proxies tbody tr").textContent`)); err != nil || !strings.Contains(row, listen) || !strings.Contains(row, "proof_of_work 12") {
		t.Errorf("the console's proxy row: %q, %v; want the listen address and the challenge", row, err)
	}
}

// TestGatewayProofOfWorkAPIClient solves the challenge as an API client
// does: the JSON answer, a Go solver, the pass in a header.
func TestGatewayProofOfWorkAPIClient(t *testing.T) {
	app, logins := formApp(t)
	listen := freeAddr(t)
	in := startFleet(t, 1, fleetConfig{rulesYAML: challengeRules, proxy: challengeProxy(listen, app.URL)})[0]
	login := func(hdr ...string) (*http.Response, string) { return formLogin(t, listen, hdr...) }
	if resp, _ := login(); resp.StatusCode != http.StatusOK {
		t.Fatalf("first login: %d", resp.StatusCode)
	}
	pass := solveFormChallenge(t, listen)
	if resp, body := login(gateway.PassHeader, pass); resp.StatusCode != http.StatusOK || !strings.Contains(body, "Welcome") {
		t.Errorf("repeated with the pass: %d %s, want the app's welcome", resp.StatusCode, body)
	}
	if got := logins.Load(); got != 2 {
		t.Errorf("the app saw %d logins, want 2", got)
	}
	v := in.must(t, "GET", "/v1/proxies", adminToken, nil)
	proxies, _ := v.body["proxies"].([]any)
	if v.status != http.StatusOK || len(proxies) != 1 || !strings.Contains(string(v.raw), `"name":"form"`) || !strings.Contains(string(v.raw), `"addr":"`+listen+`"`) {
		t.Errorf("GET /v1/proxies: %d %s", v.status, v.raw)
	}
	if v := in.must(t, "GET", "/v1/proxies", checkToken, nil); v.status != http.StatusForbidden {
		t.Errorf("GET /v1/proxies with a check token: %d, want 403", v.status)
	}
}

// formLogin posts alice's right password to the form route of the proxy
// at listen as an API client would (Accept: application/json), with the
// header pairs hdr.
func formLogin(t *testing.T, listen string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", "http://"+listen+"/login", strings.NewReader("u=alice&p=right"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return send(t, req)
}

// solveFormChallenge logs in at listen, wants the JSON challenge, solves
// it as an API client would and returns the pass it earns.
func solveFormChallenge(t *testing.T, listen string) string {
	t.Helper()
	resp, body := formLogin(t, listen)
	var ch struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
		Challenge struct {
			Type       string `json:"type"`
			Difficulty int    `json:"difficulty"`
			Token      string `json:"token"`
			URL        string `json:"url"`
		} `json:"challenge"`
	}
	if err := json.Unmarshal([]byte(body), &ch); err != nil || resp.StatusCode != http.StatusForbidden || ch.Error.Code != "challenge_required" {
		t.Fatalf("login at %s: %d %s, want 403 challenge_required", listen, resp.StatusCode, body)
	}
	nonce := guardianclient.SolveChallenge(ch.Challenge.Token, ch.Challenge.Difficulty)
	req, _ := http.NewRequest("POST", "http://"+listen+ch.Challenge.URL, strings.NewReader(fmt.Sprintf(`{"token":%q,"nonce":%q}`, ch.Challenge.Token, nonce)))
	req.Header.Set("Content-Type", "application/json")
	sr, sbody := send(t, req)
	var pass struct {
		Pass string `json:"pass"`
	}
	if err := json.Unmarshal([]byte(sbody), &pass); err != nil || sr.StatusCode != http.StatusOK || pass.Pass == "" {
		t.Fatalf("solution at %s: %d %s", listen, sr.StatusCode, sbody)
	}
	return pass.Pass
}

// TestGatewayPassSpentAcrossTheFleet: two instances on one Redis, each with
// a proxy in front of one app. A pass earned on one is good on the other,
// once: used there, it is spent on both.
func TestGatewayPassSpentAcrossTheFleet(t *testing.T) {
	redis := redistest.Start(t)
	app, logins := formApp(t)
	listens := []string{freeAddr(t), freeAddr(t)}
	startFleet(t, 2, fleetConfig{redisURL: redis.URL(), rulesYAML: challengeRules,
		proxies: []string{challengeProxy(listens[0], app.URL), challengeProxy(listens[1], app.URL)}})
	if resp, _ := formLogin(t, listens[0]); resp.StatusCode != http.StatusOK {
		t.Fatalf("first login: %d", resp.StatusCode)
	}
	pass := solveFormChallenge(t, listens[0])
	if resp, body := formLogin(t, listens[1], gateway.PassHeader, pass); resp.StatusCode != http.StatusOK || !strings.Contains(body, "Welcome") {
		t.Fatalf("the pass on the other instance: %d %s, want the app's welcome", resp.StatusCode, body)
	}
	for i, listen := range listens {
		if resp, body := formLogin(t, listen, gateway.PassHeader, pass); resp.StatusCode != http.StatusForbidden {
			t.Errorf("the pass again on instance %d: %d %s, want 403, challenged again", i, resp.StatusCode, body)
		}
	}
	if got := logins.Load(); got != 2 {
		t.Errorf("the app saw %d logins, want 2: the first and the one the pass let through", got)
	}
}
