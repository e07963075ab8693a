// Package version says which guardian is running: its version, the one
// string of internal/version/VERSION, and the revision it was built from,
// stamped at build time or, when nothing stamped it, as the Go toolchain
// recorded it.
//
// VERSION is the one place the version is written. The binary embeds it,
// whatever builds it (make build, deploy/image.sh, go build, go install);
// the Makefile and deploy/image.sh read it for the image tag; the
// Kubernetes manifests and the compose file pin that tag, and test/deploy
// checks that they do. A release sets it to the release's number
// ("0.2.0"), and the commit after it to the next one's with "-dev".
package version

import (
	_ "embed"
	"runtime"
	"runtime/debug"
	"strings"
)

//go:embed VERSION
var release string

// revision is stamped at build time (the Makefile's build target and
// deploy/image.sh):
//
//	go build -ldflags "-X github.com/guardian-sec/guardian/internal/version.revision=abc1234"
var revision string

// Release is guardian's version, as internal/version/VERSION says:
// semantic versioning without a leading v ("0.2.0", "0.3.0-dev").
var Release = strings.TrimSpace(release)

// Info is what the binary knows of itself.
type Info struct {
	// Version is Release.
	Version string
	// Revision is the VCS commit the binary was built from, with
	// "-dirty" when the tree had changes; "unknown" when not recorded.
	Revision string
	// GoVersion is the Go toolchain that built it.
	GoVersion string
}

// Get returns the running binary's Info.
func Get() Info {
	return get(revision, debug.ReadBuildInfo)
}

func get(stampedRevision string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: Release, Revision: stampedRevision, GoVersion: runtime.Version()}
	if bi, ok := read(); ok {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		if info.Revision == "" {
			info.Revision = vcsRevision(bi.Settings)
		}
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
