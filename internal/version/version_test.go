package version

import (
	"fmt"
	"runtime/debug"
	"testing"
)

func TestGet(t *testing.T) {
	built := func(mainVersion string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.99.0", Main: debug.Module{Version: mainVersion}, Settings: settings}, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "0123abc"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	tests := []struct {
		name               string
		stampedV, stampedR string
		read               func() (*debug.BuildInfo, bool)
		want               Info
	}{
		{"stamped wins", "v1.2.3", "feedbee", built("v0.0.1", rev), Info{"v1.2.3", "feedbee", "go1.99.0"}},
		{"module version", "", "", built("v1.4.0", rev), Info{"v1.4.0", "0123abc", "go1.99.0"}},
		{"working tree", "", "", built("(devel)", rev, dirty), Info{"devel", "0123abc-dirty", "go1.99.0"}},
		{"nothing recorded", "", "", built(""), Info{"devel", "unknown", "go1.99.0"}},
	}
	for _, tt := range tests {
		if got := get(tt.stampedV, tt.stampedR, tt.read); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if got := get("", "", none); got.Version != "devel" || got.Revision != "unknown" || got.GoVersion == "" {
		t.Errorf("without build info: %+v", got)
	}
}

func ExampleInfo_String() {
	fmt.Println(Info{Version: "v1.2.3", Revision: "0123abc", GoVersion: "go1.26.8"})
	// Output: guardian v1.2.3 (revision 0123abc, go1.26.8)
}
