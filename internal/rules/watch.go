package rules

import (
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// Watch polls the file at path every period until ctx ends, and calls
// changed each time its content differs from what the previous poll read.
// It reads the file through every symlink on the way, so it sees a file
// replaced by a rename, one rewritten in place, and the swap of a symlink it
// is reached through, as Kubernetes updates a mounted ConfigMap (the
// `..data` link moved to a new directory). A file that cannot be read
// counts as a change once, when it becomes unreadable; changed then
// decides what to do with it. Content is compared, not times, so a rewrite
// within one tick of the clock is still seen. The first poll sets the
// baseline: the file as it was loaded. Watch returns when ctx ends.
func Watch(ctx context.Context, path string, period time.Duration, changed func()) {
	last, _ := digestFile(path)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		d, _ := digestFile(path)
		if d == last {
			continue
		}
		last = d
		changed()
	}
}

// digestFile returns the SHA-256 of the file's content, or a zero digest
// and the error when it cannot be read.
func digestFile(path string) ([sha256.Size]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}
