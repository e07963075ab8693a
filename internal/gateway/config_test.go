package gateway

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestParseExample(t *testing.T) {
	f, err := Load("testdata/caldav.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(f.Proxies), 2; got != want {
		t.Fatalf("proxies: got %d, want %d", got, want)
	}
	p := f.Proxies[0]
	if p.Name != "127.0.0.1:8081" || p.Upstream.String() != "http://127.0.0.1:5232" || p.Mode != Enforce {
		t.Errorf("proxy 0: got %+v", p)
	}
	if got := len(p.TrustedProxies); got != 2 || p.TrustedProxies[1].String() != "192.0.2.1/32" {
		t.Errorf("trusted_proxies: got %v", p.TrustedProxies)
	}
	r := p.Routes[0]
	if r.PathPrefix != "/" || r.Methods != nil || r.Account != (Extractor{BasicAuth, "user"}) || r.Secret != (Extractor{BasicAuth, "password"}) {
		t.Errorf("route caldav: got %+v", r)
	}
	if r.Challenge != (Challenge{Type: ProofOfWork, Difficulty: 18}) {
		t.Errorf("challenge: got %+v", r.Challenge)
	}
	w := f.Proxies[1]
	if w.Mode != Observe {
		t.Errorf("mode: got %s, want observe", w.Mode)
	}
	wr := w.Routes[0]
	if wr.Path != "/doku.php" || len(wr.Methods) != 1 || wr.Methods[0] != "POST" || wr.Breached != BreachedHeader {
		t.Errorf("route wiki-login: got %+v", wr)
	}
	if m := wr.Failure[0]; len(m.Status) != 1 || m.Status[0] != 403 || !m.HasBodyContains {
		t.Errorf("failure: got %+v", m)
	}
	if m := wr.Success[0]; m.SetCookie != "DW*" {
		t.Errorf("success: got %+v", m)
	}
	if wr.Challenge != (Challenge{Type: StatusOnly, Status: 403}) {
		t.Errorf("challenge: got %+v", wr.Challenge)
	}
	if got := w.Routes[1].Account; got != (Extractor{JSON, "/user/e~1mail"}) {
		t.Errorf("json account: got %+v", got)
	}
}

func TestParseErrorsHaveLines(t *testing.T) {
	tests := []struct {
		name, file string
		want       []string
	}{
		{"empty", "", []string{"x.yaml:1: empty proxy file"}},
		{"syntax", "version: 1\nproxies: [\n", []string{"x.yaml:2: invalid YAML"}},
		{"version", "version: 2\nproxies: []\n", []string{"x.yaml:1: version: got 2, want 1", "x.yaml:2: proxies: got a list"}},
		{"unknown field", "version: 1\nproxys: []\n", []string{`x.yaml:2: unknown field "proxys" at top level`, "x.yaml:1: proxies: required"}},
		{"proxy fields", `version: 1
proxies:
  - listen: nowhere
    upstream: ftp://x
    mode: loud
    trusted_proxies: [10.0.0.0/33]
    routes:
      - name: Bad_Name
        match: {path: login, methods: [POST, "P O"]}
        flow: otp_send
        account: {cookie: sid}
        secret: {basic_auth: user}
        outcome:
          failure: [{status: [99]}]
        challenge: {type: proof_of_work, difficulty: 40}
        breached: {on_login: shout}
`, []string{
			`x.yaml:3: listen: "nowhere" is not host:port`,
			`x.yaml:4: upstream: "ftp://x" is not an http:// or https:// URL`,
			`x.yaml:5: mode: got "loud"`,
			`x.yaml:6: trusted_proxies: "10.0.0.0/33" is not a network`,
			`x.yaml:8: name: "Bad_Name"`,
			`x.yaml:9: match: path: "login" does not start with /`,
			`x.yaml:9: match: methods: "P O" is not a method`,
			`x.yaml:10: flow: got "otp_send"`,
			`x.yaml:11: account: unknown source "cookie"`,
			`x.yaml:12: secret: basic_auth: got "user", want password`,
			`x.yaml:13: outcome: success: required`,
			`x.yaml:14: outcome: failure: status: 99 is not an HTTP status`,
			`x.yaml:15: challenge: difficulty: got 40`,
			`x.yaml:16: breached: on_login: got "shout"`,
		}},
		{"tenant", `version: 1
proxies:
  - listen: :8081
    upstream: http://a
    tenant: Acme_Corp
    routes: [{name: r, match: {path: /}, flow: login, account: {header: X-User}, outcome: {failure: [{status: 401}], success: [{status: 200}]}}]
  - listen: :8082
    upstream: http://b
    tenant: [acme]
    routes: [{name: r, match: {path: /}, flow: login, account: {header: X-User}, outcome: {failure: [{status: 401}], success: [{status: 200}]}}]
`, []string{
			`x.yaml:5: tenant: keys: invalid tenant: "Acme_Corp"`,
			"x.yaml:9: tenant: got a list",
		}},
		{"duplicates", `version: 1
proxies:
  - listen: :8081
    upstream: http://a
    routes:
      - {name: r, match: {path_prefix: /}, flow: login, account: {header: X-User}, outcome: {failure: [{status: 401}], success: [{status: 200}]}}
      - {name: r, match: {path: /x, path_prefix: /}, flow: login, account: {json: user}, outcome: {failure: [{status: 401}], success: [{status: 200}]}, breached: {on_login: block}}
  - listen: :8081
    upstream: http://b
    routes: []
`, []string{
			`x.yaml:7: name: "r" is the name of the route at line 6 too`,
			"x.yaml:7: match: want exactly one of path and path_prefix",
			`x.yaml:7: account: json: "user": a JSON pointer`,
			"x.yaml:7: breached: needs a secret",
			`x.yaml:8: listen: ":8081" is the listen address of the proxy at line 3 too`,
			"x.yaml:10: routes: got a list",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(tt.file))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			got := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("errors lack %q; got:\n%s", w, got)
				}
			}
			if n := strings.Count(got, "\n") + 1; n != len(tt.want) {
				t.Errorf("got %d errors, want %d:\n%s", n, len(tt.want), got)
			}
		})
	}
}

