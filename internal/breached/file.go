package breached

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/FastFilter/xorfilter"
)

// The file of a filter, little-endian throughout:
//
//	offset  size  field
//	0       8     magic "\x89GBF\r\n\x1a\n"
//	8       2     format version (1)
//	10      1     source format: 1 sha1, 2 ntlm, 3 plain
//	11      1     filter kind: 1 binary fuse, 8-bit fingerprints
//	12      1     shard bits b: 2^b shards, chosen by a key's top b bits
//	13      3     zero
//	16      8     entries (distinct passwords)
//	24      8     build time, Unix seconds
//	32      8     minimum count of the build (0: none)
//	40      24    zero
//	64      24×2^b  shards: seed (8), segment length (4), segment count (4),
//	              entries (4), zero (4)
//	…             each shard's fingerprints, (segment count + 2) × segment
//	              length bytes, in shard order (none for an empty shard)
//	end−32  32    SHA-256 of everything before it
//
// The magic is PNG's trick: a high byte, a CR LF and a ^Z, so a transfer
// that strips the eighth bit or rewrites line ends is caught at once.
const (
	magic           = "\x89GBF\r\n\x1a\n"
	fileVersion     = 1
	kindBinaryFuse8 = 1
	headerSize      = 64
	shardSize       = 24
	checksumSize    = sha256.Size
	// maxShardBits bounds the shard table (65,536 shards, 1.5 MiB).
	maxShardBits = 16
	// maxSegmentLength is the longest segment the filter library makes.
	maxSegmentLength = 1 << 18
)

// ErrInvalidFile is wrapped by every error about a file that is not a
// filter this guardian can load: another file, another version, a file cut
// short or corrupted.
var ErrInvalidFile = errors.New("not a usable breached-password filter")

// invalid is an ErrInvalidFile saying why.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidFile, fmt.Sprintf(format, args...))
}

var formatCodes = [...]Format{1: SHA1, 2: NTLM, 3: Plain}

func formatCode(f Format) byte {
	for i, g := range formatCodes {
		if g == f && g != "" {
			return byte(i)
		}
	}
	return 0
}

// header is a file's fixed header.
type header struct {
	format    Format
	shardBits uint
	entries   uint64
	builtAt   int64
	minCount  uint64
}

func (h *header) encode() []byte {
	b := make([]byte, headerSize)
	copy(b, magic)
	binary.LittleEndian.PutUint16(b[8:], fileVersion)
	b[10] = formatCode(h.format)
	b[11] = kindBinaryFuse8
	b[12] = byte(h.shardBits)
	binary.LittleEndian.PutUint64(b[16:], h.entries)
	binary.LittleEndian.PutUint64(b[24:], uint64(h.builtAt))
	binary.LittleEndian.PutUint64(b[32:], h.minCount)
	return b
}

// decodeHeader reads the header at the start of b, which holds at least
// headerSize bytes.
func decodeHeader(b []byte) (header, error) {
	var h header
	if v := binary.LittleEndian.Uint16(b[8:]); v != fileVersion {
		return h, invalid("format version %d; this guardian reads version %d: build the filter again with this guardian's 'guardian breached build'", v, fileVersion)
	}
	if c := int(b[10]); c >= len(formatCodes) || formatCodes[c] == "" {
		return h, invalid("unknown source format %d in the header", c)
	}
	h.format = formatCodes[b[10]]
	if b[11] != kindBinaryFuse8 {
		return h, invalid("unknown filter kind %d in the header", b[11])
	}
	if h.shardBits = uint(b[12]); h.shardBits > maxShardBits {
		return h, invalid("%d shard bits in the header, at most %d", h.shardBits, maxShardBits)
	}
	if !allZero(b[13:16]) || !allZero(b[40:headerSize]) {
		return h, invalid("reserved header bytes are not zero")
	}
	h.entries = binary.LittleEndian.Uint64(b[16:])
	h.builtAt = int64(binary.LittleEndian.Uint64(b[24:]))
	h.minCount = binary.LittleEndian.Uint64(b[32:])
	return h, nil
}

func allZero(b []byte) bool { return bytes.Count(b, []byte{0}) == len(b) }

// shard is one shard's record in the table.
type shard struct {
	seed          uint64
	segmentLength uint32
	segmentCount  uint32
	entries       uint32
}

func (s *shard) encode(b []byte) {
	binary.LittleEndian.PutUint64(b, s.seed)
	binary.LittleEndian.PutUint32(b[8:], s.segmentLength)
	binary.LittleEndian.PutUint32(b[12:], s.segmentCount)
	binary.LittleEndian.PutUint32(b[16:], s.entries)
	binary.LittleEndian.PutUint32(b[20:], 0)
}

