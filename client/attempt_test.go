package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/guardian-sec/guardian/client"
)

// scripted answers each check with the next of checks (the last one
// again once they run out), and every report as recorded, or with a 500 and
// report when it is not empty.
func scripted(checks []string, report string) http.HandlerFunc {
	var mu sync.Mutex
	n := 0
	return func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/v1/report" {
			var rep struct{ Outcome string }
			_ = json.NewDecoder(r.Body).Decode(&rep)
			switch {
			case report == "" && rep.Outcome == "success":
				answer(200, `{"recorded":true,"device_token":"dev-1"}`)(w, r)
			case report == "":
				answer(200, `{"recorded":true}`)(w, r)
			default:
				answer(500, report)(w, r)
			}
			return
		}
		a := checks[min(n, len(checks)-1)]
		n++
		status := 200
		if strings.Contains(a, `"slow"`) || strings.Contains(a, `"block"`) {
			status = 429
		}
		if strings.Contains(a, `"error"`) {
			status = 400
		}
		answer(status, a)(w, r)
	}
}

const (
	allowAt1     = `{"decision":"allow","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}`
	challengeAt1 = `{"decision":"challenge","rule":"spray","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}`
	challengeAt2 = `{"decision":"challenge","rule":"spray","attempt_id":"at-2","degraded":false,"trust":"challenge","limits":[],"shadow":[]}`
	allowAt2     = `{"decision":"allow","attempt_id":"at-2","degraded":false,"trust":"challenge","limits":[],"shadow":[]}`
	slowAt       = `{"decision":"slow","rule":"login-account","retry_after_ms":1000,"degraded":false,"limits":[],"shadow":[]}`
	unknownField = `{"error":{"code":"unknown_field","message":"challenge_passed: unknown field"}}`
	badIP        = `{"error":{"code":"invalid_ip","message":"ip: bad"}}`
)

// steps records what Attempt called, in order.
type steps struct {
	calls      []string
	passed, ok bool
	err        error
}

func (s *steps) challenge(_ context.Context, d client.Decision) (bool, error) {
	s.calls = append(s.calls, "challenge "+d.Rule)
	return s.passed, s.err
}

func (s *steps) verify(context.Context) (bool, error) {
	s.calls = append(s.calls, "verify")
	return s.ok, s.err
}

