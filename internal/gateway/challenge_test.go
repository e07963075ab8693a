package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/client"
	"github.com/guardian-sec/guardian/internal/breached"
	"github.com/guardian-sec/guardian/internal/breached/breachedtest"
)

// resetRoute is a password_reset route whose account rule challenges its
// third attempt within an hour (testRules), answered with a proof of work.
const resetRoute = `      - name: reset
        match: {path: /reset, methods: [POST]}
        flow: password_reset
        account: {json: /account}
        outcome:
          failure: [{status: [401]}]
          success: [{status: [207]}]
        challenge: {type: proof_of_work, difficulty: 8}
`

func (g *testGateway) reset(t *testing.T, account string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", g.srv.URL+"/reset", strings.NewReader(`{"account": "`+account+`"}`))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return do(t, req)
}

// solveAsAPIClient solves the challenge of a 403 challenge_required answer
// and returns the pass.
func (g *testGateway) solveAsAPIClient(t *testing.T, resp *http.Response) string {
	t.Helper()
	var e errorBody
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusForbidden || e.Error.Code != "challenge_required" || e.Challenge == nil {
		t.Fatalf("want 403 challenge_required with a challenge; got %d %+v %v", resp.StatusCode, e, err)
	}
	c := e.Challenge
	if c.Type != "proof_of_work" || c.Difficulty != 8 || c.URL != ChallengePath {
		t.Fatalf("challenge: got %+v", c)
	}
	nonce := client.SolveChallenge(c.Token, c.Difficulty)
	body := fmt.Sprintf(`{"token": %q, "nonce": %q}`, c.Token, nonce)
	req, _ := http.NewRequest("POST", g.srv.URL+c.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	sr := do(t, req)
	var ans struct {
		Passed bool   `json:"passed"`
		Pass   string `json:"pass"`
	}
	if err := json.NewDecoder(sr.Body).Decode(&ans); err != nil || sr.StatusCode != http.StatusOK || !ans.Passed || ans.Pass == "" {
		t.Fatalf("solution: got %d %+v %v", sr.StatusCode, ans, err)
	}
	if c := cookieOf(sr, PassCookie); c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("pass cookie: got %+v", c)
	}
	// The same solution twice earns nothing.
	req, _ = http.NewRequest("POST", g.srv.URL+c.URL, strings.NewReader(body))
	if again := do(t, req); again.StatusCode != http.StatusForbidden {
		t.Errorf("a solution used twice: got %d, want 403", again.StatusCode)
	}
	return ans.Pass
}

func TestProofOfWorkSolvedByAnAPIClient(t *testing.T) {
	g := newTestGateway(t, "enforce", resetRoute)
	for i := range 2 {
		if resp := g.reset(t, "erin"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("attempt %d: got %d, want the upstream's 401", i, resp.StatusCode)
		}
	}
	hits := g.up.hits.Load()
	pass := g.solveAsAPIClient(t, g.reset(t, "erin"))
	if g.up.hits.Load() != hits {
		t.Error("a challenged request reached the upstream")
	}
	// A pass for erin is no pass for frank.
	if resp := g.reset(t, "frank", PassHeader, pass); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("frank's first attempt: got %d", resp.StatusCode)
	}
	if resp := g.reset(t, "erin", PassHeader, pass); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("repeated with the pass: got %d, want it forwarded (the upstream's 401)", resp.StatusCode)
	}
	if h := *g.up.lastHdr.Load(); h.Get(PassHeader) != "" {
		t.Error("the pass reached the upstream")
	}
	if resp := g.reset(t, "erin", PassHeader, pass); resp.StatusCode != http.StatusForbidden {
		t.Errorf("the pass used twice: got %d, want 403, challenged again", resp.StatusCode)
	}
}

func TestChallengeTokens(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	c := newChallenges([]byte("0123456789abcdef0123456789abcdef"), func() time.Time { return now }, nil, slog.Default())
	ctx := context.Background()
	v4 := netip.MustParseAddr("203.0.113.7")
	v6a, v6b := netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2:ffff::9")
	bind := c.binding("acct", v4, "r")
	if c.binding("acct", v6a, "r") != c.binding("acct", v6b, "r") {
		t.Error("two addresses of one /64 bind differently")
	}
	for _, other := range [][bindLen]byte{c.binding("acct", netip.MustParseAddr("203.0.113.8"), "r"), c.binding("acct2", v4, "r"), c.binding("acct", v4, "r2")} {
		if other == bind {
			t.Error("a binding of another address, account or route is equal")
		}
	}
	tok := c.issue(kindChallenge, now.Add(ChallengeTTL), 6, bind)
	wrong := 0
	for client.ChallengeSolved(tok, strconv.Itoa(wrong), 6) {
		wrong++
	}
	if _, _, err := c.solve(ctx, tok, strconv.Itoa(wrong)); err != errBadNonce {
		t.Errorf("a wrong nonce: got %v, want errBadNonce", err)
	}
	if _, _, err := c.solve(ctx, tok[:len(tok)-2]+"AA", client.SolveChallenge(tok, 6)); err != errBadToken {
		t.Errorf("an altered token: got %v, want errBadToken", err)
	}
	pass, _, err := c.solve(ctx, tok, client.SolveChallenge(tok, 6))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.open(pass, kindChallenge); err != errBadToken {
		t.Errorf("a pass opened as a challenge: got %v", err)
	}
	now = now.Add(ChallengeTTL)
	if err := c.redeem(ctx, pass, bind); err != errExpired {
		t.Errorf("a pass after 5 minutes: got %v, want errExpired", err)
	}
}

func TestBreachedOnLogin(t *testing.T) {
	path := breachedtest.File(t, breached.Plain, "password123", "letmein")
	f, err := breached.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var holder breached.Holder
	holder.Store(&breached.Loaded{Filter: f, Source: path})
	for _, tt := range []struct {
		action string
		want   int
	}{{"header", http.StatusUnauthorized}, {"block", http.StatusForbidden}, {"challenge", http.StatusForbidden}} {
		t.Run(tt.action, func(t *testing.T) {
			route := strings.NewReplacer("name: reset", "name: br", "/reset", "/br", "{json: /account}", "{json: /account}\n        secret: {json: /password}\n        breached: {on_login: "+tt.action+"}").Replace(resetRoute)
			g := newTestGateway(t, "enforce", route)
			g.gw.breached = &holder
			post := func(pw string) *http.Response {
				req, _ := http.NewRequest("POST", g.srv.URL+"/br", strings.NewReader(`{"account": "gus", "password": "`+pw+`"}`))
				return do(t, req)
			}
			resp := post("password123")
			if resp.StatusCode != tt.want {
				t.Fatalf("a breached password: got %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.action == "header" && (*g.up.lastHdr.Load()).Get(BreachedHeaderName) != "1" {
				t.Error("the upstream did not get X-Guardian-Breached: 1")
			}
			if resp := post("a-long-unbreached-passphrase"); resp.StatusCode != http.StatusUnauthorized || (*g.up.lastHdr.Load()).Get(BreachedHeaderName) != "" {
				t.Errorf("an unbreached password: got %d, header %q", resp.StatusCode, (*g.up.lastHdr.Load()).Get(BreachedHeaderName))
			}
			g.assertNoSecret(t, "password123")
		})
	}
}
