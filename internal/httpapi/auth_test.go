package httpapi

import "testing"

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
