package gateway

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// BenchmarkProxiedLogin is one basic-auth login through a proxy, a new
// account each time, allowed, forwarded to a loopback upstream and
// reported a success: the gateway's own cost beside the engine's (on the
// embedded store) and the HTTP client's.
func BenchmarkProxiedLogin(b *testing.B) {
	g := newTestGateway(b, "enforce", "")
	h := g.gw.Handler(0)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		r := httptest.NewRequest("PROPFIND", "/dav/", nil)
		r.RemoteAddr = "203.0.113.9:1234"
		r.SetBasicAuth("alice", "right")
		if i%2 == 0 {
			r.SetBasicAuth("user"+strconv.Itoa(i), "right")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusMultiStatus && w.Code != http.StatusUnauthorized {
			b.Fatalf("got %d", w.Code)
		}
	}
}

// BenchmarkProxiedLoginOnADevice is alice's basic-auth login from the
// browser her first login gave the guardian_device cookie: trusted,
// forwarded, reported a success.
func BenchmarkProxiedLoginOnADevice(b *testing.B) {
	g := newTestGateway(b, "enforce", "")
	h := g.gw.Handler(0)
	first := httptest.NewRequest("PROPFIND", "/dav/", nil)
	first.SetBasicAuth("alice", "right")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, first)
	var dev *http.Cookie
	for _, c := range w.Result().Cookies() {
		if c.Name == DeviceCookie {
			dev = c
		}
	}
	if dev == nil {
		b.Fatal("no device cookie after a success")
	}
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("PROPFIND", "/dav/", nil)
		r.RemoteAddr = "203.0.113.9:1234"
		r.SetBasicAuth("alice", "right")
		r.AddCookie(dev)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusMultiStatus {
			b.Fatalf("got %d", w.Code)
		}
	}
}

// BenchmarkPassThrough is a request no route matches: forwarded unchecked.
func BenchmarkPassThrough(b *testing.B) {
	g := newTestGateway(b, "enforce", "")
	h := g.gw.Handler(0)
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("GET", "/static/app.css", nil)
		r.RemoteAddr = "203.0.113.9:1234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			b.Fatalf("got %d", w.Code)
		}
	}
}
