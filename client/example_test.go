package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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
		Timeout:       time.Second, // generous for an example; the 100ms default suits production
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
	fmt.Println(d.Action, d.Rule, d.RetryAfter, "proceed:", d.Proceed())

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

// A login handler: the whole flow of an attempt is one call, and a
// challenge is a function of its own that the handler must give.
func ExampleClient_Attempt() {
	guardian := sprayedGuardian() // stands in for guardian: this password is being sprayed
	defer guardian.Close()

	c, err := client.New(client.Config{
		BaseURL:       guardian.URL, // https://guardian.internal:8080
		Tokens:        client.StaticToken("token from `guardian token --scope check`"),
		OnUnavailable: client.Local, // required: what to decide when guardian does not answer
	})
	if err != nil {
		panic(err)
	}
	fingerprintKey := []byte("the auth service's own secret, 32 bytes or more") // never guardian's key
	responder := client.Responder{OmitQuota: true}

	login := func(w http.ResponseWriter, r *http.Request) {
		user, password := r.FormValue("username"), r.FormValue("password")
		req := client.CheckRequest{
			Flow: client.FlowLogin, Account: user, IP: clientIP(r),
			SecretFingerprint: client.Fingerprint(fingerprintKey, []byte(password)),
		}
		if device, err := r.Cookie("guardian_device"); err == nil {
			req.DeviceToken = device.Value
		}
		res, err := c.Attempt(r.Context(), req,
			func(ctx context.Context, d client.Decision) (bool, error) {
				return secondFactorOK(user, r.FormValue("code")), nil // or a CAPTCHA's answer
			},
			func(ctx context.Context) (bool, error) {
				return passwordOK(user, password), nil // called only when guardian lets it
			})
		switch {
		case err != nil: // a request guardian refused: a bug, nothing was verified
			http.Error(w, "try again later", http.StatusInternalServerError)
		case !res.Verified: // slowed, blocked, or a challenge not passed
			responder.Refuse(w, res.Decision)
		case !res.OK:
			responder.InvalidCredentials(w, res.Decision)
		default:
			http.SetCookie(w, &http.Cookie{Name: "guardian_device", Value: res.DeviceToken,
				HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
			fmt.Fprintln(w, "welcome,", user)
		}
	}

	for _, form := range []string{
		"username=alice&password=correct+horse",             // challenged, no second factor yet
		"username=alice&password=correct+horse&code=424242", // the challenge passed: verified
	} {
		w := httptest.NewRecorder()
		login(w, httptest.NewRequest(http.MethodPost, "/login?"+form, nil))
		fmt.Println(w.Code, strings.TrimSpace(w.Body.String()))
	}
	// Output:
	// 401 {"error":"second_factor_required","next":"second_factor"}
	// 200 welcome, alice
}

// sprayedGuardian stands in for guardian while a password is being sprayed:
// it challenges every check (login-secret-spray), and a success report
// returns a device token.
func sprayedGuardian() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/report" {
			_, _ = io.WriteString(w, `{"recorded":true,"device_token":"dt-1"}`)
			return
		}
		var check struct {
			ChallengePassed bool `json:"challenge_passed"`
		}
		_ = json.NewDecoder(r.Body).Decode(&check)
		trust := "none"
		if check.ChallengePassed {
			trust = "challenge"
		}
		_, _ = io.WriteString(w, `{"decision":"challenge","rule":"login-secret-spray","attempt_id":"at-1",
			"degraded":false,"trust":"`+trust+`","limits":[],"shadow":[]}`)
	}))
}

// The auth service's own: its address of the end user, its second factor
// and its password check.
func clientIP(r *http.Request) string {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	return host
}

func secondFactorOK(user, code string) bool { return user == "alice" && code == "424242" }

func passwordOK(user, password string) bool { return user == "alice" && password == "correct horse" }

// A challenge lets an attempt go ahead only once it was passed, and the
// attempt checked again with ChallengePassed: Client.Attempt does both.
func ExampleDecision_Proceed() {
	for _, d := range []client.Decision{
		{Action: client.Allow},
		{Action: client.Challenge, Rule: "login-global-failures"},
		{Action: client.Challenge, Rule: "login-secret-spray", ChallengePassed: true},
		{Action: client.Slow, Rule: "login-account"},
	} {
		fmt.Println(d.Action, d.ChallengePassed, d.Proceed())
	}
	// Output:
	// allow false true
	// challenge false false
	// challenge true true
	// slow false false
}

// A password change: a new password that appeared in a breach is refused
// before it is stored, and guardian not able to say is "unknown", never
// "not breached".
func ExampleClient_CheckPassword() {
	guardian := breachedGuardian() // stands in for guardian serve --breached: its filter holds hunter2
	defer guardian.Close()

	c, err := client.New(client.Config{
		BaseURL:       guardian.URL, // https://guardian.internal:8080
		Tokens:        client.StaticToken("token from `guardian token --scope check`"),
		OnUnavailable: client.Local, // for checks; no policy answers a password check
	})
	if err != nil {
		panic(err)
	}
	changePassword := func(ctx context.Context, user, newPassword string) string {
		breached, err := c.CheckPassword(ctx, newPassword) // sends only its SHA-1
		switch {
		case errors.Is(err, client.ErrNoBreachedFilter), errors.Is(err, client.ErrUnavailable):
			// unknown: your policy; here the change goes ahead, checked again later
		case err != nil:
			return "try again later" // a refused token: a bug to fix
		case breached:
			return "this password appeared in a data breach; choose another"
		}
		storePassword(user, newPassword)
		return "password changed"
	}

	for _, pw := range []string{"hunter2", "a passphrase of alice's own"} {
		fmt.Println(changePassword(context.Background(), "alice", pw))
	}
	// Output:
	// this password appeared in a data breach; choose another
	// password changed
}

// breachedGuardian stands in for guardian serving a breached-password
// filter that holds one password, hunter2.
func breachedGuardian() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var q struct {
			SHA1 string `json:"sha1"`
		}
		_ = json.NewDecoder(r.Body).Decode(&q)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"breached":%t}`, q.SHA1 == client.PasswordSHA1("hunter2"))
	}))
}

// storePassword is the auth service's own: it stores a password's hash.
func storePassword(user, password string) {}
