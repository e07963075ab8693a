// Package filewatch tells when the content of a file changed, however it
// changed: the rules file, the signing key file and the TLS certificate
// are each watched with it, so that a rewritten file or an updated
// Kubernetes ConfigMap or Secret takes effect without a signal.
package filewatch

import (
	"context"
	"crypto/sha256"
	"os"
	"time"
)

// Watcher tells when the content of a file changed. It reads the file
// through every symlink on the way, so it sees a file replaced by a rename,
// one rewritten in place, and the swap of a symlink it is reached through,
// as Kubernetes updates a mounted ConfigMap or Secret (the `..data` link
// moved to a new directory). Content is compared, not times, so a rewrite
// within one tick of the file system's clock is still seen. A file that
// cannot be read counts as a change once, when it becomes unreadable. A
// Watcher is used by one goroutine; build one with New.
type Watcher struct {
	path string
	last [sha256.Size]byte
}

// New returns a Watcher of the file at path whose baseline is the file as
// it is now: call it when the file was read.
func New(path string) *Watcher {
	w := &Watcher{path: path}
	w.last, _ = digestFile(path)
	return w
}

// Changed reports whether the file's content differs from the baseline,
// and makes what it read the baseline. A file being rewritten in place may
// be read half-written, so a content that differs is read again after
// settle until two reads agree on a file that is not empty (ten times at
// most; a rewrite in place empties the file before it writes it): a rewrite
// shows as one change to its final content, and one back to the baseline as
// none.
func (w *Watcher) Changed(settle time.Duration) bool {
	d, _ := digestFile(w.path)
	if d == w.last {
		return false
	}
	for range 10 {
		time.Sleep(settle)
		again, _ := digestFile(w.path)
		if again == d && again != emptyDigest {
			break
		}
		d = again
	}
	if d == w.last {
		return false
	}
	w.last = d
	return true
}

// Run polls the file every period until ctx ends, and calls changed after
// each poll that found it Changed, with a tenth of period to settle.
func (w *Watcher) Run(ctx context.Context, period time.Duration, changed func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if w.Changed(period / 10) {
			changed()
		}
	}
}

// emptyDigest is the digest of an empty file.
var emptyDigest = sha256.Sum256(nil)

// digestFile returns the SHA-256 of the file's content, or a zero digest
// and the error when it cannot be read.
func digestFile(path string) ([sha256.Size]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}
