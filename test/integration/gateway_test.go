package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/logtest"
	"github.com/guardian-sec/guardian/internal/redistest"
)

// Gateway mode against real applications from Debian packages: Radicale
// (CalDAV, HTTP basic auth) and DokuWiki (a form login), each behind
// guardian serve --proxy on a real Redis.

// gatewayRules slow an account after 3 failures, then 1 an hour.
const gatewayRules = `version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1h
    burst: 3
    action: slow
`

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// app is a process of an application under test, its output captured.
type app struct {
	addr string
	out  *logtest.Buffer
}

// startApp runs cmd until the test ends and waits for addr to answer.
func startApp(t *testing.T, addr string, cmd *exec.Cmd) *app {
	t.Helper()
	a := &app{addr: addr, out: &logtest.Buffer{}}
	cmd.Stdout, cmd.Stderr = a.out, a.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s: %s", cmd.Path, addr, a.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func needBinary(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("no %s on PATH: apt-get install %s (.ci/run installs it)", name, pkg)
	}
	return p
}

// startRadicale runs Radicale with one user, alice, password "right".
func startRadicale(t *testing.T) *app {
	bin := needBinary(t, "radicale", "radicale")
	dir := t.TempDir()
	addr := freeAddr(t)
	if err := os.WriteFile(filepath.Join(dir, "users"), []byte("alice:right\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`[server]
hosts = %s
[auth]
type = htpasswd
htpasswd_filename = %s
htpasswd_encryption = plain
delay = 0
[storage]
filesystem_folder = %s
[logging]
level = info
`, addr, filepath.Join(dir, "users"), filepath.Join(dir, "collections"))
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return startApp(t, addr, exec.Command(bin, "--config", filepath.Join(dir, "config")))
}

// gatewayInstance starts guardian on Redis with proxy, and returns it, its
// logs and the proxies' addresses.
func gatewayInstance(t *testing.T, proxy string) (*instance, *logtest.Buffer, []string, *redistest.Server) {
	t.Helper()
	r := redistest.Start(t)
	logs := &logtest.Buffer{}
	in := startFleet(t, 1, fleetConfig{redisURL: r.URL(), rulesYAML: gatewayRules, proxy: proxy,
		logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})[0]
	return in, logs, in.srv.ProxyAddrs(), r
}

// send makes one request, returning its status, headers and body.
func send(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

var noRedirects = &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func propfind(t *testing.T, proxy, user, pass string, cookies ...*http.Cookie) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("PROPFIND", "http://"+proxy+"/"+user+"/", nil)
	req.SetBasicAuth(user, pass)
	req.Header.Set("Depth", "0")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, _ := send(t, req)
	return resp
}

func deviceCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == "guardian_device" {
			return c
		}
	}
	return nil
}

// assertSecretsNowhere fails when a password is in guardian's logs, its
// metrics, or any key or string value of Redis.
func assertSecretsNowhere(t *testing.T, in *instance, logs *logtest.Buffer, r *redistest.Server, secrets ...string) {
	t.Helper()
	metrics := in.must(t, "GET", "/metrics", "", nil)
	ctx := context.Background()
	rc := r.Client(t)
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("Redis holds no key: the checks reached no store")
	}
	var stored strings.Builder
	for _, k := range keys {
		stored.WriteString(k + "\n")
		if v, err := rc.Get(ctx, k).Result(); err == nil {
			stored.WriteString(v + "\n")
		}
		if h, err := rc.HGetAll(ctx, k).Result(); err == nil {
			for f, v := range h {
				stored.WriteString(f + "=" + v + "\n")
			}
		}
	}
	for _, s := range secrets {
		for what, text := range map[string]string{"guardian's logs": logs.String(), "/metrics": string(metrics.raw), "Redis": stored.String()} {
			if strings.Contains(text, s) {
				t.Errorf("the password %q is in %s", s, what)
			}
		}
	}
}

func TestGatewayRadicale(t *testing.T) {
	rad := startRadicale(t)
	enforce, observe := freeAddr(t), freeAddr(t)
	proxy := fmt.Sprintf(`version: 1
proxies:
  - listen: %s
    upstream: http://%s
    routes:
      - &caldav
        name: caldav
        match: {path_prefix: /, methods: [any]}
        flow: login
        account: {basic_auth: user}
        secret: {basic_auth: password}
        outcome:
          failure: [{status: [401, 403]}]
          success: [{status: [200, 207]}]
  - listen: %s
    upstream: http://%s
    mode: observe
    routes: [*caldav]
`, enforce, rad.addr, observe, rad.addr)
	in, logs, addrs, redis := gatewayInstance(t, proxy)
	if len(addrs) != 2 || addrs[0] != enforce {
		t.Fatalf("proxies listen on %v, want %s and %s", addrs, enforce, observe)
	}
	failed := func() int { return strings.Count(rad.out.String(), "Failed login attempt") }

	owner := propfind(t, enforce, "alice", "right")
	dev := deviceCookie(owner)
	if owner.StatusCode != http.StatusMultiStatus || dev == nil || !dev.HttpOnly || dev.SameSite != http.SameSiteLaxMode {
		t.Fatalf("the owner's login: %d, cookie %+v; want 207 and an HttpOnly SameSite=Lax guardian_device", owner.StatusCode, dev)
	}
	wrong := []string{"guess-one", "guess-two", "guess-three", "guess-four", "guess-five"}
	for i, pw := range wrong[:3] {
		if resp := propfind(t, enforce, "alice", pw); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want Radicale's 401", i, resp.StatusCode)
		}
	}
	if got := failed(); got != 3 {
		t.Fatalf("Radicale logged %d failed logins, want 3", got)
	}
	for _, pw := range wrong[3:] {
		resp := propfind(t, enforce, "alice", pw)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Ratelimit") == "" {
			t.Fatalf("past the burst: %d %v, want 429 with Retry-After and RateLimit", resp.StatusCode, resp.Header)
		}
	}
	if got := failed(); got != 3 {
		t.Errorf("Radicale logged %d failed logins, want still 3: a 429 never reaches it", got)
	}
	if resp := propfind(t, enforce, "alice", "right"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the right password without the device, while slowed: %d, want 429", resp.StatusCode)
	}
	if resp := propfind(t, enforce, "alice", "right", dev); resp.StatusCode != http.StatusMultiStatus {
		t.Errorf("the owner with guardian_device while the account is slowed: %d, want 207", resp.StatusCode)
	}

	// Observe mode decides and counts, and never answers 429.
	for i := range 8 {
		if resp := propfind(t, observe, "alice", fmt.Sprintf("observed-%d", i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("observe mode, guess %d: %d, want Radicale's 401", i, resp.StatusCode)
		}
	}
	if got := failed(); got != 3+8 {
		t.Errorf("Radicale logged %d failed logins, want 11: observe mode forwards every one", got)
	}
	if v, _ := metric(t, in, `guardian_proxy_requests_total{decision="slow",proxy="`+observe+`",route="caldav"}`); v == 0 {
		t.Error("observe mode counted no slow decision")
	}
	if v, _ := metric(t, in, `guardian_proxy_outcomes_total{outcome="failure",route="caldav"}`); v < 3 {
		t.Errorf("guardian_proxy_outcomes_total{failure}: %v, want at least 3", v)
	}
	assertSecretsNowhere(t, in, logs, redis, append(wrong, "right")...)
}

// dokuWiki runs DokuWiki from /usr/share/dokuwiki on php -S with a user
// added to its users file, which the test puts back as it was.
func dokuWiki(t *testing.T, user, pass string) *app {
	php := needBinary(t, "php", "php-cli")
	htpasswd := needBinary(t, "htpasswd", "apache2-utils")
	if _, err := os.Stat("/usr/share/dokuwiki/doku.php"); err != nil {
		t.Fatal("no DokuWiki: apt-get install --no-install-recommends dokuwiki (.ci/run installs it)")
	}
	const users = "/etc/dokuwiki/users.auth.php"
	before, err := os.ReadFile(users)
	if err != nil {
		t.Fatalf("DokuWiki's users file: %v", err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(users, before, 0o640); err != nil {
			t.Errorf("restore %s: %v", users, err)
		}
	})
	out, err := exec.Command(htpasswd, "-nbB", user, pass).Output()
	if err != nil {
		t.Fatal(err)
	}
	_, hash, _ := strings.Cut(strings.TrimSpace(string(out)), ":")
	line := fmt.Sprintf("%s:%s:Gateway Test:%s@example.com:user\n", user, hash, user)
	if err := os.WriteFile(users, append(append([]byte{}, before...), line...), 0o640); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	return startApp(t, addr, exec.Command(php, "-S", addr, "-t", "/usr/share/dokuwiki"))
}

func wikiLogin(t *testing.T, proxy, user, pass string, cookies ...*http.Cookie) (*http.Response, string) {
	t.Helper()
	form := url.Values{"do": {"login"}, "u": {user}, "p": {pass}}.Encode()
	req, _ := http.NewRequest("POST", "http://"+proxy+"/doku.php?id=start", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range cookies {
		req.AddCookie(c)
	}
	return send(t, req)
}

func TestGatewayDokuWiki(t *testing.T) {
	const user, pass = "gwtest", "Correct-Horse-7"
	wiki := dokuWiki(t, user, pass)
	enforce, observe := freeAddr(t), freeAddr(t)
	proxy := fmt.Sprintf(`version: 1
proxies:
  - listen: %s
    upstream: http://%s
    routes:
      - &login
        name: wiki-login
        match: {path: /doku.php, methods: [POST]}
        flow: login
        account: {form: u}
        secret: {form: p}
        outcome:
          failure: [{status: [403], body_contains: "Sorry, username or password was wrong."}]
          success: [{status: [302], set_cookie: "DW*"}]
  - listen: %s
    upstream: http://%s
    mode: observe
    routes: [*login]
`, enforce, wiki.addr, observe, wiki.addr)
	in, logs, _, redis := gatewayInstance(t, proxy)
	// php -S logs every request it answers, "[403]: POST /doku.php…".
	logins := func() int { return strings.Count(wiki.out.String(), "POST /doku.php") }

	resp, _ := wikiLogin(t, enforce, user, pass)
	dev := deviceCookie(resp)
	if resp.StatusCode != http.StatusFound || dev == nil {
		t.Fatalf("the owner's login: %d, device cookie %v; want 302 and guardian_device", resp.StatusCode, dev)
	}
	hasDW := false
	for _, c := range resp.Cookies() {
		hasDW = hasDW || (strings.HasPrefix(c.Name, "DW") && c.Value != "deleted")
	}
	if !hasDW {
		t.Errorf("DokuWiki's DW… auth cookie did not come through: %v", resp.Header["Set-Cookie"])
	}
	wrong := []string{"wrong-a", "wrong-b", "wrong-c", "wrong-d"}
	for i, pw := range wrong[:3] {
		resp, body := wikiLogin(t, enforce, user, pw)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Sorry, username or password was wrong.") {
			t.Fatalf("wrong password %d: %d, want DokuWiki's 403 page", i, resp.StatusCode)
		}
	}
	reached := logins()
	if resp, _ := wikiLogin(t, enforce, user, wrong[3]); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("past the burst: %d, want 429", resp.StatusCode)
	}
	if got := logins(); got != reached {
		t.Errorf("DokuWiki saw %d more logins, want none past the burst", got-reached)
	}
	if resp, _ := wikiLogin(t, enforce, user, pass, dev); resp.StatusCode != http.StatusFound {
		t.Errorf("the owner with guardian_device while slowed: %d, want DokuWiki's 302", resp.StatusCode)
	}
	for i := range 6 {
		if resp, _ := wikiLogin(t, observe, user, fmt.Sprintf("observed-%d", i)); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("observe mode, guess %d: %d, want DokuWiki's 403", i, resp.StatusCode)
		}
	}
	if v, _ := metric(t, in, `guardian_proxy_outcomes_total{outcome="success",route="wiki-login"}`); v != 2 {
		t.Errorf("guardian_proxy_outcomes_total{success}: %v, want 2", v)
	}
	assertSecretsNowhere(t, in, logs, redis, append(wrong, pass)...)
}
