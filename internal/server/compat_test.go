package server_test

import (
	"encoding/json"
	"os"
	"testing"
)

// TestPreviousReleasesRequestsAreAccepted: a rolling upgrade replaces
// guardian first (docs/operations.md), so this release must take every
// field the previous release took from its clients: a request carrying all
// of them, as client/testdata/api-0.1.0.json lists them, is decided, never
// refused.
func TestPreviousReleasesRequestsAreAccepted(t *testing.T) {
	var previous struct {
		Requests map[string][]string `json:"requests"`
	}
	b, err := os.ReadFile("../../client/testdata/api-0.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &previous); err != nil {
		t.Fatal(err)
	}
	// pick is the body of path with every field the previous release took
	// there, from values.
	pick := func(path string, values map[string]any) map[string]any {
		t.Helper()
		out := map[string]any{}
		for _, f := range previous.Requests[path] {
			v, ok := values[f]
			if !ok {
				t.Fatalf("no value for the previous release's %s field %q", path, f)
			}
			out[f] = v
		}
		return out
	}
	in := start(t, "")
	values := map[string]any{"ip": "203.0.113.7", "account": "alice@example.com", "recipient": "+15550100000",
		"device_token": "a device token of another instance", "cost": 1}
	values["flow"] = "otp_send"
	if r := in.check(t, pick("POST /v1/check", values)); r.status != 200 {
		t.Fatalf("an otp_send check with every field of the previous release: %d %s", r.status, r.raw)
	}
	values["flow"] = "login"
	r := in.check(t, pick("POST /v1/check", values))
	if r.status != 200 {
		t.Fatalf("a login check with every field of the previous release: %d %s", r.status, r.raw)
	}
	report := pick("POST /v1/report", map[string]any{"attempt_id": str(r.body["attempt_id"]), "outcome": "success"})
	if r := in.do(t, "POST", "/v1/report", in.checkToken, report); r.status != 200 {
		t.Fatalf("a report as the previous release's clients send it: %d %s", r.status, r.raw)
	}
	reset := pick("POST /v1/accounts/reset", map[string]any{"account": "alice@example.com"})
	if r := in.do(t, "POST", "/v1/accounts/reset", in.adminToken, reset); r.status != 200 {
		t.Fatalf("a reset as the previous release's clients send it: %d %s", r.status, r.raw)
	}
}
