package version

import (
	"fmt"
	"regexp"
	"runtime/debug"
	"testing"
)

func TestGet(t *testing.T) {
	built := func(settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{GoVersion: "go1.99.0", Main: debug.Module{Version: "v9.9.9"}, Settings: settings}, true
		}
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "0123abc"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	tests := []struct {
		name     string
		stampedR string
		read     func() (*debug.BuildInfo, bool)
		want     Info
	}{
		{"stamped wins", "feedbee", built(rev), Info{Release, "feedbee", "go1.99.0"}},
		{"a commit", "", built(rev), Info{Release, "0123abc", "go1.99.0"}},
		{"a working tree with changes", "", built(rev, dirty), Info{Release, "0123abc-dirty", "go1.99.0"}},
		{"nothing recorded", "", built(), Info{Release, "unknown", "go1.99.0"}},
	}
	for _, tt := range tests {
		if got := get(tt.stampedR, tt.read); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
	if got := get("", none); got.Version != Release || got.Revision != "unknown" || got.GoVersion == "" {
		t.Errorf("without build info: %+v", got)
	}
}

// TestReleaseIsASemanticVersion: VERSION holds one semantic version, no
// leading v, so that it is an image tag as it is.
func TestReleaseIsASemanticVersion(t *testing.T) {
	semver := regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)
	if !semver.MatchString(Release) {
		t.Fatalf("VERSION %q is not a semantic version without a leading v", Release)
	}
	if release != Release+"\n" {
		t.Errorf("VERSION %q: want the version and one newline", release)
	}
}

func ExampleInfo_String() {
	fmt.Println(Info{Version: "1.2.3", Revision: "0123abc", GoVersion: "go1.26.8"})
	// Output: guardian 1.2.3 (revision 0123abc, go1.26.8)
}
