package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/guardian-sec/guardian/internal/rules"
)

// cspDirectives parses a Content-Security-Policy header into its
// directives.
func cspDirectives(h string) map[string][]string {
	out := map[string][]string{}
	for _, d := range strings.Split(h, ";") {
		f := strings.Fields(d)
		if len(f) > 0 {
			out[f[0]] = f[1:]
		}
	}
	return out
}

func TestConsoleIsServedUnderAStrictPolicy(t *testing.T) {
	api := newTestAPI(t, &fakeDecider{set: rules.Default()}, nil)
	for _, path := range []string{"/console", "/console/console.js", "/console/console.css", "/console/icon.svg"} {
		t.Run(path, func(t *testing.T) {
			// No token: the page loads, and asks for one.
			_, rec := api.do("GET", path, "", "")
			if rec.Code != http.StatusOK || rec.Body.Len() == 0 {
				t.Fatalf("status %d, %d bytes; want 200 and the file", rec.Code, rec.Body.Len())
			}
			h := rec.Header()
			csp := cspDirectives(h.Get("Content-Security-Policy"))
			want := map[string]string{
				"default-src":     "'self'",
				"script-src":      "'self'",
				"style-src":       "'self'",
				"connect-src":     "'self'",
				"frame-ancestors": "'none'",
				"form-action":     "'none'",
				"base-uri":        "'none'",
				"object-src":      "'none'",
			}
			for name, v := range want {
				if got := strings.Join(csp[name], " "); got != v {
					t.Errorf("Content-Security-Policy %s = %q, want %q", name, got, v)
				}
			}
			for name, sources := range csp {
				for _, s := range sources {
					if s != "'self'" && s != "'none'" {
						t.Errorf("Content-Security-Policy %s allows %s: only 'self' or 'none' are wanted", name, s)
					}
				}
			}
			for k, v := range map[string]string{"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"} {
				if h.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, h.Get(k), v)
				}
			}
			if c := h.Values("Set-Cookie"); len(c) > 0 {
				t.Errorf("Set-Cookie %q: the console sets no cookie", c)
			}
		})
	}
}

func TestConsoleNeverCarriesAToken(t *testing.T) {
	api := newTestAPI(t, &fakeDecider{set: rules.Default()}, nil)
	// Loaded with a token in the header (a browser never sends one, but a
	// proxy might), the page still is the same bytes: nothing reflects it.
	_, bare := api.do("GET", "/console", "", "")
	_, with := api.do("GET", "/console", "", api.admin)
	if bare.Body.String() != with.Body.String() {
		t.Error("the page differs when loaded with a token")
	}
	if strings.Contains(with.Body.String(), api.admin) || strings.Contains(strings.Join(with.Header().Values("Set-Cookie"), ""), api.admin) {
		t.Error("the page or its cookies carry the token")
	}
	// The script keeps the token in sessionStorage and sends it only as a
	// header: never in localStorage, a cookie or a query string.
	_, js := api.do("GET", "/console/console.js", "", "")
	src := js.Body.String()
	for _, bad := range []string{"localStorage", "document.cookie", "?token", "&token", "access_token", "innerHTML", "eval("} {
		if strings.Contains(src, bad) {
			t.Errorf("console.js uses %q", bad)
		}
	}
	if !strings.Contains(src, "sessionStorage") || !strings.Contains(src, `"Authorization": "Bearer " + token()`) {
		t.Error("console.js does not keep the token in sessionStorage and send it as a bearer header")
	}
}

func TestExplainAnswersTheRulesInForce(t *testing.T) {
	api := newTestAPI(t, &fakeDecider{set: rules.Default()}, nil)
	_, rec := api.do("GET", "/v1/rules/explain", "", api.admin)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d %s", rec.Code, rec.Body.Bytes())
	}
	var got struct{ Rules []rules.Bound }
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := rules.Default().Explain()
	if len(got.Rules) != len(want) {
		t.Fatalf("rules %+v, want %+v", got.Rules, want)
	}
	for i := range want {
		if got.Rules[i] != want[i] {
			t.Errorf("rule %d = %+v, want %+v", i, got.Rules[i], want[i])
		}
	}
	if _, rec := api.do("GET", "/v1/rules/explain", "", api.check); rec.Code != http.StatusForbidden {
		t.Errorf("check scope: status %d, want 403", rec.Code)
	}
}
