package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// instance is a running guardian for one test, with tokens of both scopes.
type instance struct {
	srv        *server.Server
	base       string
	rulesPath  string
	checkToken string
	adminToken string
}

// testKey is the signing key every test instance shares.
var testKey = func() secret.Key {
	k, err := secret.New([]byte("guardian-test-signing-key-0123456789"))
	if err != nil {
		panic(err)
	}
	return k
}()

// start runs an instance on a free loopback port with the given rules file
// contents ("" for the built-in rules), stopped when the test ends.
func start(t *testing.T, rulesYAML string) *instance {
	t.Helper()
	return startConfig(t, rulesYAML, server.Config{})
}

// startConfig is start on cfg, whose address and signing key it sets.
func startConfig(t *testing.T, rulesYAML string, cfg server.Config) *instance {
	t.Helper()
	cfg.Addr, cfg.SigningKey = "127.0.0.1:0", testKey
	inst := &instance{}
	if rulesYAML != "" {
		inst.rulesPath = filepath.Join(t.TempDir(), "rules.yaml")
		writeFile(t, inst.rulesPath, rulesYAML)
		cfg.RulesPath = inst.rulesPath
	}
	srv := serve(t, cfg)
	inst.srv = srv
	inst.base = "http://" + srv.Addr()
	svc := tokens.NewService(testKey)
	inst.checkToken = mustToken(t, svc, tokens.ScopeCheck)
	inst.adminToken = mustToken(t, svc, tokens.ScopeAdmin)
	return inst
}

// serve starts a server on cfg and shuts it down when t ends.
func serve(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		// Connections the client dialed but never used count as busy to
		// Shutdown for five seconds; close them first.
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return srv
}

func mustToken(t *testing.T, svc *tokens.Service, scope tokens.Scope) string {
	t.Helper()
	tok, err := svc.Issue(scope, "test-"+string(scope), time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// response is one HTTP answer, its body decoded as a JSON object.
type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

// do sends method path with body (a string sent as is, or a value encoded as
// JSON) and the given token ("" for none).
func (in *instance) do(t *testing.T, method, path, token string, body any) response {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, in.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &out.body); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, path, raw, err)
		}
	}
	return out
}

func (in *instance) check(t *testing.T, body any) response {
	t.Helper()
	return in.do(t, http.MethodPost, "/v1/check", in.checkToken, body)
}

func (in *instance) report(t *testing.T, attemptID, outcome string) response {
	t.Helper()
	return in.do(t, http.MethodPost, "/v1/report", in.checkToken, map[string]string{"attempt_id": attemptID, "outcome": outcome})
}

// errorCode is the contract error code of r, failing the test if r is not
// an error in the contract's shape.
func errorCode(t *testing.T, r response) string {
	t.Helper()
	e, ok := r.body["error"].(map[string]any)
	if !ok {
		t.Fatalf("status %d, body %s: not an error in the contract's shape", r.status, r.raw)
	}
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	if code == "" || msg == "" {
		t.Fatalf("error without code or message: %s", r.raw)
	}
	return code
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// limit returns the entry of rule in r's limits, failing if absent.
func limit(t *testing.T, r response, rule string) map[string]any {
	t.Helper()
	ls, _ := r.body["limits"].([]any)
	for _, l := range ls {
		m, _ := l.(map[string]any)
		if m["rule"] == rule {
			return m
		}
	}
	t.Fatalf("no limit for rule %s in %s", rule, r.raw)
	return nil
}

func mustKey(t *testing.T, s string) secret.Key {
	t.Helper()
	k, err := secret.New([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return k
}
