// Package version says which guardian is running: the version and
// revision stamped at build time, or what the Go toolchain recorded in the
// binary when nothing was stamped.
package version

import (
	"runtime"
	"runtime/debug"
)

// Stamped at build time (the Makefile's build target and deploy/image.sh):
//
//	go build -ldflags "-X github.com/guardian-sec/guardian/internal/version.version=v1.2.3 \
//	    -X github.com/guardian-sec/guardian/internal/version.revision=abc1234"
var (
	version  string
	revision string
)

// Info is what the binary knows of itself.
type Info struct {
	// Version is the release ("v1.2.3"), or "devel" for a build of a
	// working tree nobody stamped.
	Version string
	// Revision is the VCS commit the binary was built from, with
	// "-dirty" when the tree had changes; "unknown" when not recorded.
	Revision string
	// GoVersion is the Go toolchain that built it.
	GoVersion string
}

// Get returns the running binary's Info.
func Get() Info {
	return get(version, revision, debug.ReadBuildInfo)
}

func get(stampedVersion, stampedRevision string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: stampedVersion, Revision: stampedRevision, GoVersion: runtime.Version()}
	bi, ok := read()
	if ok {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		if info.Revision == "" {
			info.Revision = vcsRevision(bi.Settings)
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Revision == "" {
		info.Revision = "unknown"
	}
	return info
}

// vcsRevision is the revision the go command recorded, "-dirty" added when
// the working tree had changes.
func vcsRevision(settings []debug.BuildSetting) string {
	var rev string
	var dirty bool
	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
}

// String is the one line `guardian version` prints.
func (i Info) String() string {
	return "guardian " + i.Version + " (revision " + i.Revision + ", " + i.GoVersion + ")"
}
