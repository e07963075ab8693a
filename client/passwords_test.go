package client_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"testing"

	"github.com/guardian-sec/guardian/client"
)

func TestCheckPasswordSendsOnlyTheSHA1(t *testing.T) {
	g := newFakeGuardian(t, answer(200, `{"breached":true}`))
	c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed})
	breached, err := c.CheckPassword(t.Context(), "password")
	if err != nil || !breached {
		t.Fatalf("CheckPassword = %v, %v; want true", breached, err)
	}
	want := []recorded{{method: "POST", path: "/v1/passwords/check", auth: "Bearer tok",
		body: map[string]any{"sha1": "5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8"}}} // SHA-1 of "password"
	if got := g.received(); !reflect.DeepEqual(got, want) {
		t.Fatalf("guardian received\n%+v\nwant\n%+v", got, want)
	}
	if got := client.PasswordSHA1("password"); got != "5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8" {
		t.Errorf("PasswordSHA1(password) = %s", got)
	}
}

func TestCheckPasswordAnswers(t *testing.T) {
	notFound := `{"error":{"code":"not_found","message":"no breached-password filter is loaded (guardian serve --breached FILE)"}}`
	for _, tt := range []struct {
		name     string
		h        http.HandlerFunc
		breached bool
		want     error // nil, or what the error must match
	}{
		{"not breached", answer(200, `{"breached":false}`), false, nil},
		{"no filter", answer(404, notFound), false, client.ErrNoBreachedFilter},
		{"refused token", answer(401, `{"error":{"code":"unauthorized","message":"token expired"}}`), false, client.ErrUnauthorized},
		{"down", answer(503, ``), false, client.ErrUnavailable},
		{"not guardian's answer", answer(200, `{"ok":true}`), false, client.ErrUnavailable},
		{"not JSON", answer(200, `<html>`), false, client.ErrUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGuardian(t, tt.h)
			var unavailable []client.Call
			c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailOpen,
				Hooks: client.Hooks{Unavailable: func(c client.Call, _ client.Reason) { unavailable = append(unavailable, c) }}})
			breached, err := c.CheckPassword(t.Context(), "hunter2")
			if breached != tt.breached || tt.want == nil && err != nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("CheckPassword = %v, %v; want %v, %v", breached, err, tt.breached, tt.want)
			}
			if errors.Is(tt.want, client.ErrNoBreachedFilter) {
				var e *client.Error
				if !errors.As(err, &e) || e.Status != 404 || e.Code != "not_found" {
					t.Errorf("error %v: want a *client.Error of 404 not_found", err)
				}
			}
			if errors.Is(tt.want, client.ErrUnavailable) && !reflect.DeepEqual(unavailable, []client.Call{client.CallPasswordCheck}) {
				t.Errorf("Hooks.Unavailable saw %v", unavailable)
			}
		})
	}
}

func TestCheckPasswordWhenGuardianIsUnreachable(t *testing.T) {
	c := newClient(t, client.Config{BaseURL: closedURL(t), OnUnavailable: client.FailOpen})
	if breached, err := c.CheckPassword(t.Context(), "hunter2"); breached || !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("CheckPassword = %v, %v; want ErrUnavailable (no policy decides a password)", breached, err)
	}
}

// TestCheckCarriesPasswordSHA1: a check sends password_sha1 only when the
// caller sets PasswordSHA1, and Decision.Breached is guardian's answer, nil
// when guardian gave none.
func TestCheckCarriesPasswordSHA1(t *testing.T) {
	breachedSHA1 := client.PasswordSHA1("hunter2")
	g := newFakeGuardian(t, func(w http.ResponseWriter, r *http.Request) {
		var q map[string]any
		_ = json.NewDecoder(r.Body).Decode(&q)
		breached := ""
		if sum, ok := q["password_sha1"].(string); ok {
			breached = fmt.Sprintf(`,"breached":%t`, sum == breachedSHA1)
		}
		answer(200, `{"decision":"allow","attempt_id":"a1","degraded":false,"limits":[],"shadow":[]`+breached+`}`)(w, r)
	})
	c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailClosed})
	for _, tt := range []struct {
		name, sha1 string
		want       *bool
	}{
		{"none", "", nil},
		{"breached", breachedSHA1, ptr(true)},
		{"not breached", client.PasswordSHA1("a passphrase of its own"), ptr(false)},
	} {
		req := login
		req.PasswordSHA1 = tt.sha1
		d, err := c.Check(t.Context(), req)
		if err != nil || !reflect.DeepEqual(d.Breached, tt.want) || d.Action != client.Allow {
			t.Errorf("%s: Check = %+v (Breached %v), %v; want allow, Breached %v", tt.name, d, deref(d.Breached), err, deref(tt.want))
		}
	}
	var sent []any
	for _, r := range g.received() {
		sent = append(sent, r.body["password_sha1"])
	}
	if want := []any{nil, breachedSHA1, client.PasswordSHA1("a passphrase of its own")}; !reflect.DeepEqual(sent, want) {
		t.Errorf("password_sha1 sent %v, want %v (nothing when unset)", sent, want)
	}
}

func ptr[T any](v T) *T { return &v }

// deref writes a *bool for a message: true, false or nil.
func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}
