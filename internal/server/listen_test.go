package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/testcert"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// TestAdminAddr serves the admin API and the console on a listener of
// their own: the main listener answers 404 for them in the contract's
// shape and keeps the decision API; the admin listener serves them and not
// the decision API.
func TestAdminAddr(t *testing.T) {
	in := startConfig(t, "", server.Config{AdminAddr: "127.0.0.1:0"})
	if in.srv.AdminAddr() == "" || in.srv.AdminAddr() == in.srv.Addr() {
		t.Fatalf("AdminAddr %q, Addr %q: want a listener of its own", in.srv.AdminAddr(), in.srv.Addr())
	}
	admin := &instance{srv: in.srv, base: "http://" + in.srv.AdminAddr()}
	check := map[string]any{"flow": "login", "ip": "192.0.2.20"}
	for _, tt := range []struct {
		method, path string
		body         any
		main, apart  int
	}{
		{"POST", "/v1/check", check, 200, 404},
		{"GET", "/v1/rules", nil, 404, 200},
		{"GET", "/v1/fleet", nil, 404, 200},
		{"GET", "/v1/accounts/status?account=alice", nil, 404, 200},
		{"POST", "/v1/accounts/status", map[string]any{"account": "alice"}, 404, 200},
		{"POST", "/v1/pseudonyms", map[string]any{"account": "alice"}, 404, 200},
		{"GET", "/v1/incident", nil, 404, 200},
		{"POST", "/v1/tokens/revoke", map[string]any{"jti": "abc"}, 404, 200},
		{"GET", "/console", nil, 404, 200},
		{"GET", "/healthz", nil, 200, 200},
		{"GET", "/metrics", nil, 200, 404},
	} {
		r := in.do(t, tt.method, tt.path, in.adminToken, tt.body)
		if r.status != tt.main {
			t.Errorf("main listener: %s %s = %d, want %d", tt.method, tt.path, r.status, tt.main)
		}
		if r.status == 404 && errorCode(t, r) != "not_found" {
			t.Errorf("main listener: %s %s: not the contract's not_found", tt.method, tt.path)
		}
		if got := admin.do(t, tt.method, tt.path, in.adminToken, tt.body).status; got != tt.apart {
			t.Errorf("admin listener: %s %s = %d, want %d", tt.method, tt.path, got, tt.apart)
		}
	}

	// Without --admin-addr one listener serves everything.
	one := start(t, "")
	if one.srv.AdminAddr() != "" {
		t.Errorf("AdminAddr %q without --admin-addr", one.srv.AdminAddr())
	}
	if r := one.do(t, "GET", "/v1/rules", one.adminToken, nil); r.status != 200 {
		t.Errorf("GET /v1/rules on the one listener: %d", r.status)
	}
}

// installPair copies c's server certificate and key to cert and key, each
// replaced by a rename.
func installPair(t *testing.T, c *testcert.Certs, cert, key string) {
	t.Helper()
	for from, to := range map[string]string{c.ServerCert: cert, c.ServerKey: key} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		replaceFile(t, to, string(b))
	}
}

// handshake dials addr over TLS trusting roots alone, and returns the
// error of the handshake.
func handshake(addr string, roots *x509.CertPool) error {
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"})
	if err != nil {
		return err
	}
	return conn.Close()
}

// TestTLSListeners serves TLS with a certificate of a test CA on the main
// and the admin listener, and on a listener of the tests' own built from
// Server.TLSConfig (as a gateway proxy's is). A new certificate is served to
// new connections after a reload (Hangup, what SIGHUP does) and after a
// change of the files alone, while a connection opened before keeps
// working; a pair that does not load is refused and the one in force stays.
func TestTLSListeners(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	first, second, third := testcert.New(t), testcert.New(t), testcert.New(t)
	installPair(t, first, cert, key)
	srv := serve(t, server.Config{Addr: "127.0.0.1:0", AdminAddr: "127.0.0.1:0", SigningKey: testKey, TLSCertFile: cert, TLSKeyFile: key})
	adminTok, err := tokens.NewService(testKey).Issue(tokens.ScopeAdmin, "ops", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	// A listener of the tests' own with the instance's TLS configuration.
	proxyLn, err := tls.Listen("tcp", "127.0.0.1:0", srv.TLSConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer proxyLn.Close()
	go func() {
		for {
			c, err := proxyLn.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	addrs := map[string]string{"main": srv.Addr(), "admin": srv.AdminAddr(), "proxy": proxyLn.Addr().String()}
	servedBy := func(when string, want *testcert.Certs, not ...*testcert.Certs) {
		t.Helper()
		for name, addr := range addrs {
			if err := handshake(addr, want.Pool(t)); err != nil {
				t.Errorf("%s: %s listener: a client trusting the expected CA: %v", when, name, err)
			}
			for _, n := range not {
				if err := handshake(addr, n.Pool(t)); err == nil {
					t.Errorf("%s: %s listener still serves a certificate it should not", when, name)
				}
			}
		}
	}
	servedBy("at start", first, second)

	// A client of the first CA keeps its connection open across reloads.
	kept := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: first.Pool(t)}}}
	defer kept.CloseIdleConnections()
	getVia := func(c *http.Client, url, token string) (status int, reused bool) {
		t.Helper()
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req = req.WithContext(httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body) // read to the end, so the connection is kept
		resp.Body.Close()
		return resp.StatusCode, reused
	}
	if status, _ := getVia(kept, "https://"+srv.AdminAddr()+"/v1/rules", adminTok); status != 200 {
		t.Fatalf("GET /v1/rules over TLS: %d", status)
	}
	// The listeners speak TLS only.
	if resp, err := http.Get("http://" + srv.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Error("the main listener answers plain HTTP")
		}
	}

	installPair(t, second, cert, key)
	srv.Hangup()
	servedBy("after SIGHUP", second, first)
	if status, reused := getVia(kept, "https://"+srv.AdminAddr()+"/v1/rules", adminTok); status != 200 || !reused {
		t.Errorf("the connection opened before the reload: %d, reused %v; want it kept", status, reused)
	}

	// A pair that does not match is refused; the pair in force stays.
	b, err := os.ReadFile(third.ServerCert)
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, cert, string(b)) // the key is still second's
	if err := srv.ReloadTLS("test"); err == nil {
		t.Error("a certificate without its key was taken")
	}
	servedBy("after a refused pair", second)

	// Now its key too, with no signal: the watch takes it.
	b, err = os.ReadFile(third.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	replaceFile(t, key, string(b))
	if !eventually(10*time.Second, func() bool { return handshake(srv.Addr(), third.Pool(t)) == nil }) {
		t.Fatal("the watch never took the certificate rewritten on disk")
	}
	servedBy("after the watch", third, second)
}

// TestTLSNeedsBothFiles: a certificate without its key, or the other way
// round, is refused at start.
func TestTLSNeedsBothFiles(t *testing.T) {
	c := testcert.New(t)
	for _, cfg := range []server.Config{
		{SigningKey: testKey, TLSCertFile: c.ServerCert},
		{SigningKey: testKey, TLSKeyFile: c.ServerKey},
		{SigningKey: testKey, TLSCertFile: c.ServerCert, TLSKeyFile: c.ClientKey},
	} {
		if _, err := server.New(cfg); err == nil || !strings.HasPrefix(err.Error(), "server: ") {
			t.Errorf("New(%+v) = %v, want refused", cfg, err)
		}
	}
}
