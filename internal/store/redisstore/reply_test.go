package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

func TestParseResults(t *testing.T) {
	reply := []any{
		int64(1), int64(1), int64(4), int64(0), int64(60_000_000), int64(0),
		int64(0), int64(0), int64(0), int64(0), int64(3_600_000_000), int64(3),
	}
	got := make([]store.Result, 2)
	if err := parseResults(reply, got); err != nil {
		t.Fatal(err)
	}
	want := []store.Result{
		{Allowed: true, Spent: true, Remaining: 4, ResetAfter: time.Minute},
		{ResetAfter: time.Hour, Count: 3},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("op %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseResultsMalformed(t *testing.T) {
	ok := func() []any {
		return []any{int64(1), int64(1), int64(4), int64(0), int64(60_000_000), int64(0)}
	}
	with := func(i int, v any) []any {
		r := ok()
		r[i] = v
		return r
	}
	tests := []struct {
		name  string
		reply any
		ops   int
	}{
		{"nil", nil, 1},
		{"integer", int64(1), 1},
		{"string", "OK", 1},
		{"map", map[any]any{"a": int64(1)}, 1},
		{"empty for one op", []any{}, 1},
		{"short", ok()[:5], 1},
		{"long", append(ok(), int64(0)), 1},
		{"one op's worth for two", ok(), 2},
		{"string field", with(2, "4"), 1},
		{"float field", with(2, 4.0), 1},
		{"nil field", with(4, nil), 1},
		{"nested array", with(3, []any{int64(0)}), 1},
		{"allowed 2", with(0, int64(2)), 1},
		{"spent 2", with(1, int64(2)), 1},
		{"spent but not allowed", with(0, int64(0)), 1},
		{"negative remaining", with(2, int64(-1)), 1},
		{"negative retry", with(3, int64(-1)), 1},
		{"negative reset", with(4, int64(-5)), 1},
		{"negative count", with(5, int64(-1)), 1},
		{"reset beyond any span", with(4, int64(1)<<60), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := make([]store.Result, tt.ops)
			err := parseResults(tt.reply, res)
			if !errors.Is(err, ErrBadReply) {
				t.Errorf("err = %v, want ErrBadReply", err)
			}
		})
	}
}