func TestAttempt(t *testing.T) {
	tests := []struct {
		name    string
		checks  []string
		report  string // a 500 body, or "" for a recorded report
		req     client.CheckRequest
		steps   steps
		want    client.AttemptResult
		wantErr bool
		// wantCalls are the steps called; wantSent the requests guardian
		// received: each check's challenge_passed, or report's outcome.
		wantCalls, wantSent []string
	}{
		{name: "allowed, right password", checks: []string{allowAt1}, steps: steps{ok: true},
			want:      client.AttemptResult{Verified: true, OK: true, DeviceToken: "dev-1"},
			wantCalls: []string{"verify"}, wantSent: []string{"check", "report at-1 success"}},
		{name: "allowed, wrong password", checks: []string{allowAt1},
			want:      client.AttemptResult{Verified: true},
			wantCalls: []string{"verify"}, wantSent: []string{"check", "report at-1 failure"}},
		{name: "slowed: nothing verified, nothing reported", checks: []string{slowAt}, steps: steps{passed: true, ok: true},
			want:     client.AttemptResult{},
			wantSent: []string{"check"}},
		{name: "challenged, not passed: nothing verified, nothing checked again", checks: []string{challengeAt1}, steps: steps{ok: true},
			want:      client.AttemptResult{},
			wantCalls: []string{"challenge spray"}, wantSent: []string{"check"}},
		{name: "challenged, passed: checked again, then verified", checks: []string{challengeAt1, challengeAt2}, steps: steps{passed: true, ok: true},
			want:      client.AttemptResult{Verified: true, OK: true, DeviceToken: "dev-1"},
			wantCalls: []string{"challenge spray", "verify"}, wantSent: []string{"check", "check challenge_passed", "report at-2 success"}},
		{name: "challenged, passed, the re-check allowed", checks: []string{challengeAt1, allowAt2}, steps: steps{passed: true},
			want:      client.AttemptResult{Verified: true},
			wantCalls: []string{"challenge spray", "verify"}, wantSent: []string{"check", "check challenge_passed", "report at-2 failure"}},
		{name: "challenged, passed, the re-check slowed", checks: []string{challengeAt1, slowAt}, steps: steps{passed: true, ok: true},
			want:      client.AttemptResult{},
			wantCalls: []string{"challenge spray"}, wantSent: []string{"check", "check challenge_passed"}},
		{name: "a guardian that does not know challenge_passed: the first attempt goes ahead", checks: []string{challengeAt1, unknownField},
			steps:     steps{passed: true, ok: true},
			want:      client.AttemptResult{Verified: true, OK: true, DeviceToken: "dev-1"},
			wantCalls: []string{"challenge spray", "verify"}, wantSent: []string{"check", "check challenge_passed", "report at-1 success"}},
		{name: "passed before: a challenge goes ahead without asking again", checks: []string{challengeAt2},
			req: client.CheckRequest{ChallengePassed: true}, steps: steps{ok: true},
			want:      client.AttemptResult{Verified: true, OK: true, DeviceToken: "dev-1"},
			wantCalls: []string{"verify"}, wantSent: []string{"check challenge_passed", "report at-2 success"}},
		{name: "a refused check: nothing verified", checks: []string{badIP}, steps: steps{ok: true}, wantErr: true,
			wantSent: []string{"check"}},
		{name: "a failing challenge: nothing verified", checks: []string{challengeAt1}, steps: steps{passed: true, err: errors.New("captcha service down")},
			wantErr: true, wantCalls: []string{"challenge spray"}, wantSent: []string{"check"}},
		{name: "a failing verify: nothing reported", checks: []string{allowAt1}, steps: steps{err: errors.New("user store down")},
			want: client.AttemptResult{Verified: true}, wantErr: true, wantCalls: []string{"verify"}, wantSent: []string{"check"}},
		{name: "a lost report: verified all the same", checks: []string{allowAt1}, report: `{}`, steps: steps{ok: true},
			want:      client.AttemptResult{Verified: true, OK: true},
			wantCalls: []string{"verify"}, wantSent: []string{"check", "report at-1 success"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGuardian(t, scripted(tt.checks, tt.report))
			c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed})
			req := login
			req.ChallengePassed = tt.req.ChallengePassed
			s := tt.steps
			got, err := c.Attempt(t.Context(), req, s.challenge, s.verify)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Attempt() error = %v, want error %v", err, tt.wantErr)
			}
			if tt.report != "" && !errors.Is(got.ReportErr, client.ErrUnavailable) {
				t.Errorf("ReportErr = %v, want the lost report", got.ReportErr)
			}
			got.ReportErr = nil
			proceeds := got.Decision.Proceed()
			got.Decision = client.Decision{} // what it decided shows in wantSent
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Attempt() = %+v, want %+v", got, tt.want)
			}
			if got.Verified && !proceeds {
				t.Errorf("verified on a decision that does not proceed")
			}
			if !reflect.DeepEqual(s.calls, tt.wantCalls) {
				t.Errorf("steps called %q, want %q", s.calls, tt.wantCalls)
			}
			var sent []string
			for _, r := range g.received() {
				switch r.path {
				case "/v1/check":
					if r.body["challenge_passed"] == true {
						sent = append(sent, "check challenge_passed")
					} else {
						sent = append(sent, "check")
					}
				case "/v1/report":
					sent = append(sent, "report "+r.body["attempt_id"].(string)+" "+r.body["outcome"].(string))
				}
			}
			if !reflect.DeepEqual(sent, tt.wantSent) {
				t.Errorf("guardian received %q, want %q", sent, tt.wantSent)
			}
		})
	}
}

// TestAttemptNeedsBothSteps: without an answer to a challenge, or without a
// verification, Attempt refuses before it asks guardian anything.
func TestAttemptNeedsBothSteps(t *testing.T) {
	g := newFakeGuardian(t, scripted([]string{allowAt1}, ""))
	c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed})
	var s steps
	for name, call := range map[string]func() (client.AttemptResult, error){
		"no challenge": func() (client.AttemptResult, error) { return c.Attempt(t.Context(), login, nil, s.verify) },
		"no verify":    func() (client.AttemptResult, error) { return c.Attempt(t.Context(), login, s.challenge, nil) },
	} {
		if res, err := call(); !errors.Is(err, client.ErrConfig) || res.Verified {
			t.Errorf("%s: Attempt() = %+v, %v; want ErrConfig, nothing verified", name, res, err)
		}
	}
	if n := len(g.received()); n != 0 || len(s.calls) != 0 {
		t.Errorf("guardian received %d requests and %q were called, want none", n, s.calls)
	}
}

// TestAttemptReportsAfterTheCallerLeft: an end user who goes away once
// the password was verified does not lose the report.
func TestAttemptReportsAfterTheCallerLeft(t *testing.T) {
	g := newFakeGuardian(t, scripted([]string{allowAt1}, ""))
	c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed})
	ctx, cancel := context.WithCancel(t.Context())
	res, err := c.Attempt(ctx, login, (&steps{}).challenge, func(context.Context) (bool, error) {
		cancel() // the end user hangs up while the password is checked
		return false, nil
	})
	if err != nil || res.ReportErr != nil {
		t.Fatalf("Attempt() = %+v, %v; want the failure reported", res, err)
	}
	if reqs := g.received(); len(reqs) != 2 || reqs[1].path != "/v1/report" {
		t.Fatalf("guardian received %+v, want a check and a report", reqs)
	}
}
