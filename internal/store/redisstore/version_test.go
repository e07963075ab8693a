package redisstore

import "testing"

func TestSupported(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n"
	if v := serverVersion(info); v != "7.0.15" {
		t.Fatalf("serverVersion = %q, want 7.0.15", v)
	}
	for v, want := range map[string]bool{
		"7.0.15": true, "6.2.0": true, "6.2.14": true, "10.0.1": true, "8.2": true,
		"6.0.16": false, "5.0.7": false, "6": false, "": false, "x.y.z": false, "6.x.1": false,
	} {
		if got := supported(v); got != want {
			t.Errorf("supported(%q) = %v, want %v", v, got, want)
		}
	}
}
