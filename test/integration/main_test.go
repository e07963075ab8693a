// Package integration runs guardian end to end: real instances in this
// process, serving HTTP on loopback ports, sharing a real Redis in a
// container (or a Redis Cluster of local processes).
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
	"github.com/guardian-sec/guardian/internal/tokens"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// signingKey is shared by every instance of a fleet, as in production.
var signingKey = func() secret.Key {
	k, err := secret.New([]byte("guardian-integration-signing-key-0123456789"))
	if err != nil {
		panic(err)
	}
	return k
}()

// instance is one running guardian.
type instance struct {
	srv  *server.Server
	base string
	// rulesPath is the rules file the instance watches, "" for none.
	rulesPath string
}

// fleetConfig describes instances to start.
type fleetConfig struct {
	redisURL  string
	rulesYAML string
	// storeTimeout defaults to a generous 2s: tests of exact sharing must
	// not fall back because a loaded CI machine was slow for 5ms.
	storeTimeout time.Duration
	fleetSize    int
	// now returns instance i's clock (default time.Now).
	now func(i int) func() time.Time
	// attemptTTL is --attempt-ttl (default 10m).
	attemptTTL time.Duration
	// logger receives every instance's logs (default slog.Default()).
	logger *slog.Logger
	// redis holds the Redis connection files (TLS, password).
	redis redisstore.Options
	// decisionLog, when set, receives every instance's decision log.
	decisionLog io.Writer
	// decisionLogs, when set, gives instance i a decision log of its own,
	// decisionLogs[i], in place of decisionLog.
	decisionLogs []io.Writer
	// keyFile returns instance i's signing key file (default none: every
	// instance signs with signingKey).
	keyFile func(i int) string
	// hashKey, when set, is every instance's hash key.
	hashKey secret.Key
	// breached is every instance's --breached filter file, "" for none.
	breached string
	// proxy is the proxy file (guardian serve --proxy) of instance 0, ""
	// for none; proxies, when set, are those of instances 0, 1, … instead.
	proxy   string
	proxies []string
	// webhookURLs and webhookSecretFile are every instance's webhooks.
	webhookURLs       []string
	webhookSecretFile string
}

// proxyOf returns the proxy file of instance i, "" for none.
func (cfg fleetConfig) proxyOf(i int) string {
	switch {
	case cfg.proxies != nil:
		if i < len(cfg.proxies) {
			return cfg.proxies[i]
		}
		return ""
	case i == 0:
		return cfg.proxy
	}
	return ""
}

// startFleet starts n instances on cfg, stopped when the test ends.
func startFleet(t *testing.T, n int, cfg fleetConfig) []*instance {
	t.Helper()
	var rulesPath string
	if cfg.rulesYAML != "" {
		rulesPath = filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(rulesPath, []byte(cfg.rulesYAML), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if cfg.storeTimeout == 0 {
		cfg.storeTimeout = 2 * time.Second
	}
	if cfg.fleetSize == 0 {
		cfg.fleetSize = n
	}
	out := make([]*instance, n)
	for i := range n {
		sc := server.Config{
			Addr:         "127.0.0.1:0",
			RulesPath:    rulesPath,
			RedisURL:     cfg.redisURL,
			SigningKey:   signingKey,
			StoreTimeout: cfg.storeTimeout,
			FleetSize:    cfg.fleetSize,
			AttemptTTL:   cfg.attemptTTL,
			Logger:       cfg.logger,
			Redis:        cfg.redis,
			BreachedPath: cfg.breached,

			WebhookURLs:       cfg.webhookURLs,
			WebhookSecretFile: cfg.webhookSecretFile,
		}
		if cfg.now != nil {
			sc.Now = cfg.now(i)
		}
		sc.DecisionLog = cfg.decisionLog
		if cfg.decisionLogs != nil {
			sc.DecisionLog = cfg.decisionLogs[i]
		}
		if cfg.keyFile != nil {
			sc.SigningKeyFile = cfg.keyFile(i)
		}
		sc.HashKey = cfg.hashKey
		if proxy := cfg.proxyOf(i); proxy != "" {
			sc.ProxyPath = filepath.Join(t.TempDir(), "proxy.yaml")
			if err := os.WriteFile(sc.ProxyPath, []byte(proxy), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		srv, err := server.New(sc)
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		if err := srv.Start(); err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		t.Cleanup(func() {
			client.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("instance %d shutdown: %v", i, err)
			}
		})
		out[i] = &instance{srv: srv, base: "http://" + srv.Addr(), rulesPath: rulesPath}
	}
	return out
}

var (
	client     = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}
	checkToken = mustToken(tokens.ScopeCheck)
	adminToken = mustToken(tokens.ScopeAdmin)
)

func mustToken(scope tokens.Scope) string {
	tok, err := tokens.NewService(signingKey).Issue(scope, "integration", 24*time.Hour, time.Now())
	if err != nil {
		panic(err)
	}
	return tok
}

// answer is one HTTP response with its JSON body.
type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (a answer) str(k string) string { s, _ := a.body[k].(string); return s }

func (a answer) degraded() bool { d, _ := a.body["degraded"].(bool); return d }

// limit returns rule's remaining units in a's limits, or -1.
func (a answer) remaining(rule string) int64 {
	ls, _ := a.body["limits"].([]any)
	for _, l := range ls {
		m, _ := l.(map[string]any)
		if m["rule"] == rule {
			f, _ := m["remaining"].(float64)
			return int64(f)
		}
	}
	return -1
}

// call sends a request; it returns an error instead of failing so that it
// can run in goroutines.
func (in *instance) call(method, path, token string, body any) (answer, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{}, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, in.base+path, r)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	a := answer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &a.body); err != nil {
			return a, fmt.Errorf("%s %s: body %q: %w", method, path, raw, err)
		}
	}
	return a, nil
}

func (in *instance) must(t *testing.T, method, path, token string, body any) answer {
	t.Helper()
	a, err := in.call(method, path, token, body)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (in *instance) check(t *testing.T, body map[string]any) answer {
	t.Helper()
	return in.must(t, "POST", "/v1/check", checkToken, body)
}

func (in *instance) report(t *testing.T, id, outcome string) answer {
	t.Helper()
	return in.must(t, "POST", "/v1/report", checkToken, map[string]any{"attempt_id": id, "outcome": outcome})
}
