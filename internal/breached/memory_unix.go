//go:build unix

package breached

import "golang.org/x/sys/unix"

// allocate returns n bytes of zeroed memory outside Go's heap, so that a
// filter of a gigabyte neither doubles the heap's garbage-collection goal
// nor waits for a collection to be freed, and the function that frees it.
func allocate(n int) ([]byte, func(), error) {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { _ = unix.Munmap(b) }, nil
}

// seal makes memory from allocate read-only: a stray write faults instead
// of changing what the filter answers.
func seal(b []byte) { _ = unix.Mprotect(b, unix.PROT_READ) }
