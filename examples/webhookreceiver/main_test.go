package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/webhook"
)

// TestReceiverVerifiesGuardiansSignature signs messages as guardian does
// and checks the receiver takes them, and refuses a tampered body, another
// secret, a stale timestamp.
func TestReceiverVerifiesGuardiansSignature(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	key, _ := webhook.ParseSecret(secret)
	other, _ := webhook.ParseSecret("whsec_" + strings.Repeat("A", 32))
	now := time.Unix(1764640000, 0)
	var out bytes.Buffer
	rc := &receiver{now: func() time.Time { return now }, out: &out}
	rc.key, _ = secretKey(secret)
	body := `{"type":"hard_stop_started","timestamp":"2025-12-02T01:46:40Z","data":{"account":"h-ohjXXnIYOeEQCt9ExlRekQ"}}`
	tests := []struct {
		name     string
		key      []byte
		at       time.Time
		sent     string
		wantCode int
	}{
		{"signed by guardian", key, now, body, http.StatusNoContent},
		{"tampered body", key, now, strings.Replace(body, "started", "ended", 1), http.StatusUnauthorized},
		{"another secret", other, now, body, http.StatusUnauthorized},
		{"stale", key, now.Add(-10 * time.Minute), body, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		ts := tt.at.Unix()
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.sent))
		req.Header.Set("webhook-id", "msg_1")
		req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
		req.Header.Set("webhook-signature", webhook.Sign(tt.key, "msg_1", ts, []byte(body)))
		rec := httptest.NewRecorder()
		rc.ServeHTTP(rec, req)
		if rec.Code != tt.wantCode {
			t.Errorf("%s: %d %s, want %d", tt.name, rec.Code, rec.Body, tt.wantCode)
		}
	}
	if got := out.String(); got != "msg_1 hard_stop_started map[account:h-ohjXXnIYOeEQCt9ExlRekQ]\n" {
		t.Errorf("output %q", got)
	}
}
