// Package breached answers, offline, whether a password is known to be
// breached: it builds a compact filter from Have I Been Pwned's downloadable
// hash lists (or from plain password lists) and looks passwords up in it,
// for password set and change flows (NIST SP 800-63B §3.1.1.2).
//
// A filter is a set of binary fuse filters with 8-bit fingerprints, one per
// shard of the key space: about 9 bits an entry, false positives 1 in 256
// (0.39%), never a false negative, three memory reads a lookup and no
// allocation. A filter is immutable and safe for concurrent use.
//
// A filter's keys are 64 bits of a hash of the password's SHA-1 (a filter
// built from SHA-1 lists or plain lists) or of its NTLM hash (a filter built
// from NTLM lists). A SHA-1 filter answers lookups by SHA-1, which is what
// an auth service sends; an NTLM filter can only answer a password guardian
// sees itself (ContainsPassword) or an NTLM hash.
package breached

import (
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unicode/utf16"

	"github.com/FastFilter/xorfilter"
	//lint:ignore SA1019 NTLM is MD4 of the password; Have I Been Pwned publishes NTLM lists, and compatibility is the only use here.
	"golang.org/x/crypto/md4"
)

// Format is the kind of list a filter is built from.
type Format string

// The formats of input lists.
const (
	// SHA1 is Have I Been Pwned's SHA-1 list: HASH:COUNT lines, 40 hex
	// digits.
	SHA1 Format = "sha1"
	// NTLM is Have I Been Pwned's NTLM list: HASH:COUNT lines, 32 hex
	// digits.
	NTLM Format = "ntlm"
	// Plain is a list of passwords, one a line; each is hashed with SHA-1,
	// so the filter answers as one built from SHA-1 hashes does.
	Plain Format = "plain"
)

// ParseFormat returns the Format named s.
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case SHA1, NTLM, Plain:
		return f, nil
	}
	return "", fmt.Errorf("breached: format %q is not sha1, ntlm or plain", s)
}

// Hash is the digest a filter's keys are made from.
type Hash string

// The digests a filter holds.
const (
	HashSHA1 Hash = "sha1"
	HashNTLM Hash = "ntlm"
)

// Hash is the digest of f's keys: NTLM for an NTLM list, SHA-1 otherwise.
func (f Format) Hash() Hash {
	if f == NTLM {
		return HashNTLM
	}
	return HashSHA1
}

// FalsePositiveRate is the chance that a password not in a filter's list is
// reported breached: 1 in 2^8, the width of a fingerprint.
const FalsePositiveRate = 1.0 / 256

// ErrWrongHash is returned by a lookup by one digest in a filter of the
// other: a SHA-1 cannot be looked up in a filter of NTLM hashes, nor the
// other way round.
var ErrWrongHash = errors.New("breached: the filter holds another hash")

// Info describes a filter, as its header says.
type Info struct {
	// Format is the kind of list the filter was built from.
	Format Format
	// Entries is how many distinct passwords it holds.
	Entries uint64
	// BuiltAt is when it was built, to the second.
	BuiltAt time.Time
	// MinCount is the --min-count of the build: hashes seen fewer times
	// were left out (0: none was).
	MinCount uint64
	// Shards is how many binary fuse filters it is made of.
	Shards int
	// Bytes is the size of its file.
	Bytes int64
	// Checksum is the SHA-256 of its file (less the checksum itself), in
	// hex: the same for every copy of one build.
	Checksum string
}

// Filter is a loaded breached-password filter. It is immutable and safe for
// concurrent use; the zero value holds nothing and answers false.
type Filter struct {
	info       Info
	shardShift uint
	shards     []xorfilter.BinaryFuse[uint8]
	// data holds the file the shards' fingerprints point into; it is
	// released when the Filter is no longer reachable.
	data []byte
}

// Info describes f.
func (f *Filter) Info() Info { return f.info }

// ContainsSHA1 reports whether the password whose SHA-1 is sum is in f
// (false positives FalsePositiveRate), or ErrWrongHash when f holds NTLM
// hashes. It allocates nothing.
func (f *Filter) ContainsSHA1(sum [sha1.Size]byte) (bool, error) {
	if f.info.Format.Hash() != HashSHA1 {
		return false, ErrWrongHash
	}
	return f.contains(keyOf(sum[:])), nil
}

// NTLMSize is the size of an NTLM hash in bytes.
const NTLMSize = md4.Size

// ContainsNTLM reports whether the password whose NTLM hash is sum is in f,
// or ErrWrongHash when f holds SHA-1 hashes.
func (f *Filter) ContainsNTLM(sum [NTLMSize]byte) (bool, error) {
	if f.info.Format.Hash() != HashNTLM {
		return false, ErrWrongHash
	}
	return f.contains(keyOf(sum[:])), nil
}

// ContainsPassword reports whether password is in f, hashing it with the
// filter's own digest: for callers that see the password itself (gateway
// mode), whichever list the filter was built from.
func (f *Filter) ContainsPassword(password string) bool {
	if f.info.Format.Hash() == HashNTLM {
		in, _ := f.ContainsNTLM(NTLMHash(password))
		return in
	}
	in, _ := f.ContainsSHA1(SHA1Sum(password))
	return in
}

// contains looks key up in its shard.
func (f *Filter) contains(key uint64) bool {
	if len(f.shards) == 0 {
		return false
	}
	// A shift of 64 (one shard) gives 0.
	sh := &f.shards[key>>f.shardShift]
	in := len(sh.Fingerprints) > 0 && sh.Contains(key)
	// The fingerprints live in f.data, which f's cleanup releases: keep f
	// reachable until they were read.
	runtime.KeepAlive(f)
	return in
}

// SHA1Sum is the SHA-1 of password, what a filter of SHA-1 or plain lists
// is looked up by.
func SHA1Sum(password string) [sha1.Size]byte { return sha1.Sum([]byte(password)) }

// NTLMHash is the NTLM hash of password: MD4 of its UTF-16LE encoding, as
// Windows and Have I Been Pwned's NTLM list have it.
func NTLMHash(password string) [NTLMSize]byte {
	units := utf16.Encode([]rune(password))
	b := make([]byte, 2*len(units))
	for i, u := range units {
		binary.LittleEndian.PutUint16(b[2*i:], u)
	}
	h := md4.New()
	h.Write(b)
	var sum [NTLMSize]byte
	h.Sum(sum[:0])
	return sum
}

// ParseSHA1 decodes s, 40 hex digits in either case, into a SHA-1.
func ParseSHA1(s string) ([sha1.Size]byte, bool) {
	var sum [sha1.Size]byte
	ok := len(s) == 2*sha1.Size && decodeHex(sum[:], s)
	return sum, ok
}

// decodeHex decodes the 2×len(dst) hex digits of src, in either case, into
// dst, and reports whether they all were hex digits.
func decodeHex[S string | []byte](dst []byte, src S) bool {
	for i := range dst {
		hi, lo := hexValues[src[2*i]], hexValues[src[2*i+1]]
		if hi|lo == 0xff {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

// hexValues maps a byte to its value as a hex digit, and every other byte
// to 0xff.
var hexValues = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		t[c] = byte(i)
	}
	for i, c := range "ABCDEF" {
		t[c] = byte(10 + i)
	}
	return t
}()

// keyOf is the filter key of a digest: its first 64 bits, mixed by
// splitmix64's finaliser (a bijection). Real digests are uniform already;
// the mix keeps the shards even for inputs that are not (made-up or
// sequential "hashes").
func keyOf(digest []byte) uint64 {
	z := binary.BigEndian.Uint64(digest)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
