package httpapi

import (
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/tokens"
)

func TestBearer(t *testing.T) {
	for _, tt := range []struct {
		header string
		want   string
		ok     bool
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", true},
		{"bearer abc.def.ghi", "abc.def.ghi", true},
		{"BEARER abc.def.ghi", "abc.def.ghi", true},
		{"bEaReR abc.def.ghi", "abc.def.ghi", true},
		{"Bearer   abc.def.ghi  ", "abc.def.ghi", true},
		{"Bearer ", "", false},
		{"Bearer", "", false},
		{"", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearerabc.def.ghi", "", false},
		{"Token abc.def.ghi", "", false},
		{" Bearer abc.def.ghi", "", false},
	} {
		got, ok := bearer(tt.header)
		if got != tt.want || ok != tt.ok {
			t.Errorf("bearer(%q) = %q, %v; want %q, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

func TestExpiringWithin(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		cl   tokens.Claims
		want time.Duration
	}{
		{"720h: its last 72h", tokens.Claims{IssuedAt: t0, ExpiresAt: t0.Add(720 * time.Hour)}, 72 * time.Hour},
		{"a day: its last 2.4h", tokens.Claims{IssuedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}, 144 * time.Minute},
		{"an hour: its last 6 minutes", tokens.Claims{IssuedAt: t0, ExpiresAt: t0.Add(time.Hour)}, 6 * time.Minute},
		{"a year: never more than 72h", tokens.Claims{IssuedAt: t0, ExpiresAt: t0.Add(8760 * time.Hour)}, 72 * time.Hour},
		{"no issue time: 72h", tokens.Claims{ExpiresAt: t0.Add(time.Hour)}, 72 * time.Hour},
		{"issued after its expiry: 72h", tokens.Claims{IssuedAt: t0.Add(time.Hour), ExpiresAt: t0}, 72 * time.Hour},
	}
	for _, tt := range tests {
		if got := expiringWithin(tt.cl); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
