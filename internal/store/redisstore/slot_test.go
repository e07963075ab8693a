package redisstore

import (
	"testing"
)

func TestCRC16(t *testing.T) {
	tests := []struct {
		in   string
		want uint16
	}{
		{"", 0},
		{"123456789", 0x31C3}, // the CRC-16/XMODEM check value
		{"A", 0x58E5},
	}
	for _, tt := range tests {
		if got := crc16(tt.in); got != tt.want {
			t.Errorf("crc16(%q) = %#04x, want %#04x", tt.in, got, tt.want)
		}
	}
}

func TestSlot(t *testing.T) {
	// Wants are what CLUSTER KEYSLOT answers.
	tests := []struct {
		key  string
		want int
	}{
		{"", 0},
		{"foo", 12182},
		{"bar", 5061},
		{"hello", 866},
		{"123456789", 12739},
		{"{user1000}.following", 3443},
		{"guardian:v2:{abc}:login-account", 7638},
		{"foo{bar}{zap}", 5061}, // the first tag only
		{"foo{}{bar}", 8363},    // an empty tag hashes the whole key
		{"foo{{bar}}zap", 4015}, // the tag is "{bar"
		{"{}", 15257},           // the whole key
	}
	for _, tt := range tests {
		if got := slot(tt.key); got != tt.want {
			t.Errorf("slot(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
}

func TestSlotWithoutTagHashesWholeKey(t *testing.T) {
	for _, key := range []string{"guardian:v2:{abc", "guardian:v1:abc}", "guardian:v1:}abc{"} {
		if got, want := slot(key), int(crc16(key))%slotCount; got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestSlotSharedBySubject(t *testing.T) {
	a, b := slot("guardian:v2:{h1}:login-account"), slot("guardian:v2:{h1}:hard-stop")
	if a != b {
		t.Errorf("one subject's rules in slots %d and %d, want one slot", a, b)
	}
}

func TestGroupBySlot(t *testing.T) {
	keys := []string{"a{x}", "b{y}", "c{x}", "d{z}", "e{y}"}
	got := groupBySlot(len(keys), func(i int) string { return keys[i] })
	want := [][]int{{0, 2}, {1, 4}, {3}}
	if len(got) != len(want) {
		t.Fatalf("groupBySlot = %v, want %v", got, want)
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("groupBySlot = %v, want %v", got, want)
		}
		for j := range want[i] {
			if got[i][j] != want[i][j] {
				t.Fatalf("groupBySlot = %v, want %v", got, want)
			}
		}
	}
}
