package integration

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	guardianclient "github.com/guardian-sec/guardian/client"
	"github.com/guardian-sec/guardian/internal/breached"
	"github.com/guardian-sec/guardian/internal/breached/breachedtest"
	"github.com/guardian-sec/guardian/internal/redistest"
)

// TestBreachedLeavesNothingInRedis: checks carrying password_sha1 and
// password checks, on a fleet of two sharing a real Redis, write neither
// the hash nor the answer to Redis, in a key or in a value.
func TestBreachedLeavesNothingInRedis(t *testing.T) {
	const pw = "hunter2"
	r := redistest.Start(t)
	fleet := startFleet(t, 2, fleetConfig{redisURL: r.URL(), breached: breachedtest.File(t, breached.Plain, pw)})
	sum := breached.SHA1Sum(pw)
	lower := hex.EncodeToString(sum[:])
	// Five: the built-in login-account rule's burst.
	for i := range 5 {
		in := fleet[i%2]
		a := in.must(t, "POST", "/v1/check", checkToken, map[string]any{
			"flow": "login", "account": "alice@example.com", "ip": "203.0.113.7", "password_sha1": strings.ToUpper(lower),
		})
		if a.status != 200 || a.body["breached"] != true || a.degraded() {
			t.Fatalf("check %d: %d %s", i, a.status, a.raw)
		}
		outcome := "failure"
		if i == 4 {
			outcome = "success"
		}
		if rep := in.must(t, "POST", "/v1/report", checkToken, map[string]any{"attempt_id": a.str("attempt_id"), "outcome": outcome}); rep.status != 200 {
			t.Fatalf("report %d: %d %s", i, rep.status, rep.raw)
		}
		if p := in.must(t, "POST", "/v1/passwords/check", checkToken, map[string]any{"sha1": lower}); p.status != 200 || p.body["breached"] != true {
			t.Fatalf("password check %d: %d %s", i, p.status, p.raw)
		}
	}

	ctx := context.Background()
	rc := r.Client(t)
	forms := [][]byte{[]byte(lower), []byte(strings.ToUpper(lower)), sum[:], sum[:8],
		[]byte(base64.StdEncoding.EncodeToString(sum[:])), []byte(base64.RawURLEncoding.EncodeToString(sum[:]))}
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("Redis holds no key: the checks reached no store")
	}
	t.Logf("%d keys read", len(keys))
	for _, k := range keys {
		typ, err := rc.Type(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var parts []string
		switch typ {
		case "string":
			parts = []string{rc.Get(ctx, k).Val()}
		case "hash":
			for f, v := range rc.HGetAll(ctx, k).Val() {
				parts = append(parts, f, v)
			}
		case "zset":
			parts = rc.ZRange(ctx, k, 0, -1).Val()
		case "set":
			parts = rc.SMembers(ctx, k).Val()
		case "list":
			parts = rc.LRange(ctx, k, 0, -1).Val()
		case "stream":
			for _, m := range rc.XRange(ctx, k, "-", "+").Val() {
				for f, v := range m.Values {
					parts = append(parts, f, toString(v))
				}
			}
		case "none": // expired since KEYS
		default:
			t.Fatalf("key %s of type %s: the test cannot read it", k, typ)
		}
		for _, text := range append(parts, k) {
			for _, f := range forms {
				if strings.Contains(text, string(f)) {
					t.Errorf("Redis key %s (%s) holds the password's hash (%q)", k, typ, f)
				}
			}
			if strings.Contains(text, "breached") {
				t.Errorf("Redis key %s (%s) holds an answer: %q", k, typ, text)
			}
		}
	}
}

func toString(v any) string {
	s, _ := v.(string)
	return s
}

// TestBreachedGoClient: the Go client's CheckPassword against a real
// guardian with a filter, and one without.
func TestBreachedGoClient(t *testing.T) {
	r := redistest.Start(t)
	with := startFleet(t, 1, fleetConfig{redisURL: r.URL(), breached: breachedtest.File(t, breached.Plain, "hunter2", "123456")})[0]
	without := startFleet(t, 1, fleetConfig{redisURL: r.URL()})[0]
	newClient := func(in *instance) *guardianclient.Client {
		c, err := guardianclient.New(guardianclient.Config{BaseURL: in.base, Tokens: guardianclient.StaticToken(checkToken),
			OnUnavailable: guardianclient.FailClosed, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newClient(with)
	f, err := breached.Open(breachedtest.File(t, breached.Plain, "hunter2", "123456"))
	if err != nil {
		t.Fatal(err)
	}
	outside := breachedtest.NotIn(t, f)
	for pw, want := range map[string]bool{"hunter2": true, "123456": true, outside: false} {
		if got, err := c.CheckPassword(t.Context(), pw); got != want || err != nil {
			t.Errorf("CheckPassword(%q) = %v, %v; want %v", pw, got, err, want)
		}
	}
	if got, err := newClient(without).CheckPassword(t.Context(), "hunter2"); got || !errors.Is(err, guardianclient.ErrNoBreachedFilter) {
		t.Errorf("CheckPassword without a filter = %v, %v; want ErrNoBreachedFilter", got, err)
	}

	// A check's PasswordSHA1: Decision.Breached is the filter's answer,
	// nil without the field or without a filter.
	check := func(c *guardianclient.Client, account, pw string) *bool {
		t.Helper()
		req := guardianclient.CheckRequest{Flow: guardianclient.FlowLogin, Account: account, IP: "203.0.113.7"}
		if pw != "" {
			req.PasswordSHA1 = guardianclient.PasswordSHA1(pw)
		}
		d, err := c.Check(t.Context(), req)
		if err != nil || d.Action != guardianclient.Allow {
			t.Fatalf("Check(%q) = %+v, %v; want allow", pw, d, err)
		}
		return d.Breached
	}
	for i, tt := range []struct {
		c    *guardianclient.Client
		pw   string
		want any
	}{
		{c, "hunter2", true}, {c, outside, false}, {c, "", nil}, {newClient(without), "hunter2", nil},
	} {
		var got any
		if b := check(tt.c, fmt.Sprintf("sha1-%d@example.com", i), tt.pw); b != nil {
			got = *b
		}
		if got != tt.want {
			t.Errorf("check %d with PasswordSHA1(%q): Breached %v, want %v", i, tt.pw, got, tt.want)
		}
	}
}
