package client_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/client"
)

// localClient is a Local-policy client whose guardian never answers.
func localClient(t *testing.T, limits client.LocalLimits, clk *clock) *client.Client {
	t.Helper()
	return newClient(t, client.Config{BaseURL: closedURL(t), OnUnavailable: client.Local, Local: limits, Now: clk.Now})
}

// clock is the Local policy's clock in these tests: only Set moves it.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.Set(t)
	return c
}

func (c *clock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }
func (c *clock) Now() time.Time  { return time.Unix(0, c.ns.Load()).UTC() }

var (
	t0  = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	t10 = t0.Add(10 * time.Second)
	t60 = t0.Add(time.Minute)
)

func req(flow client.Flow, account, ip string) client.CheckRequest {
	return client.CheckRequest{Flow: flow, Account: account, IP: ip}
}

func TestLocalPolicy(t *testing.T) {
	limits := client.LocalLimits{
		Account: client.Rate{Burst: 2, Every: time.Minute},
		IP:      client.Rate{Burst: 3, Every: 10 * time.Second},
	}
	steps := []struct {
		at        time.Time
		req       client.CheckRequest
		wantRule  string // "" for allow
		wantRetry time.Duration
	}{
		{t0, req(client.FlowLogin, "alice", "198.51.100.1"), "", 0},
		{t0, req(client.FlowLogin, "alice", "198.51.100.2"), "", 0},
		// The account's burst is spent: a third address does not help.
		{t0, req(client.FlowLogin, "alice", "198.51.100.3"), client.RuleLocalAccount, time.Minute},
		// Nor does another spelling of the account.
		{t0, req(client.FlowLogin, "  ALICE ", "198.51.100.4"), client.RuleLocalAccount, time.Minute},
		// Another flow has a budget of its own.
		{t0, req(client.FlowPasswordReset, "alice", "198.51.100.4"), "", 0},
		{t0, req(client.FlowLogin, "bob", "198.51.100.1"), "", 0},
		{t0, req(client.FlowLogin, "carol", "198.51.100.1"), "", 0},
		// The address's burst is spent, though dave never tried.
		{t0, req(client.FlowLogin, "dave", "198.51.100.1"), client.RuleLocalIP, 10 * time.Second},
		{t10, req(client.FlowLogin, "dave", "198.51.100.1"), "", 0},
		// The slowed checks spent nothing: 198.51.100.3 is untouched.
		{t10, req(client.FlowLogin, "erin", "198.51.100.3"), "", 0},
		{t10, req(client.FlowLogin, "frank", "198.51.100.3"), "", 0},
		{t10, req(client.FlowLogin, "grace", "198.51.100.3"), "", 0},
		{t60, req(client.FlowLogin, "alice", "198.51.100.5"), "", 0},
		{t60, req(client.FlowLogin, "alice", "198.51.100.5"), client.RuleLocalAccount, time.Minute},
		// IPv6 counts per /64, IPv4-mapped addresses as IPv4.
		{t0, req(client.FlowOTPVerify, "h1", "2001:db8::1"), "", 0},
		{t0, req(client.FlowOTPVerify, "h2", "2001:db8::ffff"), "", 0},
		{t0, req(client.FlowOTPVerify, "h3", "2001:db8:0:0:1::"), "", 0},
		{t0, req(client.FlowOTPVerify, "h4", "2001:db8::2"), client.RuleLocalIP, 10 * time.Second},
		{t0, req(client.FlowOTPVerify, "h5", "2001:db8:0:1::1"), "", 0},
		{t0, req(client.FlowOTPVerify, "m1", "203.0.113.9"), "", 0},
		{t0, req(client.FlowOTPVerify, "m2", "::ffff:203.0.113.9"), "", 0},
		{t0, req(client.FlowOTPVerify, "m3", "203.0.113.9"), "", 0},
		{t0, req(client.FlowOTPVerify, "m4", "::ffff:203.0.113.9"), client.RuleLocalIP, 10 * time.Second},
		// Without an account, the recipient is the account key.
		{t0, client.CheckRequest{Flow: client.FlowOTPSend, Recipient: "+15550100000", IP: "192.0.2.1"}, "", 0},
		{t0, client.CheckRequest{Flow: client.FlowOTPSend, Recipient: "+15550100000", IP: "192.0.2.2"}, "", 0},
		{t0, client.CheckRequest{Flow: client.FlowOTPSend, Recipient: "+15550100000", IP: "192.0.2.3"}, client.RuleLocalAccount, time.Minute},
	}
	clk := newClock(t0)
	c := localClient(t, limits, clk)
	for i, s := range steps {
		clk.Set(s.at)
		d, err := c.Check(t.Context(), s.req)
		if err != nil {
			t.Fatal(err)
		}
		wantAction := client.Allow
		if s.wantRule != "" {
			wantAction = client.Slow
		}
		if d.Action != wantAction || d.Rule != s.wantRule || d.RetryAfter != s.wantRetry || !d.Unavailable {
			t.Fatalf("step %d (%+v at %s) = %s %q %v unavailable=%v; want %s %q %v unavailable",
				i, s.req, s.at.Format(time.TimeOnly), d.Action, d.Rule, d.RetryAfter, d.Unavailable, wantAction, s.wantRule, s.wantRetry)
		}
		if (d.AttemptID != "") != (wantAction == client.Allow) {
			t.Fatalf("step %d: AttemptID = %q on %s", i, d.AttemptID, d.Action)
		}
	}
}

