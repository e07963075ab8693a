package breached

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
)

// Open loads the filter file at path. The file is read once, into memory
// outside Go's heap, and verified (header, size, checksum, every shard)
// before it is used: an operator may then replace or rewrite the file at
// will, and a reload (Open again) sees the new one. The memory is released
// once the Filter is no longer reachable.
func Open(path string) (*Filter, error) {
	f, err := open(path)
	if err != nil {
		return nil, fmt.Errorf("breached: %s: %w", path, err)
	}
	return f, nil
}

func open(path string) (*Filter, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	size := st.Size()
	// The header first, so that a wrong file is refused before a large
	// one is read.
	head := make([]byte, headerSize)
	n, err := io.ReadFull(file, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if err := checkStart(head[:n], size); err != nil {
		return nil, err
	}
	if _, err := decodeHeader(head); err != nil {
		return nil, err
	}
	if int64(int(size)) != size {
		return nil, invalid("%d bytes, too large for this platform", size)
	}
	data, release, err := allocate(int(size))
	if err != nil {
		return nil, fmt.Errorf("memory for %d bytes: %w", size, err)
	}
	copy(data, head)
	if _, err := io.ReadFull(file, data[headerSize:]); err != nil {
		release()
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, invalid("cut short while it was read")
		}
		return nil, err
	}
	flt, err := parse(data)
	if err != nil {
		release()
		return nil, err
	}
	seal(data)
	runtime.AddCleanup(flt, func(func()) { release() }, release)
	return flt, nil
}