func TestParseTenant(t *testing.T) {
	f, err := Parse("x.yaml", []byte(`version: 1
proxies:
  - listen: :8081
    upstream: http://a
    tenant: acme
    routes: [{name: r, match: {path: /}, flow: login, account: {header: X-User}, outcome: {failure: [{status: 401}], success: [{status: 200}]}}]
  - listen: :8082
    upstream: http://b
    routes: [{name: r, match: {path: /}, flow: login, account: {header: X-User}, outcome: {failure: [{status: 401}], success: [{status: 200}]}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := f.Proxies[0].Tenant, f.Proxies[1].Tenant; a != "acme" || b != "" {
		t.Fatalf("tenants: got %q and %q, want acme and none", a, b)
	}
}

func TestSplitPointer(t *testing.T) {
	tests := []struct {
		ptr  string
		want []string
		ok   bool
	}{
		{"/user/email", []string{"user", "email"}, true},
		{"/a~1b/c~0d", []string{"a/b", "c~d"}, true},
		{"/~01", []string{"~1"}, true},
		{"/", []string{""}, true},
		{"user", nil, false},
		{"", nil, false},
		{"/a~2", nil, false},
		{"/a~", nil, false},
	}
	for _, tt := range tests {
		got, err := splitPointer(tt.ptr)
		if (err == nil) != tt.ok || strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("splitPointer(%q) = %q, %v; want %q, ok %v", tt.ptr, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	seed, err := os.ReadFile("testdata/caldav.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte("version: 1\nproxies: [{listen: ':1', upstream: 'http://a', routes: [{name: a}]}]\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.yaml", data)
		switch {
		case err == nil && file == nil:
			t.Fatal("no file and no error")
		case err != nil && !errors.Is(err, ErrInvalid):
			t.Fatalf("error that is not ErrInvalid: %v", err)
		case err != nil:
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("got %T, want a non-empty Errors", err)
			}
			for _, e := range es {
				if e.Line < 1 {
					t.Fatalf("error without a line: %v", e)
				}
			}
		default:
			for _, p := range file.Proxies {
				if p.Upstream == nil || len(p.Routes) == 0 {
					t.Fatalf("valid proxy without upstream or routes: %+v", p)
				}
			}
		}
	})
}
