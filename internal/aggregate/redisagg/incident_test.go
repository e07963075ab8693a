package redisagg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/aggregate/redisagg"
)

func testIncidentSnapshots(t *testing.T, r *redisEnv) {
	ctx := context.Background()
	s := redisagg.NewIncident(r.guardian)
	for _, put := range []struct{ inst, snap string }{{"a", `{"n":1}`}, {"b", `{"n":2}`}, {"a", `{"n":3}`}} {
		if err := s.Put(ctx, put.inst, []byte(put.snap), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got["a"]) != `{"n":3}` || string(got["b"]) != `{"n":2}` {
		t.Errorf("Get = %q, want a's last snapshot and b's", got)
	}
	if d := r.plain.PTTL(ctx, redisagg.IncidentKey).Val(); d <= 0 || d > time.Hour {
		t.Errorf("PTTL = %v, want in (0, 1h]", d)
	}
	if err := s.Put(ctx, "", nil, time.Hour); !errors.Is(err, redisagg.ErrBadBatch) {
		t.Errorf("a snapshot without an instance: got %v, want ErrBadBatch", err)
	}
}

func testWebhookClaims(t *testing.T, r *redisEnv) {
	ctx := context.Background()
	c := redisagg.NewClaims(r.guardian)
	for i, want := range []bool{true, false, false} {
		if got, err := c.Claim(ctx, "rules_reloaded:3f9a", time.Minute); err != nil || got != want {
			t.Errorf("claim %d: %v, %v; want %v", i, got, err, want)
		}
	}
	if got, err := c.Claim(ctx, "rules_reloaded:other", time.Minute); err != nil || !got {
		t.Errorf("another name: %v, %v; want claimed", got, err)
	}
	if d := r.plain.PTTL(ctx, redisagg.ClaimPrefix+"rules_reloaded:3f9a").Val(); d <= 0 || d > time.Minute {
		t.Errorf("PTTL = %v, want in (0, 1m]", d)
	}
}
