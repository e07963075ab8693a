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
