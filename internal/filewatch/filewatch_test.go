package filewatch_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/filewatch"
)

// watch runs a filewatch.Watcher of path and returns a channel that receives
// each change.
func watch(t *testing.T, path string) <-chan struct{} {
	t.Helper()
	ch := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w := filewatch.New(path)
	go func() {
		defer close(done)
		w.Run(ctx, 10*time.Millisecond, func() { ch <- struct{}{} })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ch
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func wantChange(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no change seen within 5s", what)
	}
}

func wantQuiet(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s: a change was reported", what)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestWatchSeesEveryKindOfChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	write(t, path, "a")
	ch := watch(t, path)
	wantQuiet(t, ch, "no change")

	// Rewritten in place, same size, same second.
	write(t, path, "b")
	wantChange(t, ch, "rewritten in place")

	// Replaced by a rename.
	tmp := filepath.Join(dir, "rules.yaml.tmp")
	write(t, tmp, "c")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	wantChange(t, ch, "replaced")

	// Written again with the same content: nothing to do.
	write(t, path, "c")
	wantQuiet(t, ch, "same content")

	// Removed, then back.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	wantChange(t, ch, "removed")
	wantQuiet(t, ch, "still removed")
	write(t, path, "d")
	wantChange(t, ch, "back")
}

// TestWatchSeesConfigMapSwap lays files out as the kubelet mounts a
// ConfigMap: rules.yaml → ..data/rules.yaml, ..data → ..<timestamp>/, and an
// update writes a new timestamped directory and renames a new ..data link
// over the old one.
func TestWatchSeesConfigMapSwap(t *testing.T) {
	mount := t.TempDir()
	version := func(name, content string) {
		t.Helper()
		d := filepath.Join(mount, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(d, "rules.yaml"), content)
	}
	link := func(target string) {
		t.Helper()
		tmp := filepath.Join(mount, "..data_tmp")
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_11_29_10_00_00.1", "v1")
	link("..2026_11_29_10_00_00.1")
	path := filepath.Join(mount, "rules.yaml")
	if err := os.Symlink(filepath.Join("..data", "rules.yaml"), path); err != nil {
		t.Fatal(err)
	}
	ch := watch(t, path)
	wantQuiet(t, ch, "no change")

	version("..2026_11_29_10_05_00.2", "v2")
	link("..2026_11_29_10_05_00.2")
	if err := os.RemoveAll(filepath.Join(mount, "..2026_11_29_10_00_00.1")); err != nil {
		t.Fatal(err)
	}
	wantChange(t, ch, "..data swapped")
	wantQuiet(t, ch, "after the swap")
}
