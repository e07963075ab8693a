//go:build !unix

package breached

// allocate returns n bytes of Go memory (systems without mmap), and a
// release that leaves them to the garbage collector.
func allocate(n int) ([]byte, func(), error) {
	return make([]byte, n), func() {}, nil
}

// seal does nothing where memory cannot be made read-only.
func seal([]byte) {}
