package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/guardian-sec/guardian/client"
)

// standIn is a stand-in for guardian in these examples: it answers every
// check with decision and every report with a device token.
func standIn(status int, decision string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/report" {
			_, _ = io.WriteString(w, `{"recorded":true,"device_token":"dt-1"}`)
			return
		}
		if status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "41")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, decision)
	}))
}

func ExampleClient_Check() {
	guardian := standIn(http.StatusTooManyRequests, `{"decision":"slow","rule":"login-account","retry_after_ms":41000,
		"degraded":false,"limits":[{"rule":"login-account","remaining":0,"reset_ms":41000}],"shadow":[]}`)
	defer guardian.Close()

	c, err := client.New(client.Config{
		BaseURL:       guardian.URL,
		Tokens:        client.StaticToken("token from `guardian token --scope check`"),
		Timeout:       time.Second, // generous for an example; the 50ms default suits production
		OnUnavailable: client.Local,
	})
	if err != nil {
		panic(err)
	}
	d, err := c.Check(context.Background(), client.CheckRequest{
		Flow: client.FlowLogin, Account: "alice@example.com", IP: "203.0.113.7",
	})
	if err != nil {
		panic(err) // a refused request: a bug to fix, not a decision
	}
	fmt.Println(d.Action, d.Rule, d.RetryAfter, "proceed:", d.Action.Proceed())

	// The auth service verifies nothing and answers its end user.
	w := httptest.NewRecorder()
	client.Responder{OmitQuota: true}.Refuse(w, d)
	fmt.Println(w.Code, "Retry-After:", w.Header().Get("Retry-After"), w.Body)
	// Output:
	// slow login-account 41s proceed: false
	// 429 Retry-After: 41 {"error":"too_many_attempts","next":"wait"}
}

func ExampleClient_Report() {
	guardian := standIn(http.StatusOK, `{"decision":"allow","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}`)
	defer guardian.Close()

	c, err := client.New(client.Config{
		BaseURL: guardian.URL, Tokens: client.StaticToken("…"), Timeout: time.Second, OnUnavailable: client.FailClosed,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	d, err := c.Check(ctx, client.CheckRequest{Flow: client.FlowLogin, Account: "alice@example.com", IP: "203.0.113.7"})
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Action, d.AttemptID)

	passwordOK := true // the auth service verifies the password here
	outcome := client.Failure
	if passwordOK {
		outcome = client.Success
	}
	res, err := c.Report(ctx, d.AttemptID, outcome)
	if err != nil {
		// guardian counts an attempt it never heard about as a failure.
		fmt.Println("report lost:", err)
	}
	fmt.Println("device token for the cookie:", res.DeviceToken)
	// Output:
	// allow at-1
	// device token for the cookie: dt-1
}

// Each policy decides differently when guardian does not answer; New
// refuses a Config that names none.
func ExamplePolicy() {
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // nothing listens here any more

	_, err := client.New(client.Config{BaseURL: down.URL, Tokens: client.StaticToken("…")})
	fmt.Println(errors.Is(err, client.ErrNoPolicy))

	for _, p := range []client.Policy{client.FailClosed, client.FailOpen, client.Local} {
		c, err := client.New(client.Config{BaseURL: down.URL, Tokens: client.StaticToken("…"), OnUnavailable: p})
		if err != nil {
			panic(err)
		}
		d, err := c.Check(context.Background(), client.CheckRequest{Flow: client.FlowLogin, Account: "alice", IP: "203.0.113.7"})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s retry=%v unavailable=%v (%s) failed open=%d\n",
			p, d.Action, d.RetryAfter, d.Unavailable, d.Reason, c.Stats().FailedOpen)
	}
	// Output:
	// true
	// fail_closed: slow retry=1s unavailable=true (connection) failed open=0
	// fail_open: allow retry=0s unavailable=true (connection) failed open=1
	// local: allow retry=0s unavailable=true (connection) failed open=1
}

// With SlowAsInvalid, a slowed login answers exactly like a wrong password.
func ExampleResponder() {
	r := client.Responder{SlowAsInvalid: true}
	slowed := client.Decision{Action: client.Slow, Rule: "login-account", RetryAfter: 41 * time.Second}
	allowed := client.Decision{Action: client.Allow, AttemptID: "at-1"}

	w := httptest.NewRecorder()
	r.Refuse(w, slowed)
	fmt.Println(w.Code, w.Header().Get("Retry-After") == "", w.Body)

	w = httptest.NewRecorder()
	r.InvalidCredentials(w, allowed) // verified, and wrong
	fmt.Println(w.Code, w.Header().Get("Retry-After") == "", w.Body)
	// Output:
	// 401 true {"error":"invalid_credentials","next":"retry"}
	// 401 true {"error":"invalid_credentials","next":"retry"}
}
