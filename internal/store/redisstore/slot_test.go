package redisstore

import (
	"strings"
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

func TestLocate(t *testing.T) {
	tests := []struct{ key, hash, field string }{
		{"guardian:v2:{abcdef}:login-account", "guardian:v2:{ab}:login-account", "cdef"},
		{"guardian:v2:{abc}:hard-stop", "guardian:v2:{ab}:hard-stop", "c"},
		{"guardian:v2:{ab}:r", "guardian:v2:{ab}:r", ""},
		{"guardian:v2:{a}:r", "guardian:v2:{a}:r", ""},
		{"guardian:v2:{}:r", "guardian:v2:{}:r", ""},
		{"plain", "plain", ""},
		{"x{abc", "x{abc", ""},
		{"{abc}{def}", "{ab}{def}", "c"},
	}
	for _, tt := range tests {
		got := locate(tt.key)
		if got.hash != tt.hash || got.field != tt.field {
			t.Errorf("locate(%q) = %q, %q; want %q, %q", tt.key, got.hash, got.field, tt.hash, tt.field)
		}
	}
	a, b := locate("guardian:v2:{h1xyz}:login-account"), locate("guardian:v2:{h1xyz}:hard-stop")
	if slot(a.hash) != slot(b.hash) {
		t.Errorf("one subject's rules in hashes of slots %d and %d, want one slot", slot(a.hash), slot(b.hash))
	}
}

// FuzzLocate: locate loses nothing (the key comes back from its hash and
// field, so no two keys share a field), and a key's hash is in the slot of
// the first characters of its tag, so that every rule of one subject shares
// a slot.
func FuzzLocate(f *testing.F) {
	for _, k := range []string{"guardian:v2:{AbCdEfGhIjKlMnOpQrStUv}:login-account", "{ab}", "{abc}x", "x{", "{}", "", "{a}}{bc}", "{\xff\xfe\xfd}"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		l := locate(key)
		back := l.hash
		if l.field != "" {
			i := strings.IndexByte(l.hash, '{') + 1 + bucketLen
			back = l.hash[:i] + l.field + l.hash[i:]
		}
		if back != key {
			t.Fatalf("locate(%q) = %q, %q, which make %q", key, l.hash, l.field, back)
		}
		if l.field != "" {
			i := strings.IndexByte(key, '{') + 1
			if want := int(crc16(key[i:i+bucketLen])) % slotCount; slot(l.hash) != want {
				t.Fatalf("locate(%q): hash %q in slot %d, want %d, the slot of the tag's first characters", key, l.hash, slot(l.hash), want)
			}
		}
	})
}
