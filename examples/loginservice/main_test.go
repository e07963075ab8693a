package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/guardian-sec/guardian/client"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// testIPHeader carries the client address in these tests only: every request
// comes from 127.0.0.1, and the attacker's many addresses (which keep it
// under login-ip, as a botnet would) are simulated by this header. The
// service reads it only because the test configures it to.
const testIPHeader = "X-Test-Client-IP"

// world is a real guardian, the login service in front of it, and an admin
// client for looking at guardian's side.
type world struct {
	login *httptest.Server
	admin *client.Client
	// clock is guardian's store clock. guardian runs its built-in rules,
	// which let an account fail once a minute after a burst of 5: reaching
	// the 100-failure hard stop takes 95 minutes of store time, which the
	// test moves forward instead of waiting for.
	clock *testclock.Clock
}

func newWorld(t *testing.T) *world {
	t.Helper()
	key, err := secret.New([]byte("loginservice end-to-end test signing key, 32+ bytes"))
	if err != nil {
		t.Fatal(err)
	}
	clock := testclock.New(time.Now())
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	// The built-in rules (no RulesPath), on the embedded store, whose clock
	// the test moves.
	g, err := server.New(server.Config{Addr: "127.0.0.1:0", SigningKey: key, Logger: quiet,
		Store: memstore.New(memstore.Config{Now: clock.Now})})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	issuer := tokens.NewService(key)
	checkToken, err := issuer.Issue(tokens.ScopeCheck, "loginservice", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	adminToken, err := issuer.Issue(tokens.ScopeAdmin, "loginservice-reset", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	guardianURL := "http://" + g.Addr()
	// The timeouts are generous so that a loaded test machine never turns
	// guardian's answer into the fail-closed policy's.
	check, err := client.New(client.Config{BaseURL: guardianURL, Tokens: client.StaticToken(checkToken),
		OnUnavailable: client.FailClosed, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(client.Config{BaseURL: guardianURL, Tokens: client.StaticToken(adminToken),
		OnUnavailable: client.FailClosed, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	users, err := NewUsers(bcrypt.MinCost) // fast: a hundred wrong passwords ahead
	if err != nil {
		t.Fatal(err)
	}
	if err := users.Add("alice@example.com", "correct horse battery staple", "424242", "reset-alice"); err != nil {
		t.Fatal(err)
	}
	// Bob's password is the one a spray tries.
	if err := users.Add("bob@example.com", sprayedPassword, "135790", "reset-bob"); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{
		Guardian: check, Admin: admin, Users: users, Logger: quiet, FingerprintKey: testFingerprintKey,
		ClientIP: func(r *http.Request) string { return r.Header.Get(testIPHeader) },
	})
	if err != nil {
		t.Fatal(err)
	}
	// TLS, because the device cookie is Secure: a browser sends it back
	// over HTTPS only, and so does the test's cookie jar.
	w := &world{login: httptest.NewTLSServer(svc), admin: admin, clock: clock}
	t.Cleanup(w.login.Close)
	return w
}

// browser is one device with its own cookie jar, at one address.
type browser struct {
	t    *testing.T
	w    *world
	http *http.Client
	ip   string
}

func (w *world) browser(t *testing.T, ip string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, w: w, http: &http.Client{Transport: w.login.Client().Transport, Jar: jar}, ip: ip}
}

// reply is the login service's answer.
type reply struct {
	status     int
	retryAfter string
	body       map[string]any
	header     http.Header
}

func (b *browser) post(path string, body any) reply {
	b.t.Helper()
	buf, err := json.Marshal(body)
	if err != nil {
		b.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, b.w.login.URL+path, bytes.NewReader(buf))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(testIPHeader, b.ip)
	res, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	r := reply{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After"), header: res.Header}
	if err := json.NewDecoder(res.Body).Decode(&r.body); err != nil {
		b.t.Fatalf("POST %s answered %d with a body that is not JSON: %v", path, res.StatusCode, err)
	}
	return r
}

func (b *browser) login(password string) reply {
	b.t.Helper()
	return b.post("/login", map[string]string{"username": "alice@example.com", "password": password})
}

// want fails the test unless r has status and the body fields in want.
func (r reply) want(t *testing.T, step string, status int, want map[string]any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d %v, want %d %v", step, r.status, r.body, status, want)
	}
	for k, v := range want {
		if r.body[k] != v {
			t.Fatalf("%s: body %v, want %s = %v", step, r.body, k, v)
		}
	}
}

var (
	loggedIn   = map[string]any{"logged_in": true}
	wrong      = map[string]any{"error": "invalid_credentials", "next": "retry"}
	slowedDown = map[string]any{"error": "too_many_attempts", "next": "wait"}
	lockedOut  = map[string]any{"error": "account_locked", "next": "reset"}
	// askedFor2FA is a challenge not passed: nothing was verified.
	askedFor2FA = map[string]any{"error": "second_factor_required", "next": "second_factor"}
)

const (
	ownerSecret  = "correct horse battery staple"
	ownerNewPass = "a new and longer passphrase"
)

func TestBruteForceAgainstOneAccount(t *testing.T) {
	w := newWorld(t)
	laptop := w.browser(t, "198.51.100.7")

	// The owner logs in on their laptop, which keeps guardian's device
	// token in a cookie no script can read.
	r := laptop.login(ownerSecret)
	r.want(t, "owner's first login", http.StatusOK, loggedIn)
	if c := deviceCookie(t, r.header); !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Value == "" {
		t.Fatalf("device cookie = %+v, want HttpOnly, Secure, SameSite=Strict with a token", c)
	}

	// An attacker guesses from a new address each time, staying under
	// login-ip as a botnet would: 5 guesses are verified, then the account
	// is slowed to one guess a minute.
	attempt := 0
	attacker := func() reply {
		attempt++
		ip := fmt.Sprintf("10.%d.%d.%d", attempt>>16&255, attempt>>8&255, attempt&255)
		return w.browser(t, ip).login(fmt.Sprintf("guess-%d", attempt))
	}
	for i := range 5 {
		attacker().want(t, fmt.Sprintf("guess %d", i+1), http.StatusUnauthorized, wrong)
	}
	r = attacker()
	r.want(t, "guess 6", http.StatusTooManyRequests, slowedDown)
	if r.retryAfter != "60" {
		t.Fatalf("guess 6: Retry-After %q, want 60", r.retryAfter)
	}
	if r.header.Get("RateLimit") != "" || r.header.Get("RateLimit-Policy") != "" {
		t.Fatalf("guess 6: quota headers sent to an unauthenticated client: %v", r.header)
	}

	// The owner, on the laptop, is not slowed: their device has a budget
	// of its own. Nor is a new phone on the owner's home network, familiar
	// since the first login. The same password from a new phone on a
	// network the owner never logged in from is slowed.
	laptop.login(ownerSecret).want(t, "owner on the trusted laptop during the attack", http.StatusOK, loggedIn)
	w.browser(t, "198.51.100.8").login(ownerSecret).want(t, "owner on a new phone at home during the attack", http.StatusOK, loggedIn)
	phone := w.browser(t, "192.0.2.8")
	phone.login(ownerSecret).want(t, "owner on a new phone elsewhere during the attack", http.StatusTooManyRequests, slowedDown)

	// The attacker keeps going at the pace guardian allows until the hard
	// stop: 100 failures in a row, over 95 minutes of guardian's time.
	failures, slowed := 5, 1
	for failures < 100 {
		r := attacker()
		switch r.status {
		case http.StatusUnauthorized:
			r.want(t, "guess", http.StatusUnauthorized, wrong)
			failures++
		case http.StatusTooManyRequests:
			r.want(t, "guess", http.StatusTooManyRequests, slowedDown)
			slowed++
			if slowed > 200 {
				t.Fatalf("slowed %d times with %d failures: the attack does not progress", slowed, failures)
			}
			secs, err := strconv.Atoi(r.retryAfter)
			if err != nil || secs < 1 {
				t.Fatalf("slowed guess with Retry-After %q", r.retryAfter)
			}
			w.clock.Advance(time.Duration(secs) * time.Second)
		default:
			t.Fatalf("after %d failures: status %d %v, want 401 or 429", failures, r.status, r.body)
		}
	}
	attacker().want(t, "guess after 100 failures", http.StatusForbidden, lockedOut)
	w.clock.Advance(time.Hour)
	attacker().want(t, "guess an hour later", http.StatusForbidden, lockedOut)

	// guardian holds the account blocked; the right password from an
	// untrusted device meets the hard stop too, and is sent to reset.
	st, err := w.admin.AccountStatus(t.Context(), "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if !st.Blocked || st.ConsecutiveFailures != 100 {
		t.Fatalf("status = %+v, want blocked after 100 consecutive failures", st)
	}
	phone.login(ownerSecret).want(t, "owner on a new phone after the hard stop", http.StatusForbidden, lockedOut)

	// A guessed reset code changes nothing.
	reset := func(b *browser, code string) reply {
		return b.post("/reset", map[string]string{"username": "alice@example.com", "reset_code": code, "new_password": ownerNewPass})
	}
	reset(w.browser(t, "203.0.113.66"), "guessed-code").want(t, "reset with a guessed code", http.StatusUnauthorized,
		map[string]any{"error": "invalid_reset_code", "next": "reset"})
	if st, err := w.admin.AccountStatus(t.Context(), "alice@example.com"); err != nil || !st.Blocked {
		t.Fatalf("status after a guessed reset code = %+v, %v; want still blocked", st, err)
	}

	// The owner proves who they are with the code from the e-mail, sets a
	// new password, and the hard stop is lifted.
	reset(phone, "reset-alice").want(t, "verified reset", http.StatusOK, map[string]any{"reset": true, "next": "login"})
	st, err = w.admin.AccountStatus(t.Context(), "alice@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if st.Blocked || st.ConsecutiveFailures != 0 {
		t.Fatalf("status after the reset = %+v, want unblocked, no failures", st)
	}
	r = phone.login(ownerNewPass)
	r.want(t, "owner on the phone after the reset", http.StatusOK, loggedIn)
	if c := deviceCookie(t, r.header); c.Value == "" {
		t.Fatal("no device token for the phone after its first successful login")
	}
	phone.login(ownerSecret).want(t, "the old password after the reset", http.StatusUnauthorized, wrong)
}

// deviceCookie returns the device cookie set in h.
func deviceCookie(t *testing.T, h http.Header) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == DeviceCookie {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", DeviceCookie, h["Set-Cookie"])
	return nil
}

// A phone holding last year's password retries it ten times in a row:
// guardian charges the account once for it, so the owner is not slowed at
// the sixth try as a guesser would be, and logs in with the right password
// at once. Each retry is still verified, and still wrong. (The retries do
// count on login-secret-spray: a device retrying faster than once a minute
// past ten tries would meet a challenge.)
func TestStalePasswordIsChargedOnce(t *testing.T) {
	w := newWorld(t)
	phone := w.browser(t, "198.51.100.9")
	for i := range 10 {
		phone.login("last year's password").want(t, fmt.Sprintf("stale retry %d", i+1), http.StatusUnauthorized, wrong)
	}
	phone.login(ownerSecret).want(t, "the owner with the right password", http.StatusOK, loggedIn)
}

// sprayedPassword is the one password an attacker tries on many accounts.
const sprayedPassword = "Winter2026!"

// One password sprayed over many accounts, each from a network of its own
// (no address or account rule sees it): past the built-in
// login-secret-spray's 10, guardian challenges every try of it, and the
// service verifies none until its challenge is passed. Bob, whose password
// it is, gets in with his second factor, and only with it.
func TestSprayedPasswordIsChallenged(t *testing.T) {
	w := newWorld(t)
	try := func(i int, account, code string) reply {
		t.Helper()
		b := w.browser(t, fmt.Sprintf("10.%d.%d.1", i>>8&255, i&255))
		return b.post("/login", map[string]string{"username": account, "password": sprayedPassword, "code": code})
	}
	for i := range 10 {
		try(i, fmt.Sprintf("user-%d@example.com", i), "").want(t, fmt.Sprintf("spray %d, verified", i+1), http.StatusUnauthorized, wrong)
	}
	for i := 10; i < 25; i++ {
		try(i, fmt.Sprintf("user-%d@example.com", i), "").want(t, fmt.Sprintf("spray %d, challenged", i+1), http.StatusUnauthorized, askedFor2FA)
	}
	try(30, "bob@example.com", "").want(t, "bob without his second factor", http.StatusUnauthorized, askedFor2FA)
	try(31, "bob@example.com", "000000").want(t, "bob with a wrong second factor", http.StatusUnauthorized, askedFor2FA)
	try(32, "user-3@example.com", "135790").want(t, "another account with bob's second factor", http.StatusUnauthorized, askedFor2FA)
	r := try(33, "bob@example.com", "135790")
	r.want(t, "bob with his second factor", http.StatusOK, loggedIn)
	if c := deviceCookie(t, r.header); c.Value == "" {
		t.Fatal("no device token after bob's login")
	}
}
