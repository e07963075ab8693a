package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/guardian-sec/guardian/client"
)

// previousRelease is client/testdata/api-0.1.0.json: the request fields the
// previous release of guardian accepts.
type previousRelease struct {
	Release  string              `json:"release"`
	Requests map[string][]string `json:"requests"`
	Newer    []string            `json:"newer"`
}

func loadPreviousRelease(t *testing.T) previousRelease {
	t.Helper()
	b, err := os.ReadFile("testdata/api-0.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	var p previousRelease
	if err := json.Unmarshal(b, &p); err != nil || len(p.Requests) == 0 {
		t.Fatalf("testdata/api-0.1.0.json: %v", err)
	}
	return p
}

// oldGuardian stands in for the previous release: it refuses a request
// with a field it does not know, as that release does (400 unknown_field),
// and otherwise answers each check with decide's decision.
func oldGuardian(t *testing.T, p previousRelease, decide func(n int) string) (*httptest.Server, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var refused []string
	checks := 0
	g := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		mu.Lock()
		defer mu.Unlock()
		for k := range body {
			if !slices.Contains(p.Requests[r.Method+" "+r.URL.Path], k) {
				refused = append(refused, r.URL.Path+" "+k)
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, `{"error":{"code":"unknown_field","message":"%s: unknown field"}}`, k)
				return
			}
		}
		switch r.URL.Path {
		case "/v1/check":
			checks++
			_, _ = io.WriteString(w, decide(checks))
		case "/v1/report":
			_, _ = io.WriteString(w, `{"recorded":true,"device_token":"dev-old"}`)
		case "/v1/accounts/reset":
			_, _ = io.WriteString(w, `{"reset":true}`)
		}
	}))
	t.Cleanup(g.Close)
	return g, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(refused) }
}

// TestAgainstThePreviousRelease: during a rolling upgrade a client of this
// release meets the previous release's guardian. What it sends by default
// is never refused there; a newer field goes out only when the caller uses
// its feature.
func TestAgainstThePreviousRelease(t *testing.T) {
	p := loadPreviousRelease(t)
	allow := func(int) string { return allowAt1 }
	ctx := context.Background()

	t.Run("every call with what it sends by default", func(t *testing.T) {
		g, refused := oldGuardian(t, p, allow)
		c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed})
		for _, req := range []client.CheckRequest{
			{Flow: client.FlowLogin, Account: "alice@example.com", IP: "203.0.113.7", DeviceToken: "dev-1"},
			{Flow: client.FlowPasswordReset, Account: "alice@example.com", IP: "203.0.113.7"},
			{Flow: client.FlowOTPSend, Recipient: "+15550100000", IP: "203.0.113.7", Cost: 2},
			{Flow: client.FlowOTPVerify, Recipient: "+15550100000", IP: "203.0.113.7"},
		} {
			if d, err := c.Check(ctx, req); err != nil || d.Unavailable {
				t.Errorf("Check(%+v) = %+v, %v; want the old guardian's decision", req, d, err)
			}
		}
		if _, err := c.Report(ctx, "at-1", client.Success); err != nil {
			t.Errorf("Report: %v", err)
		}
		if err := c.ResetAccount(ctx, "alice@example.com"); err != nil {
			t.Errorf("ResetAccount: %v", err)
		}
		var s steps
		s.ok = true
		res, err := c.Attempt(ctx, login, s.challenge, s.verify)
		if err != nil || !res.Verified || res.DeviceToken != "dev-old" {
			t.Errorf("Attempt = %+v, %v; want verified and reported", res, err)
		}
		if r := refused(); len(r) != 0 {
			t.Errorf("the previous release refused %q", r)
		}
	})

	t.Run("a challenge passed: the previous release's contract", func(t *testing.T) {
		// 0.1.0 knows no challenge_passed: a challenge there means go ahead
		// once it is passed, with the challenged attempt.
		g, refused := oldGuardian(t, p, func(int) string { return challengeAt1 })
		c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed})
		s := steps{passed: true, ok: true}
		res, err := c.Attempt(ctx, login, s.challenge, s.verify)
		if err != nil || !res.Verified || !res.OK || res.Decision.AttemptID != "at-1" {
			t.Errorf("Attempt = %+v, %v; want the challenged attempt verified", res, err)
		}
		if r := refused(); !slices.Equal(r, []string{"/v1/check challenge_passed"}) {
			t.Errorf("refused %q, want the re-check's challenge_passed alone", r)
		}
	})

	t.Run("a newer field only when the caller uses it", func(t *testing.T) {
		for _, field := range p.Newer {
			if slices.Contains(p.Requests["POST /v1/check"], field) {
				t.Fatalf("%s is listed as newer than %s and as known to it", field, p.Release)
			}
		}
		g, refused := oldGuardian(t, p, allow)
		c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed})
		req := login
		req.SecretFingerprint = client.Fingerprint([]byte("k"), []byte("s"))
		if _, err := c.Check(ctx, req); err == nil {
			t.Error("a check with a fingerprint was accepted by a guardian that does not know the field")
		}
		req = login
		req.ChallengePassed = true
		_, _ = c.Check(ctx, req)
		req = login
		req.PasswordSHA1 = client.PasswordSHA1("hunter2")
		if _, err := c.Check(ctx, req); err == nil {
			t.Error("a check with a password's SHA-1 was accepted by a guardian that does not know the field")
		}
		got := refused()
		slices.Sort(got)
		var want []string
		for _, f := range p.Newer {
			want = append(want, "/v1/check "+f)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("refused %q, want %q: the fields sent when their feature is used", got, want)
		}
	})
}