func decodeShard(b []byte) (shard, bool) {
	s := shard{
		seed:          binary.LittleEndian.Uint64(b),
		segmentLength: binary.LittleEndian.Uint32(b[8:]),
		segmentCount:  binary.LittleEndian.Uint32(b[12:]),
		entries:       binary.LittleEndian.Uint32(b[16:]),
	}
	return s, binary.LittleEndian.Uint32(b[20:]) == 0
}

// fingerprints is how many fingerprint bytes the shard has.
func (s *shard) fingerprints() uint64 {
	if s.segmentLength == 0 {
		return 0
	}
	return (uint64(s.segmentCount) + 2) * uint64(s.segmentLength)
}

// check reports what is wrong with s, or "" when a lookup in it stays within
// its fingerprints: a power-of-two segment length, at least one segment, and
// sizes within 32 bits, as the filter library's arithmetic needs.
func (s *shard) check() string {
	switch {
	case s.segmentLength == 0:
		if s.segmentCount != 0 || s.entries != 0 || s.seed != 0 {
			return "an empty shard with parameters"
		}
	case s.segmentLength > maxSegmentLength || bits.OnesCount32(s.segmentLength) != 1:
		return fmt.Sprintf("segment length %d", s.segmentLength)
	case s.segmentCount == 0 || s.entries == 0:
		return "no segments or no entries"
	case s.fingerprints() > math.MaxUint32:
		return fmt.Sprintf("%d segments of %d", s.segmentCount, s.segmentLength)
	}
	return ""
}

// Parse reads a filter file held in data, which the Filter then uses in
// place: data must not change while the Filter is in use.
func Parse(data []byte) (*Filter, error) {
	f, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("breached: %w", err)
	}
	return f, nil
}

// parse is Parse, its errors without the package prefix.
func parse(data []byte) (*Filter, error) {
	if err := checkStart(data, int64(len(data))); err != nil {
		return nil, err
	}
	h, err := decodeHeader(data)
	if err != nil {
		return nil, err
	}
	n := 1 << h.shardBits
	tableEnd := headerSize + n*shardSize
	if len(data) < tableEnd+checksumSize {
		return nil, invalid("cut short: %d bytes, its header and shard table alone need %d", len(data), tableEnd+checksumSize)
	}
	shards := make([]shard, n)
	want := uint64(tableEnd + checksumSize)
	for i := range shards {
		var ok bool
		if shards[i], ok = decodeShard(data[headerSize+i*shardSize:]); !ok {
			return nil, invalid("shard %d: reserved bytes are not zero", i)
		}
		want += shards[i].fingerprints()
	}
	switch size := uint64(len(data)); {
	case size < want:
		return nil, invalid("cut short: %d bytes of %d", size, want)
	case size > want:
		return nil, invalid("%d bytes more than its header and shard table say (%d)", size-want, want)
	}
	body := data[:len(data)-checksumSize]
	sum := sha256.Sum256(body)
	if !bytes.Equal(sum[:], data[len(body):]) {
		return nil, invalid("checksum mismatch: the file is corrupted")
	}
	f := &Filter{
		info: Info{
			Format:   h.format,
			Entries:  h.entries,
			BuiltAt:  time.Unix(h.builtAt, 0).UTC(),
			MinCount: h.minCount,
			Shards:   n,
			Bytes:    int64(len(data)),
			Checksum: hex.EncodeToString(sum[:]),
		},
		shardShift: 64 - h.shardBits,
		shards:     make([]xorfilter.BinaryFuse[uint8], n),
		data:       data,
	}
	var entries uint64
	off := uint64(tableEnd)
	for i := range shards {
		s := &shards[i]
		if why := s.check(); why != "" {
			return nil, invalid("shard %d: %s", i, why)
		}
		entries += uint64(s.entries)
		end := off + s.fingerprints()
		if s.segmentLength > 0 {
			f.shards[i] = xorfilter.BinaryFuse[uint8]{
				Seed:               s.seed,
				SegmentLength:      s.segmentLength,
				SegmentLengthMask:  s.segmentLength - 1,
				SegmentCount:       s.segmentCount,
				SegmentCountLength: s.segmentCount * s.segmentLength,
				Fingerprints:       data[off:end:end],
			}
		}
		off = end
	}
	if entries != h.entries {
		return nil, invalid("its shards hold %d entries, its header says %d", entries, h.entries)
	}
	return f, nil
}

// checkStart refuses, from the first bytes of a file of size bytes, what is
// not a filter at all or is too short to be one.
func checkStart(b []byte, size int64) error {
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		return invalid("no filter header (build one with 'guardian breached build')")
	}
	if size < headerSize+checksumSize || len(b) < headerSize {
		return invalid("cut short: %d bytes", size)
	}
	return nil
}
