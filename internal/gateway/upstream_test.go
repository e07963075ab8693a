package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestHTTPSUpstreamKeptAlive: an https upstream, reached over one kept-alive
// connection for many requests.
func TestHTTPSUpstreamKeptAlive(t *testing.T) {
	var conns atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, ok := r.BasicAuth(); ok {
			w.WriteHeader(http.StatusMultiStatus)
		}
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.StartTLS()
	defer up.Close()
	f, err := Parse("t.yaml", []byte(proxyFile(up.URL, "enforce", "")))
	if err != nil {
		t.Fatal(err)
	}
	eng, key := newTestEngine(t)
	// The test server's certificate is its own: its client's transport
	// trusts it, as the system roots trust a real upstream's.
	tr := up.Client().Transport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	gw, err := New(Config{File: f, Decider: eng, ChallengeKey: key.Derive("c"), FingerprintKey: key.Derive("f"), Transport: tr,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		r := httptest.NewRequest("PROPFIND", "/dav/", nil)
		r.RemoteAddr = "203.0.113.9:1234"
		r.SetBasicAuth(fmt.Sprintf("user%d", i), "pw")
		w := httptest.NewRecorder()
		gw.Handler(0).ServeHTTP(w, r)
		if w.Code != http.StatusMultiStatus {
			t.Fatalf("request %d: got %d, want the https upstream's 207", i, w.Code)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("the upstream saw %d connections for 10 requests, want 1 kept alive", got)
	}
}

// TestDeviceCookieSecureBehindATrustedTLSProxy: the device cookie is Secure
// when a trusted proxy says the client's connection was https, and only
// then.
func TestDeviceCookieSecureBehindATrustedTLSProxy(t *testing.T) {
	g := newTestGateway(t, "enforce", "")
	for _, tt := range []struct {
		peer   string
		secure bool
	}{{"10.1.2.3:1", true}, {"203.0.113.9:1", false}} {
		r := httptest.NewRequest("PROPFIND", "/dav/", nil)
		r.RemoteAddr = tt.peer
		r.Header.Set("X-Forwarded-Proto", "https")
		r.Header.Set("X-Forwarded-For", "198.51.100.20")
		r.SetBasicAuth("alice", "right")
		w := httptest.NewRecorder()
		g.gw.Handler(0).ServeHTTP(w, r)
		c := cookieOf(w.Result(), DeviceCookie)
		if c == nil || c.Secure != tt.secure {
			t.Errorf("peer %s: device cookie %+v, want Secure %v", tt.peer, c, tt.secure)
		}
	}
}
