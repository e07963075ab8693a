package keys

import (
	"errors"
	"net/netip"
	"testing"
)

func TestNetwork(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"198.51.100.0/24", "198.51.100.0/24"},
		{" 198.51.100.7 ", "198.51.100.7/32"},
		{"0.0.0.0/0", "0.0.0.0/0"},
		{"2001:db8::/48", "2001:db8::/48"},
		{"2001:db8::1", "2001:db8::1/128"},
		{"::ffff:198.51.100.0/120", "198.51.100.0/24"},
		{"::ffff:198.51.100.9", "198.51.100.9/32"},
	}
	for _, tt := range tests {
		got, err := Network(tt.in)
		if err != nil || got != netip.MustParsePrefix(tt.want) {
			t.Errorf("Network(%q) = %v, %v, want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestNetworkRefuses(t *testing.T) {
	for _, in := range []string{"", "198.51.100.7/24", "198.51.100.0/33", "fe80::1%eth0", "not-a-net", "::ffff:0:0/80", "2001:db8::1/48"} {
		if got, err := Network(in); !errors.Is(err, ErrInvalidIP) {
			t.Errorf("Network(%q) = %v, %v, want ErrInvalidIP", in, got, err)
		}
	}
}
