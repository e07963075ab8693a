package redisagg

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/store"
)

func TestParseTotals(t *testing.T) {
	tests := []struct {
		name    string
		reply   any
		want    int
		wantOut []int64
		wantErr bool
	}{
		{"totals", []any{int64(0), int64(3), int64(7)}, 3, []int64{0, 3, 7}, false},
		{"none", []any{}, 0, nil, false},
		{"not an array", "OK", 1, nil, true},
		{"too few", []any{int64(1)}, 2, nil, true},
		{"too many", []any{int64(1), int64(2)}, 1, nil, true},
		{"a string", []any{int64(1), "2"}, 2, nil, true},
		{"negative", []any{int64(-1)}, 1, nil, true},
		{"nil", []any{nil}, 1, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseTotals(tt.reply, tt.want, nil)
			if tt.wantErr {
				if !errors.Is(err, ErrBadReply) || !errors.Is(err, store.ErrBadReply) {
					t.Fatalf("parseTotals(%v) error = %v, want ErrBadReply", tt.reply, err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.wantOut) {
				t.Fatalf("parseTotals(%v) = %v, %v; want %v", tt.reply, got, err, tt.wantOut)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	set := []aggregate.Total{{Bucket: aggregate.Bucket{Flow: "login", Index: 1}, N: 1}}
	tests := []struct {
		name  string
		batch aggregate.Batch
		ok    bool
	}{
		{"sets", aggregate.Batch{Instance: "i", Width: time.Second, TTL: time.Minute, Sets: set}, true},
		{"reads without instance or ttl", aggregate.Batch{Width: time.Second, Reads: []aggregate.Bucket{{Flow: "login"}}}, true},
		{"sets without instance", aggregate.Batch{Width: time.Second, TTL: time.Minute, Sets: set}, false},
		{"sets without ttl", aggregate.Batch{Instance: "i", Width: time.Second, Sets: set}, false},
		{"width under 1ms", aggregate.Batch{Instance: "i", Width: time.Microsecond, TTL: time.Minute, Sets: set}, false},
		{"negative total", aggregate.Batch{Instance: "i", Width: time.Second, TTL: time.Minute,
			Sets: []aggregate.Total{{Bucket: aggregate.Bucket{Flow: "login"}, N: -1}}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validate(&tt.batch)
			if got := err == nil; got != tt.ok {
				t.Fatalf("validate = %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrBadBatch) {
				t.Fatalf("validate = %v, want ErrBadBatch", err)
			}
		})
	}
}

func TestParseRevocations(t *testing.T) {
	tests := []struct {
		name        string
		reply       any
		held        string
		wantChanged bool
		wantN       int
		wantErr     bool
	}{
		{"unchanged", []any{"v1"}, "v1", false, 0, false},
		{"changed", []any{"v2", []any{"a", "1700000000000", "b", "1700000000001"}}, "v1", true, 2, false},
		{"emptied", []any{"", []any{}}, "v1", true, 0, false},
		{"a version without its set", []any{"v2"}, "v1", false, 0, true},
		{"not an array", "OK", "", false, 0, true},
		{"too long", []any{"v", []any{}, "x"}, "", false, 0, true},
		{"version not a string", []any{int64(1)}, "", false, 0, true},
		{"odd pairs", []any{"v", []any{"a"}}, "", false, 0, true},
		{"until not a number", []any{"v", []any{"a", "soon"}}, "", false, 0, true},
		{"jti not a string", []any{"v", []any{int64(1), "1"}}, "", false, 0, true},
	}
	for _, tt := range tests {
		snap, changed, err := parseRevocations(tt.reply, tt.held)
		if tt.wantErr {
			if !errors.Is(err, ErrBadReply) {
				t.Errorf("%s: error %v, want ErrBadReply", tt.name, err)
			}
			continue
		}
		if err != nil || changed != tt.wantChanged || len(snap.Entries) != tt.wantN {
			t.Errorf("%s: %+v, %v, %v", tt.name, snap, changed, err)
		}
	}
	snap, _, _ := parseRevocations([]any{"v", []any{"a", "1700000000123"}}, "")
	if got := snap.Entries[0].Until; !got.Equal(time.UnixMilli(1700000000123)) {
		t.Errorf("until %v", got)
	}
}
