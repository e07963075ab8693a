package client_test

import (
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/client"
)

func TestLists(t *testing.T) {
	g := newFakeGuardian(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "POST" && r.URL.Path == "/v1/lists/deny":
			answer(201, `{"id":"3Q7XKZ2M4NB5VJ6CLW8PRT9YDA","expires_at":"2026-12-02T03:00:00Z"}`)(w, r)
		case r.Method == "POST" && r.URL.Path == "/v1/lists/allow":
			answer(201, `{"id":"7B2N","expires_at":null}`)(w, r)
		case r.Method == "GET" && r.URL.Path == "/v1/lists":
			answer(200, `{"deny":[{"id":"3Q7XKZ2M4NB5VJ6CLW8PRT9YDA","account":"h-q3bVd0Z8kL2mXn5pR7sT1u","reason":"incident 7",
				"created_at":"2026-12-02T02:00:00Z","expires_at":"2026-12-02T03:00:00Z","subject":"oncall","source":"api"}],
				"allow":[{"id":"rules-allow-0","network":"198.51.100.0/24","exempt":["login-ip"],"reason":"office",
				"created_at":"2026-12-01T00:00:00Z","expires_at":null,"subject":"","source":"/etc/guardian/rules.yaml"}]}`)(w, r)
		case r.Method == "DELETE" && r.URL.Path == "/v1/lists/3Q7XKZ2M4NB5VJ6CLW8PRT9YDA":
			answer(200, `{"deleted":true,"id":"3Q7XKZ2M4NB5VJ6CLW8PRT9YDA"}`)(w, r)
		default:
			answer(404, `{"error":{"code":"not_found","message":"no list entry in force has this id"}}`)(w, r)
		}
	})
	c := newClient(t, client.Config{BaseURL: g.URL, Tokens: client.StaticToken("admin"), OnUnavailable: client.FailClosed})

	deny, err := c.AddDeny(t.Context(), client.DenyEntry{Account: "alice@example.com", TTL: time.Hour, Reason: "incident 7"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (client.ListAdded{ID: "3Q7XKZ2M4NB5VJ6CLW8PRT9YDA", ExpiresAt: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)}); deny != want {
		t.Errorf("AddDeny() = %+v, want %+v", deny, want)
	}
	allow, err := c.AddAllow(t.Context(), client.AllowEntry{Network: "198.51.100.0/24", Exempt: []string{"login-ip"}, Reason: "office"})
	if err != nil {
		t.Fatal(err)
	}
	if want := (client.ListAdded{ID: "7B2N"}); allow != want {
		t.Errorf("AddAllow() = %+v, want %+v", allow, want)
	}
	if _, err := c.AddDeny(t.Context(), client.DenyEntry{Network: "2001:db8::/48", TTL: 90 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddDeny(t.Context(), client.DenyEntry{Network: "203.0.113.7", TTL: 1500 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}

	ls, err := c.Lists(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := client.Lists{
		Deny: []client.ListEntry{{ID: "3Q7XKZ2M4NB5VJ6CLW8PRT9YDA", Account: "h-q3bVd0Z8kL2mXn5pR7sT1u", Reason: "incident 7",
			CreatedAt: time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC), ExpiresAt: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC),
			Subject: "oncall", Source: "api"}},
		Allow: []client.ListEntry{{ID: "rules-allow-0", Network: "198.51.100.0/24", Exempt: []string{"login-ip"}, Reason: "office",
			CreatedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Source: "/etc/guardian/rules.yaml"}},
	}
	if !reflect.DeepEqual(ls, want) {
		t.Errorf("Lists() = %+v, want %+v", ls, want)
	}

	if err := c.DeleteListEntry(t.Context(), deny.ID); err != nil {
		t.Fatal(err)
	}
	var ce *client.Error
	if err := c.DeleteListEntry(t.Context(), "unknown"); !errors.As(err, &ce) || ce.Status != 404 || ce.Code != "not_found" {
		t.Errorf("DeleteListEntry(unknown) = %v, want a *Error 404 not_found", err)
	}

	got := g.received()
	wantReqs := []recorded{
		{method: "POST", path: "/v1/lists/deny", auth: "Bearer admin", body: map[string]any{"account": "alice@example.com", "ttl": "1h", "reason": "incident 7"}},
		{method: "POST", path: "/v1/lists/allow", auth: "Bearer admin", body: map[string]any{"network": "198.51.100.0/24", "exempt": []any{"login-ip"}, "reason": "office"}},
		{method: "POST", path: "/v1/lists/deny", auth: "Bearer admin", body: map[string]any{"network": "2001:db8::/48", "ttl": "90s"}},
		{method: "POST", path: "/v1/lists/deny", auth: "Bearer admin", body: map[string]any{"network": "203.0.113.7", "ttl": "1500ms"}},
		{method: "GET", path: "/v1/lists", auth: "Bearer admin"},
		{method: "DELETE", path: "/v1/lists/3Q7XKZ2M4NB5VJ6CLW8PRT9YDA", auth: "Bearer admin"},
		{method: "DELETE", path: "/v1/lists/unknown", auth: "Bearer admin"},
	}
	if !reflect.DeepEqual(got, wantReqs) {
		t.Errorf("guardian received\n%+v\nwant\n%+v", got, wantReqs)
	}
}

func TestListCallErrors(t *testing.T) {
	tests := []struct {
		name string
		h    http.HandlerFunc
		want error
	}{
		{"refused", answer(400, `{"error":{"code":"invalid_field","message":"exempt: login-account counts an account"}}`), &client.Error{}},
		{"down", answer(503, ``), client.ErrUnavailable},
		{"not an entry", answer(201, `{}`), client.ErrUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGuardian(t, tt.h)
			c := newClient(t, client.Config{BaseURL: g.URL, OnUnavailable: client.FailOpen})
			_, errDeny := c.AddDeny(t.Context(), client.DenyEntry{Network: "198.51.100.0/24", TTL: time.Hour})
			_, errAllow := c.AddAllow(t.Context(), client.AllowEntry{Network: "198.51.100.0/24", Exempt: []string{"login-account"}})
			for _, err := range []error{errDeny, errAllow} {
				var ce *client.Error
				if _, isRefusal := tt.want.(*client.Error); isRefusal && !errors.As(err, &ce) || !isRefusal && !errors.Is(err, tt.want) {
					t.Errorf("error = %v, want %v", err, tt.want)
				}
			}
		})
	}
}
