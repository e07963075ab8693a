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
