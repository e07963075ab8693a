package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/version"
)

// TestOneVersion: guardian's version is written once, in
// internal/version/VERSION; the binary embeds it, the Makefile (make
// version, make image) and deploy/image.sh read it, and every manifest
// pins the image tag to it.
func TestOneVersion(t *testing.T) {
	want := version.Release
	if v := strings.TrimSpace(string(repoFile(t, "internal/version/VERSION"))); v != want {
		t.Fatalf("VERSION %q, the binary's %q", v, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if got := strings.TrimSpace(run(t, ctx, nil, "make", "-s", "version")); got != want {
		t.Errorf("make version prints %q, want %q", got, want)
	}
	if !strings.Contains(string(repoFile(t, "deploy/image.sh")), `version=$(cat internal/version/VERSION)`) {
		t.Error("deploy/image.sh does not take its version, and its tag, from internal/version/VERSION")
	}

	m := loadManifests(t)
	if got := m.guardianContainer(t).Image; got != "guardian:"+want {
		t.Errorf("deploy/kubernetes runs %q, want guardian:%s", got, want)
	}
	c := loadCompose(t)
	for _, name := range c.guardianServices() {
		if got := c.Services[name].Image; got != "${GUARDIAN_IMAGE:-guardian:"+want+"}" {
			t.Errorf("compose service %s runs %q, want ${GUARDIAN_IMAGE:-guardian:%s}", name, got, want)
		}
	}
}
