package server_test

import (
	"net/http"
	"testing"

	"github.com/guardian-sec/guardian/internal/server"
)

func TestPprofIsServedApartFromTheAPI(t *testing.T) {
	srv := serve(t, server.Config{Addr: "127.0.0.1:0", PprofAddr: "127.0.0.1:0", SigningKey: testKey})
	get := func(addr string) int {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := get(srv.PprofAddr()); got != http.StatusOK {
		t.Fatalf("profiles on the pprof address: %d, want 200", got)
	}
	if got := get(srv.Addr()); got != http.StatusNotFound {
		t.Fatalf("profiles on the API address: %d, want 404", got)
	}
}

func TestPprofIsOffByDefault(t *testing.T) {
	in := start(t, "")
	if got := in.srv.PprofAddr(); got != "" {
		t.Fatalf("PprofAddr = %q without --pprof, want none", got)
	}
}
