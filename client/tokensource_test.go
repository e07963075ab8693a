package client_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/client"
)

func writeToken(t *testing.T, path, tok string) {
	t.Helper()
	// Written beside and renamed, as a secret mount or a rotation job does.
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestFileTokenRereadsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	writeToken(t, path, "  first  ")
	src, err := client.NewFileToken(path, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if tok, err := src.Token(ctx); err != nil || tok != "first" {
		t.Fatalf("Token() = %q, %v; want first, trimmed", tok, err)
	}
	writeToken(t, path, "second-longer")
	if tok, _ := src.Token(ctx); tok != "first" {
		t.Fatalf("Token() within Every = %q, want the file not looked at yet", tok)
	}
	src.Invalidate()
	if tok, _ := src.Token(ctx); tok != "second-longer" {
		t.Fatalf("Token() after Invalidate = %q, want the new token", tok)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	src.Invalidate()
	if tok, err := src.Token(ctx); err != nil || tok != "second-longer" {
		t.Fatalf("Token() with the file gone = %q, %v; want the last token kept", tok, err)
	}
	if _, err := client.NewFileToken(filepath.Join(t.TempDir(), "none"), 0); err == nil {
		t.Fatal("NewFileToken of a missing file succeeded")
	}
	empty := filepath.Join(t.TempDir(), "empty")
	writeToken(t, empty, "")
	if _, err := client.NewFileToken(empty, 0); !errors.Is(err, client.ErrNoToken) {
		t.Fatalf("NewFileToken of an empty file = %v, want ErrNoToken", err)
	}
}

func TestFileTokenRereadsOnItsPeriod(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	writeToken(t, path, "first")
	src, err := client.NewFileToken(path, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	writeToken(t, path, "second-longer")
	deadline := time.Now().Add(5 * time.Second)
	for {
		tok, _ := src.Token(context.Background())
		if tok == "second-longer" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Token() = %q after 5s, want the rotated token", tok)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTokenFunc(t *testing.T) {
	var src client.TokenSource = client.TokenFunc(func(context.Context) (string, error) { return "from-func", nil })
	if tok, err := src.Token(context.Background()); err != nil || tok != "from-func" {
		t.Fatalf("Token() = %q, %v", tok, err)
	}
}

// TestRefusedTokenIsResentWithTheFreshOne: guardian refusing the token
// (the file was rotated since the last look) makes the client read the
// file again and resend once: the check is decided, not failed.
func TestRefusedTokenIsResentWithTheFreshOne(t *testing.T) {
	g := newFakeGuardian(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer new" {
			answer(401, `{"error":{"code":"unauthorized","message":"token expired"}}`)(w, r)
			return
		}
		answer(200, `{"decision":"allow","attempt_id":"a1","degraded":false,"limits":[],"shadow":[]}`)(w, r)
	})
	path := filepath.Join(t.TempDir(), "token")
	writeToken(t, path, "old")
	src, err := client.NewFileToken(path, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refusals []int
	c := newClient(t, client.Config{BaseURL: g.URL, Tokens: src, OnUnavailable: client.FailClosed,
		Hooks: client.Hooks{Unauthorized: func(_ client.Call, status int) {
			mu.Lock()
			refusals = append(refusals, status)
			mu.Unlock()
		}}})
	writeToken(t, path, "new")
	d, err := c.Check(context.Background(), login)
	if err != nil || d.Action != client.Allow || d.Unavailable {
		t.Fatalf("Check = %+v, %v; want guardian's allow after the resend", d, err)
	}
	if got := len(g.received()); got != 2 {
		t.Errorf("%d requests, want the refused one and its resend", got)
	}
	if len(refusals) != 1 || refusals[0] != 401 {
		t.Errorf("Hooks.Unauthorized saw %v, want one 401", refusals)
	}
}

// TestUnauthorizedGoesWhereTheCallerSaid: a token guardian refuses, and no
// fresh one to resend with, is the caller's choice: an error matching
// ErrUnauthorized by default, or OnUnauthorized's decision. Hooks hear of
// it either way, for 401 and 403 alike.
func TestUnauthorizedGoesWhereTheCallerSaid(t *testing.T) {
	for _, status := range []int{401, 403} {
		code := map[int]string{401: "unauthorized", 403: "forbidden"}[status]
		g := newFakeGuardian(t, answer(status, `{"error":{"code":"`+code+`","message":"no"}}`))
		tests := []struct {
			name       string
			policy     client.Policy
			wantErr    bool
			wantAction client.Action
		}{
			{"unset: an error", 0, true, ""},
			{"fail closed", client.FailClosed, false, client.Slow},
			{"fail open", client.FailOpen, false, client.Allow},
			{"local", client.Local, false, client.Allow},
		}
		for _, tt := range tests {
			var hooked []client.Call
			c := newClient(t, client.Config{BaseURL: g.URL, Tokens: client.StaticToken("expired"),
				OnUnavailable: client.FailClosed, OnUnauthorized: tt.policy,
				Hooks: client.Hooks{Unauthorized: func(call client.Call, s int) {
					if s == status {
						hooked = append(hooked, call)
					}
				}}})
			d, err := c.Check(context.Background(), login)
			switch {
			case tt.wantErr && !errors.Is(err, client.ErrUnauthorized):
				t.Errorf("%d %s: Check = %+v, %v; want an error matching ErrUnauthorized", status, tt.name, d, err)
			case !tt.wantErr && (err != nil || d.Action != tt.wantAction || !d.Unavailable || d.Reason != client.ReasonUnauthorized):
				t.Errorf("%d %s: Check = %+v, %v; want %s decided by the policy, reason unauthorized", status, tt.name, d, err, tt.wantAction)
			}
			if len(hooked) != 1 || hooked[0] != client.CallCheck {
				t.Errorf("%d %s: Hooks.Unauthorized saw %v, want one check", status, tt.name, hooked)
			}
			if _, err := c.Report(context.Background(), "attempt", client.Failure); !errors.Is(err, client.ErrUnauthorized) {
				t.Errorf("%d %s: Report = %v, want ErrUnauthorized", status, tt.name, err)
			}
		}
	}
	if _, err := client.New(client.Config{BaseURL: "http://g", Tokens: client.StaticToken("t"), OnUnavailable: client.FailOpen, OnUnauthorized: 9}); !errors.Is(err, client.ErrConfig) {
		t.Errorf("New with an unknown OnUnauthorized = %v, want ErrConfig", err)
	}
	if !strings.Contains(client.ErrUnauthorized.Error(), "token") {
		t.Error("ErrUnauthorized does not say what was refused")
	}
}