func TestLocalPolicySuccessGivesBack(t *testing.T) {
	limits := client.LocalLimits{Account: client.Rate{Burst: 2, Every: time.Minute}}
	tests := []struct {
		name     string
		outcomes []client.Outcome // "" leaves the attempt unreported
		want     []client.Action  // the decisions of len(outcomes)+1 checks
	}{
		{"successes", []client.Outcome{client.Success, client.Success, client.Success, client.Success},
			[]client.Action{client.Allow, client.Allow, client.Allow, client.Allow, client.Allow}},
		{"failures", []client.Outcome{client.Failure, client.Failure},
			[]client.Action{client.Allow, client.Allow, client.Slow}},
		{"unreported counts as failure", []client.Outcome{"", ""},
			[]client.Action{client.Allow, client.Allow, client.Slow}},
		{"a success gives back its own reservation only", []client.Outcome{client.Failure, client.Success, client.Failure},
			[]client.Action{client.Allow, client.Allow, client.Allow, client.Slow}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := localClient(t, limits, newClock(t0))
			var got []client.Action
			for i := range len(tt.want) {
				d, err := c.Check(t.Context(), req(client.FlowLogin, "alice", "198.51.100.1"))
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, d.Action)
				if i < len(tt.outcomes) && tt.outcomes[i] != "" {
					if res, err := c.Report(t.Context(), d.AttemptID, tt.outcomes[i]); err != nil || res != (client.ReportResult{}) {
						t.Fatalf("Report() = %+v, %v; want it settled locally", res, err)
					}
				}
			}
			if strings.Join(actions(got), " ") != strings.Join(actions(tt.want), " ") {
				t.Fatalf("decisions = %v, want %v", got, tt.want)
			}
		})
	}
}

func actions(as []client.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = string(a)
	}
	return out
}

func TestLocalPolicyReportsOnceOnly(t *testing.T) {
	c := localClient(t, client.LocalLimits{Account: client.Rate{Burst: 1, Every: time.Minute}}, newClock(t0))
	d, err := c.Check(t.Context(), req(client.FlowLogin, "alice", "198.51.100.1"))
	if err != nil {
		t.Fatal(err)
	}
	// A success reported twice gives back once: the second one must not
	// hand a fresh unit to whoever spends the first.
	for range 2 {
		if _, err := c.Report(t.Context(), d.AttemptID, client.Success); err != nil {
			t.Fatal(err)
		}
	}
	var got []client.Action
	for range 2 {
		d, err := c.Check(t.Context(), req(client.FlowLogin, "alice", "198.51.100.1"))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Action)
	}
	if want := []client.Action{client.Allow, client.Slow}; strings.Join(actions(got), " ") != strings.Join(actions(want), " ") {
		t.Fatalf("decisions after a doubled report = %v, want %v", got, want)
	}
}

func TestLocalPolicyIsBounded(t *testing.T) {
	clk := newClock(t0)
	c := localClient(t, client.LocalLimits{Account: client.Rate{Burst: 5, Every: time.Minute}, MaxKeys: 2}, clk)
	steps := []struct {
		at       time.Time
		account  string
		wantRule string
	}{
		{t0, "a", ""},
		{t0, "b", ""},
		// Full: a new account meets a wall, not an open door.
		{t0, "c", client.RuleLocalAccount},
		// Accounts already tracked keep working.
		{t0, "a", ""},
		// Once a and b are back to full, their room is reused.
		{t0.Add(2 * time.Minute), "c", ""},
	}
	for i, s := range steps {
		clk.Set(s.at)
		d, err := c.Check(t.Context(), req(client.FlowLogin, s.account, "198.51.100.1"))
		if err != nil {
			t.Fatal(err)
		}
		if d.Rule != s.wantRule {
			t.Fatalf("step %d: account %s decided %s by %q, want rule %q", i, s.account, d.Action, d.Rule, s.wantRule)
		}
	}
}

func TestLocalPolicyUnderConcurrency(t *testing.T) {
	const callers, budget = 50, 20
	c := localClient(t, client.LocalLimits{Account: client.Rate{Burst: budget, Every: time.Hour}, IP: client.Rate{Burst: 1000, Every: time.Second}}, newClock(t0))
	var wg sync.WaitGroup
	got := make([]client.Action, callers)
	for i := range callers {
		wg.Go(func() {
			d, err := c.Check(t.Context(), req(client.FlowLogin, "alice", "198.51.100.1"))
			if err != nil {
				t.Error(err)
			}
			got[i] = d.Action
		})
	}
	wg.Wait()
	allowed := 0
	for _, a := range got {
		if a == client.Allow {
			allowed++
		}
	}
	if allowed != budget {
		t.Fatalf("%d of %d concurrent checks allowed, want exactly %d", allowed, callers, budget)
	}
	if s := c.Stats(); s != (client.Stats{Checks: callers, Unavailable: callers, FailedOpen: budget}) {
		t.Fatalf("Stats() = %+v", s)
	}
}
