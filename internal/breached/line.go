package breached

import (
	"bytes"
	"crypto/sha1"
	"errors"
	"fmt"
)

// utf8BOM starts some exported password lists; it is not part of the first
// password.
const utf8BOM = "\xef\xbb\xbf"

// johnComment starts the comment lines of John the Ripper's word lists
// (password.lst opens with a dozen of them).
const johnComment = "#!comment:"

// trimLineEnd drops line's "\n" or "\r\n".
func trimLineEnd(line []byte) []byte {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	return bytes.TrimSuffix(line, []byte{'\r'})
}

// ParseHashLine reads one line of a Have I Been Pwned hash list, its line
// end already removed: HASH or HASH:COUNT, HASH len(digest) bytes in hex
// digits of either case, COUNT a decimal number. It decodes HASH into
// digest and returns COUNT, and whether the line had one. The error says
// what is wrong without repeating the line.
func ParseHashLine(line, digest []byte) (count uint64, hasCount bool, err error) {
	hash, num, hasCount := bytes.Cut(line, []byte{':'})
	if len(hash) != 2*len(digest) {
		return 0, false, wrongLength(hash, len(digest))
	}
	if !decodeHex(digest, hash) {
		return 0, false, errors.New("the hash has a character that is not a hex digit")
	}
	if !hasCount {
		return 0, false, nil
	}
	if len(num) == 0 {
		return 0, false, errors.New("no count after ':'")
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, false, errors.New("the count is not a decimal number")
		}
		d := uint64(c - '0')
		if count > (1<<64-1-d)/10 {
			return 0, false, errors.New("the count does not fit 64 bits")
		}
		count = count*10 + d
	}
	return count, true, nil
}

// wrongLength explains a hash of the wrong length, naming the format it
// looks like.
func wrongLength(hash []byte, size int) error {
	want := fmt.Sprintf("%d hex digits (%s)", 2*size, formatOfSize(size))
	switch {
	case len(hash) == 0:
		return fmt.Errorf("no hash: want HASH:COUNT, HASH %s", want)
	case len(hash) == 2*sha1.Size && size != sha1.Size:
		return fmt.Errorf("a hash of 40 characters, like SHA-1 (--format sha1); want %s", want)
	case len(hash) == 2*NTLMSize && size != NTLMSize:
		return fmt.Errorf("a hash of 32 characters, like NTLM (--format ntlm); want %s", want)
	}
	return fmt.Errorf("a hash of %d characters; want %s (a list of passwords is --format plain)", len(hash), want)
}

func formatOfSize(size int) string {
	if size == NTLMSize {
		return "NTLM"
	}
	return "SHA-1"
}

// plainPassword returns the password on line, its line end removed, and
// false for a line that holds none: an empty line or a John the Ripper
// comment. first says whether it is an input's first line, which may start
// with a byte order mark.
func plainPassword(line []byte, first bool) ([]byte, bool) {
	if first {
		line = bytes.TrimPrefix(line, []byte(utf8BOM))
	}
	if len(line) == 0 || bytes.HasPrefix(line, []byte(johnComment)) {
		return nil, false
	}
	return line, true
}
