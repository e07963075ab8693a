package console_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/guardian-sec/guardian/internal/console"
)

func TestPageLoadsOnlyItsOwnAssets(t *testing.T) {
	page := string(console.Page().Body)
	refs := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page, -1)
	var got []string
	for _, m := range refs {
		got = append(got, m[1])
	}
	var want []string
	for _, a := range console.Assets() {
		want = append(want, "console/"+a)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("page references %q, want exactly %q", got, want)
	}
	for _, a := range console.Assets() {
		f, ok := console.Lookup(a)
		if !ok || len(f.Body) == 0 {
			t.Errorf("asset %s is not embedded", a)
		}
	}
	// No inline script or style for the policy to have to allow.
	for _, bad := range []string{"<script>", "<style", " style=", " onclick=", " onload=", "javascript:"} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q: the policy forbids inline code", bad)
		}
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		name   string
		wantOK bool
		wantCT string
	}{
		{"index.html", true, "text/html; charset=utf-8"},
		{"console.js", true, "text/javascript; charset=utf-8"},
		{"console.css", true, "text/css; charset=utf-8"},
		{"icon.svg", true, "image/svg+xml"},
		{"../console.go", false, ""},
		{"assets/console.js", false, ""},
		{"console.go", false, ""},
		{"missing.js", false, ""},
		{"", false, ""},
	}
	for _, tt := range tests {
		f, ok := console.Lookup(tt.name)
		if ok != tt.wantOK || f.ContentType != tt.wantCT {
			t.Errorf("Lookup(%q) = %q, %v; want %q, %v", tt.name, f.ContentType, ok, tt.wantCT, tt.wantOK)
		}
	}
}

func TestPolicyIsStrict(t *testing.T) {
	csp := console.ContentSecurityPolicy
	directives := map[string]string{}
	for _, d := range strings.Split(csp, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	want := map[string]string{
		"default-src":     "'self'",
		"script-src":      "'self'",
		"style-src":       "'self'",
		"connect-src":     "'self'",
		"object-src":      "'none'",
		"base-uri":        "'none'",
		"form-action":     "'none'",
		"frame-ancestors": "'none'",
	}
	for name, v := range want {
		if directives[name] != v {
			t.Errorf("%s = %q, want %q (policy %q)", name, directives[name], v, csp)
		}
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "*", "data:", "http:", "https:"} {
		if strings.Contains(csp, bad) {
			t.Errorf("policy allows %q: %q", bad, csp)
		}
	}
}
