package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCallerGoneOnEmbeddedStore: on the embedded store, a check, a report
// and a reset whose caller went away before guardian answered are decided
// as if the caller had stayed, never a 500: the caller's leaving is not a
// store failure on any store.
func TestCallerGoneOnEmbeddedStore(t *testing.T) {
	in := start(t, "")
	gone := func(path, token, body string) *httptest.ResponseRecorder {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)).WithContext(ctx)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		in.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("POST %s with its caller gone: %d %s, want 200", path, rec.Code, rec.Body)
		}
		return rec
	}
	rec := gone("/v1/check", in.checkToken, `{"flow":"login","account":"alice@example.com","ip":"192.0.2.1"}`)
	var ans struct {
		AttemptID string `json:"attempt_id"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &ans); err != nil || ans.AttemptID == "" {
		t.Fatalf("check answer %s: no attempt id (%v)", rec.Body, err)
	}
	gone("/v1/report", in.checkToken, `{"attempt_id":"`+ans.AttemptID+`","outcome":"failure"}`)
	if r := in.report(t, ans.AttemptID, "failure"); r.status != http.StatusConflict {
		t.Errorf("second report after one whose caller went away: %d %s, want 409", r.status, r.raw)
	}
	gone("/v1/accounts/reset", in.adminToken, `{"account":"alice@example.com"}`)
}
