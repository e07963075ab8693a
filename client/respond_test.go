package client_test

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/client"
)

var (
	allowed = client.Decision{Action: client.Allow, AttemptID: "a",
		RateLimitPolicy: `"login-account";q=5;w=300`, RateLimit: `"login-account";r=4;t=60`}
	slowed = client.Decision{Action: client.Slow, Rule: "login-account", RetryAfter: 40*time.Second + time.Millisecond,
		RateLimitPolicy: `"login-account";q=5;w=300`, RateLimit: `"login-account";r=0;t=41`}
	blocked    = client.Decision{Action: client.Block, Rule: "login-hard-stop"}
	challenged = client.Decision{Action: client.Challenge, Rule: "login-global-failures", AttemptID: "c"}
	// passed is a challenge to a check that carried ChallengePassed: it
	// goes ahead.
	passed = client.Decision{Action: client.Challenge, Rule: "login-secret-spray", AttemptID: "p", ChallengePassed: true}
)

func TestHTTPStatus(t *testing.T) {
	tests := []struct {
		d    client.Decision
		want int
	}{
		{allowed, 200},
		{challenged, 401},
		{passed, 200},
		{slowed, 429},
		{blocked, 403},
		{client.Decision{Action: client.Slow, Unavailable: true, RetryAfter: time.Second}, 429},
	}
	for _, tt := range tests {
		if got := tt.d.HTTPStatus(); got != tt.want {
			t.Errorf("HTTPStatus(%s) = %d, want %d", tt.d.Action, got, tt.want)
		}
	}
}

func TestWriteHeaders(t *testing.T) {
	tests := []struct {
		name string
		d    client.Decision
		opts client.HeaderOptions
		want http.Header
	}{
		{"slow", slowed, client.HeaderOptions{}, http.Header{
			"Retry-After":      {"41"},
			"Ratelimit-Policy": {`"login-account";q=5;w=300`},
			"Ratelimit":        {`"login-account";r=0;t=41`},
		}},
		{"slow without quota", slowed, client.HeaderOptions{OmitQuota: true}, http.Header{"Retry-After": {"41"}}},
		{"allow", allowed, client.HeaderOptions{}, http.Header{
			"Ratelimit-Policy": {`"login-account";q=5;w=300`},
			"Ratelimit":        {`"login-account";r=4;t=60`},
		}},
		{"allow without quota", allowed, client.HeaderOptions{OmitQuota: true}, http.Header{}},
		{"block has no Retry-After", blocked, client.HeaderOptions{}, http.Header{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			client.WriteHeaders(w, tt.d, tt.opts)
			if got := w.Header(); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("headers = %v, want %v", got, tt.want)
			}
		})
	}
}

// written is what a Responder wrote.
type written struct {
	status                                 int
	retryAfter, policy, quota, body, ctype string
}

func record(f func(w http.ResponseWriter)) written {
	w := httptest.NewRecorder()
	f(w)
	h := w.Result().Header
	return written{status: w.Code, retryAfter: h.Get("Retry-After"), policy: h.Get("RateLimit-Policy"), quota: h.Get("RateLimit"),
		body: w.Body.String(), ctype: h.Get("Content-Type")}
}

func TestResponder(t *testing.T) {
	const (
		invalid  = `{"error":"invalid_credentials","next":"retry"}`
		tooMany  = `{"error":"too_many_attempts","next":"wait"}`
		locked   = `{"error":"account_locked","next":"reset"}`
		factor   = `{"error":"second_factor_required","next":"second_factor"}`
		jsonType = "application/json"
	)
	tests := []struct {
		name string
		r    client.Responder
		d    client.Decision
		want written
	}{
		{"slow", client.Responder{}, slowed,
			written{429, "41", `"login-account";q=5;w=300`, `"login-account";r=0;t=41`, tooMany, jsonType}},
		{"slow without quota", client.Responder{OmitQuota: true}, slowed, written{429, "41", "", "", tooMany, jsonType}},
		{"slow as invalid", client.Responder{SlowAsInvalid: true}, slowed, written{401, "", "", "", invalid, jsonType}},
		{"block", client.Responder{}, blocked, written{403, "", "", "", locked, jsonType}},
		{"challenge", client.Responder{}, challenged, written{401, "", "", "", factor, jsonType}},
		{"fail closed", client.Responder{OmitQuota: true}, client.Decision{Action: client.Slow, Unavailable: true, RetryAfter: time.Second},
			written{429, "1", "", "", tooMany, jsonType}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var wrote bool
			got := record(func(w http.ResponseWriter) { wrote = tt.r.Refuse(w, tt.d) })
			if !wrote || got != tt.want {
				t.Fatalf("Refuse() wrote %v: %+v, want %+v", wrote, got, tt.want)
			}
		})
	}
	for name, d := range map[string]client.Decision{"allow": allowed, "a challenge passed": passed} {
		t.Run(name+" writes nothing", func(t *testing.T) {
			w := httptest.NewRecorder()
			if (client.Responder{}).Refuse(w, d) || w.Body.Len() != 0 || len(w.Header()) != 0 {
				t.Fatalf("Refuse(%s) wrote %d %q %v", name, w.Code, w.Body, w.Header())
			}
		})
	}
}

func TestSlowAsInvalidIsIndistinguishableFromAWrongPassword(t *testing.T) {
	r := client.Responder{SlowAsInvalid: true}
	wrong := record(func(w http.ResponseWriter) { r.InvalidCredentials(w, allowed) })
	slow := record(func(w http.ResponseWriter) { r.Refuse(w, slowed) })
	if wrong != slow {
		t.Fatalf("wrong password answered %+v, slowed attempt %+v: want the same", wrong, slow)
	}
	if wrong.status != 401 {
		t.Fatalf("wrong password status = %d, want 401", wrong.status)
	}
}

func TestInvalidCredentials(t *testing.T) {
	tests := []struct {
		name string
		r    client.Responder
		want written
	}{
		{"with quota", client.Responder{}, written{401, "", `"login-account";q=5;w=300`, `"login-account";r=4;t=60`,
			`{"error":"invalid_credentials","next":"retry"}`, "application/json"}},
		{"without quota", client.Responder{OmitQuota: true}, written{401, "", "", "",
			`{"error":"invalid_credentials","next":"retry"}`, "application/json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := record(func(w http.ResponseWriter) { tt.r.InvalidCredentials(w, allowed) }); got != tt.want {
				t.Fatalf("InvalidCredentials() wrote %+v, want %+v", got, tt.want)
			}
		})
	}
}
