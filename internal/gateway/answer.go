package gateway

import (
	"embed"
	"encoding/json"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/httpapi"
	"github.com/guardian-sec/guardian/internal/rules"
)

//go:embed assets
var assets embed.FS

var challengePage = template.Must(template.ParseFS(assets, "assets/challenge.html"))

// pageCSP is the Content-Security-Policy of every page guardian answers
// with: nothing from another origin, no inline script or style.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// acceptsHTML reports whether the client is a browser asking for a page.
func acceptsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// errorBody is the contract's error shape, with a challenge when one is
// asked for.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Challenge *challengeJSON `json:"challenge,omitempty"`
}

type challengeJSON struct {
	Type       string `json:"type"`
	Difficulty int    `json:"difficulty"`
	Token      string `json:"token"`
	URL        string `json:"url"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, &b)
}

// simplePage is a page of one heading and one paragraph.
var simplePage = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title><link rel="stylesheet" href="/.guardian/challenge.css"></head>
<body><main><h1>{{.Title}}</h1><p>{{.Text}}</p></main></body></html>
`))

// writePage answers a browser with a page, anyone else with the error
// shape, both saying text.
func writePage(w http.ResponseWriter, r *http.Request, status int, code, text string) {
	if !acceptsHTML(r) {
		writeError(w, status, code, text)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", pageCSP)
	w.WriteHeader(status)
	_ = simplePage.Execute(w, struct{ Title, Text string }{http.StatusText(status), text})
}

// denied answers a slowed or blocked check: 429, Retry-After and the
// RateLimit headers, never reaching the upstream.
func denied(w http.ResponseWriter, r *http.Request, d *engine.Decision) {
	httpapi.SetCheckHeaders(w.Header(), d)
	if d.Action == rules.Block {
		writePage(w, r, http.StatusTooManyRequests, "blocked",
			"Too many failed sign-ins for this account. It is locked until it is reset through a verified channel, such as a password reset.")
		return
	}
	writePage(w, r, http.StatusTooManyRequests, "rate_limited",
		"Too many sign-in attempts. Try again in "+retryAfter(d.RetryAfter)+" seconds.")
}

// challenge answers a challenged check as the route says: a status, or a
// proof of work (a page for a browser, JSON for an API client).
func (g *Gateway) challenge(w http.ResponseWriter, r *http.Request, rt *Route, bind [bindLen]byte, secure bool) {
	c := rt.Challenge
	if c.Type == StatusOnly {
		writePage(w, r, c.Status, "challenge_required", "This sign-in needs an extra check first.")
		return
	}
	difficulty := c.Difficulty
	if difficulty == 0 {
		difficulty = DefaultDifficulty
	}
	tok := g.challenges.issue(kindChallenge, g.challenges.now().Add(ChallengeTTL), difficulty, bind)
	if !acceptsHTML(r) {
		var b errorBody
		b.Error.Code = "challenge_required"
		b.Error.Message = "solve the proof of work: find a nonce whose SHA-256 over token:nonce has difficulty leading zero bits, POST {token, nonce} to url, then repeat the request with the pass it answers in the " + PassHeader + " header"
		b.Challenge = &challengeJSON{Type: string(ProofOfWork), Difficulty: difficulty, Token: tok, URL: ChallengePath}
		writeJSON(w, http.StatusForbidden, &b)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", pageCSP)
	w.WriteHeader(http.StatusForbidden)
	_ = challengePage.Execute(w, struct {
		Token, URL, Method string
		Difficulty         int
	}{tok, ChallengePath, r.Method, difficulty})
}

// serveGuardian serves guardian's own paths on a proxy: the challenge
// endpoint and the page's script and style. Anything else under
// /.guardian/ is 404.
func (g *Gateway) serveGuardian(w http.ResponseWriter, r *http.Request, p *proxy) {
	switch r.URL.Path {
	case ChallengePath:
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "POST a solution here")
			return
		}
		g.solve(w, r, p)
	case "/.guardian/challenge.js":
		g.asset(w, "assets/challenge.js", "text/javascript; charset=utf-8")
	case "/.guardian/challenge.css":
		g.asset(w, "assets/challenge.css", "text/css; charset=utf-8")
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such path")
	}
}

func (g *Gateway) asset(w http.ResponseWriter, name, contentType string) {
	b, err := assets.ReadFile(name)
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", "no such path")
		return
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "public, max-age=3600")
	h.Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b)
}

// solveRequest is the body of POST /.guardian/challenge.
type solveRequest struct {
	Token string `json:"token"`
	Nonce string `json:"nonce"`
}

// solve checks a posted solution and answers the pass, also as a cookie.
func (g *Gateway) solve(w http.ResponseWriter, r *http.Request, p *proxy) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 4<<10))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_json", "the body could not be read")
		return
	}
	var body solveRequest
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		if form, err := url.ParseQuery(string(raw)); err == nil {
			body.Token, body.Nonce = form.Get("token"), form.Get("nonce")
		}
	} else if err := json.Unmarshal(raw, &body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_json", "want {\"token\": \"…\", \"nonce\": \"…\"}")
		return
	}
	if body.Token == "" || body.Nonce == "" {
		writeError(w, http.StatusBadRequest, "missing_field", "token and nonce are required")
		return
	}
	pass, exp, err := g.challenges.solve(r.Context(), body.Token, body.Nonce)
	if err != nil {
		writeError(w, http.StatusForbidden, "challenge_failed", err.Error())
		return
	}
	_, secure := p.client(r)
	c := http.Cookie{Name: PassCookie, Value: pass, Path: "/", MaxAge: int(exp.Sub(g.challenges.now()) / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure}
	w.Header().Add("Set-Cookie", c.String())
	writeJSON(w, http.StatusOK, map[string]any{"passed": true, "pass": pass, "expires_at": exp.UTC().Format(time.RFC3339)})
}
