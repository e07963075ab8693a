package breached

import (
	"bufio"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/FastFilter/xorfilter"
)

// DefaultMemoryKeys is how many keys a build holds in memory (8 bytes each,
// 64 MiB) before it spills them to temporary files.
const DefaultMemoryKeys = 1 << 23

// DefaultShardKeys is the most keys a shard holds unless a build must
// make them larger: the filter library needs about 25 bytes a key while
// it builds one.
const DefaultShardKeys = 1 << 22

// spillBits is how many top bits of a key choose its spill file once a
// build spills: 256 files, 3.9 million keys each for a billion. A shard is
// one spill file or several consecutive ones.
const spillBits = 8

// maxLine is the longest input line a build reads.
const maxLine = 64 << 10

// ErrEmpty is returned by a build that read no password to keep.
var ErrEmpty = errors.New("breached: no entries to build a filter of")

// BuildConfig is what a build is made from.
type BuildConfig struct {
	// Format is the input lists' format (required).
	Format Format
	// MinCount leaves out hashes whose count is below it (sha1 and ntlm
	// only; 0 or 1 keeps every line). A line without a count is an error
	// when it is set.
	MinCount uint64
	// TempDir holds the spill files of a build too large for memory
	// (default os.TempDir()). They need 8 bytes a line.
	TempDir string
	// MemoryKeys is how many keys the build holds in memory before it
	// spills to TempDir (default DefaultMemoryKeys).
	MemoryKeys int
	// ShardKeys is the most keys a shard holds (default
	// DefaultShardKeys), but for a build that spilled more than 256 times
	// as many: it has 256 shards.
	ShardKeys int
	// BuiltAt is the build time the file records (default time.Now()).
	BuiltAt time.Time
	// Progress, when set, is called now and then while the build reads
	// and while it builds shards.
	Progress func(Progress)
}

// Progress is how far a build got.
type Progress struct {
	// Bytes and Lines are how much input was read.
	Bytes, Lines int64
	// Shard of Shards are built; both are 0 while input is still read.
	Shard, Shards int
}

// Stats sums up a finished build.
type Stats struct {
	// Lines is how many input lines held a hash or a password.
	Lines int64
	// Kept is how many of them had at least BuildConfig.MinCount.
	Kept int64
	// Entries is how many distinct passwords the filter holds.
	Entries uint64
	// Shards is how many binary fuse filters it is made of.
	Shards int
	// Bytes is the size of the file.
	Bytes int64
	// Spilled says whether the keys went through temporary files.
	Spilled bool
}

// BitsPerEntry is the file's size in bits over its entries.
func (s Stats) BitsPerEntry() float64 {
	if s.Entries == 0 {
		return 0
	}
	return float64(s.Bytes) * 8 / float64(s.Entries)
}

// Builder builds a filter from lists read one after the other, in bounded
// memory: keys beyond BuildConfig.MemoryKeys go to spill files, one per
// shard, and each shard is then built alone. Not safe for concurrent use.
type Builder struct {
	cfg      BuildConfig
	progress Progress
	kept     int64
	keys     []uint64
	digest   []byte

	spillDir string
	spills   []*os.File
	writers  []*bufio.Writer
}

// NewBuilder returns a Builder for cfg. Close it when done.
func NewBuilder(cfg BuildConfig) (*Builder, error) {
	if _, err := ParseFormat(string(cfg.Format)); err != nil {
		return nil, err
	}
	if cfg.Format == Plain && cfg.MinCount > 1 {
		return nil, errors.New("breached: a minimum count needs HASH:COUNT lists (sha1 or ntlm), not plain passwords")
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if cfg.MemoryKeys <= 0 {
		cfg.MemoryKeys = DefaultMemoryKeys
	}
	if cfg.ShardKeys <= 0 {
		cfg.ShardKeys = DefaultShardKeys
	}
	if cfg.BuiltAt.IsZero() {
		cfg.BuiltAt = time.Now()
	}
	size := sha1.Size
	if cfg.Format == NTLM {
		size = NTLMSize
	}
	// The key buffer at its full size at once: memory the build never
	// fills is never touched, and filling it copies nothing.
	return &Builder{cfg: cfg, keys: make([]uint64, 0, cfg.MemoryKeys), digest: make([]byte, size)}, nil
}

// progressEvery is how many lines go by between two Progress calls.
const progressEvery = 1 << 16

// Read adds the list r holds; name is how errors call it. A line that is not
// of the format is an error naming name and the line's number, and the
// build should stop. It stops with ctx's error when ctx ends.
func (b *Builder) Read(ctx context.Context, name string, r io.Reader) error {
	br := bufio.NewReaderSize(r, maxLine)
	for n := int64(1); ; n++ {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return fmt.Errorf("breached: %s:%d: a line longer than %d bytes", name, n, maxLine)
		}
		if len(line) > 0 {
			b.progress.Bytes += int64(len(line))
			if lerr := b.line(trimLineEnd(line), n == 1); lerr != nil {
				return fmt.Errorf("breached: %s:%d: %w", name, n, lerr)
			}
			if n%progressEvery == 0 {
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("breached: %s:%d: %w", name, n, err)
				}
				if b.cfg.Progress != nil {
					b.cfg.Progress(b.progress)
				}
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return fmt.Errorf("breached: %s: %w", name, err)
		}
	}
}

// line adds one line, its line end removed.
func (b *Builder) line(line []byte, first bool) error {
	if b.cfg.Format == Plain {
		pw, ok := plainPassword(line, first)
		if !ok {
			return nil
		}
		b.progress.Lines++
		sum := sha1.Sum(pw)
		return b.add(keyOf(sum[:]))
	}
	if len(line) == 0 {
		return nil
	}
	b.progress.Lines++
	count, hasCount, err := ParseHashLine(line, b.digest)
	switch {
	case err != nil:
		return err
	case b.cfg.MinCount > 1 && !hasCount:
		return errors.New("no count, and --min-count needs one (HASH:COUNT)")
	case hasCount && count < max(b.cfg.MinCount, 1):
		// Below the minimum, or a count of 0: the padding entries of
		// Have I Been Pwned's range API.
		return nil
	}
	return b.add(keyOf(b.digest))
}

// add keeps key, spilling the keys held when memory is full.
func (b *Builder) add(key uint64) error {
	b.kept++
	b.keys = append(b.keys, key)
	if len(b.keys) < b.cfg.MemoryKeys {
		return nil
	}
	return b.spill()
}

// spill appends the keys held to their shards' spill files.
func (b *Builder) spill() error {
	if b.spills == nil {
		if err := b.openSpills(); err != nil {
			return err
		}
	}
	var buf [8]byte
	for _, k := range b.keys {
		binary.LittleEndian.PutUint64(buf[:], k)
		if _, err := b.writers[k>>(64-spillBits)].Write(buf[:]); err != nil {
			return fmt.Errorf("breached: spill: %w", err)
		}
	}
	b.keys = b.keys[:0]
	return nil
}

func (b *Builder) openSpills() error {
	dir, err := os.MkdirTemp(b.cfg.TempDir, "guardian-breached-")
	if err != nil {
		return fmt.Errorf("breached: spill: %w", err)
	}
	b.spillDir = dir
	b.spills = make([]*os.File, 1<<spillBits)
	b.writers = make([]*bufio.Writer, 1<<spillBits)
	for i := range b.spills {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%03d", i)))
		if err != nil {
			return fmt.Errorf("breached: spill: %w", err)
		}
		b.spills[i] = f
		b.writers[i] = bufio.NewWriterSize(f, 32<<10)
	}
	return nil
}

// Close removes the build's spill files.
func (b *Builder) Close() error {
	for _, f := range b.spills {
		if f != nil {
			f.Close()
		}
	}
	b.spills, b.writers = nil, nil
	if b.spillDir == "" {
		return nil
	}
	err := os.RemoveAll(b.spillDir)
	b.spillDir = ""
	return err
}

// Write builds the filter of everything read and writes it to path,
// atomically: a new file beside it renamed into place once complete. A
// reader of path sees the old file or the new one, never a part. It stops
// with ctx's error when ctx ends.
func (b *Builder) Write(ctx context.Context, path string) (Stats, error) {
	defer b.Close()
	st := Stats{Lines: b.progress.Lines, Kept: b.kept, Spilled: b.spills != nil}
	if b.kept == 0 {
		return st, fmt.Errorf("%w: %d lines read, none kept", ErrEmpty, st.Lines)
	}
	src, err := b.sources()
	if err != nil {
		return st, err
	}
	out, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return st, fmt.Errorf("breached: %w", err)
	}
	defer func() {
		if out != nil {
			out.Close()
			os.Remove(out.Name())
		}
	}()
	h := header{format: b.cfg.Format, shardBits: src.bits, builtAt: b.cfg.BuiltAt.Unix(), minCount: b.cfg.MinCount}
	if h.minCount == 1 {
		h.minCount = 0
	}
	shards := 1 << src.bits
	table := make([]byte, shards*shardSize)
	w := bufio.NewWriterSize(out, 1<<20)
	if _, err := w.Write(make([]byte, headerSize+len(table))); err != nil {
		return st, fmt.Errorf("breached: %w", err)
	}
	var fb xorfilter.BinaryFuseBuilder
	for i := range shards {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("breached: %w", err)
		}
		keys, err := src.shard(i)
		if err != nil {
			return st, err
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		s, fp, err := buildShard(&fb, keys)
		if err != nil {
			return st, fmt.Errorf("breached: shard %d: %w", i, err)
		}
		if _, err := w.Write(fp); err != nil {
			return st, fmt.Errorf("breached: %w", err)
		}
		s.encode(table[i*shardSize:])
		h.entries += uint64(s.entries)
		if b.cfg.Progress != nil {
			b.cfg.Progress(Progress{Bytes: b.progress.Bytes, Lines: b.progress.Lines, Shard: i + 1, Shards: shards})
		}
	}
	if err := w.Flush(); err != nil {
		return st, fmt.Errorf("breached: %w", err)
	}
	if err := finish(out, h.encode(), table); err != nil {
		return st, err
	}
	fi, err := out.Stat()
	if err != nil {
		return st, fmt.Errorf("breached: %w", err)
	}
	if err := out.Close(); err != nil {
		return st, fmt.Errorf("breached: %w", err)
	}
	if err := os.Rename(out.Name(), path); err != nil {
		return st, fmt.Errorf("breached: %w", err)
	}
	out = nil
	st.Entries, st.Shards, st.Bytes = h.entries, shards, fi.Size()
	return st, nil
}

// finish writes header and table over the start of out, whose fingerprints
// are written, then appends the checksum of it all and syncs it.
func finish(out *os.File, header, table []byte) error {
	if _, err := out.WriteAt(header, 0); err != nil {
		return fmt.Errorf("breached: %w", err)
	}
	if _, err := out.WriteAt(table, headerSize); err != nil {
		return fmt.Errorf("breached: %w", err)
	}
	size, err := out.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("breached: %w", err)
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(out, 0, size)); err != nil {
		return fmt.Errorf("breached: checksum: %w", err)
	}
	if _, err := out.Write(sum.Sum(nil)); err != nil {
		return fmt.Errorf("breached: %w", err)
	}
	if err := out.Chmod(0o644); err != nil {
		return fmt.Errorf("breached: %w", err)
	}
	if err := out.Sync(); err != nil {
		return fmt.Errorf("breached: %w", err)
	}
	return nil
}

// buildShard builds the filter of keys, sorted and distinct, and returns its
// record and its fingerprints (owned by fb until its next build).
func buildShard(fb *xorfilter.BinaryFuseBuilder, keys []uint64) (shard, []byte, error) {
	if len(keys) == 0 {
		return shard{}, nil, nil
	}
	if len(keys) > math.MaxUint32/2 {
		return shard{}, nil, fmt.Errorf("%d keys, too many for one shard", len(keys))
	}
	f, err := xorfilter.BuildBinaryFuse[uint8](fb, keys)
	if err != nil {
		return shard{}, nil, err
	}
	s := shard{seed: f.Seed, segmentLength: f.SegmentLength, segmentCount: f.SegmentCount, entries: uint32(len(keys))}
	if uint64(len(f.Fingerprints)) != s.fingerprints() {
		return shard{}, nil, fmt.Errorf("the filter has %d fingerprints, its parameters %d", len(f.Fingerprints), s.fingerprints())
	}
	return s, f.Fingerprints, nil
}

// shardSource hands out the keys of each shard, unsorted.
type shardSource struct {
	bits  uint
	shard func(i int) ([]uint64, error)
}

// sources says where each shard's keys come from: ranges of the keys held,
// when the build never spilled, or else the spill files.
func (b *Builder) sources() (shardSource, error) {
	if b.spills == nil {
		keys := b.keys
		slices.Sort(keys)
		keys = slices.Compact(keys)
		bits := uint(0)
		for len(keys)>>bits > b.cfg.ShardKeys && bits < maxShardBits {
			bits++
		}
		return shardSource{bits: bits, shard: func(i int) ([]uint64, error) {
			lo, _ := slices.BinarySearchFunc(keys, i, func(k uint64, i int) int { return cmpShard(k, bits, i) })
			hi, _ := slices.BinarySearchFunc(keys, i+1, func(k uint64, i int) int { return cmpShard(k, bits, i) })
			return keys[lo:hi], nil
		}}, nil
	}
	if err := b.spill(); err != nil {
		return shardSource{}, err
	}
	for _, w := range b.writers {
		if err := w.Flush(); err != nil {
			return shardSource{}, fmt.Errorf("breached: spill: %w", err)
		}
	}
	// Consecutive spill files make one shard, as many as keep shards at
	// about ShardKeys keys: a shard of few keys costs more bits a key.
	bits := uint(0)
	for int(b.kept>>bits) > b.cfg.ShardKeys && bits < spillBits {
		bits++
	}
	per := 1 << (spillBits - bits)
	return shardSource{bits: bits, shard: func(i int) ([]uint64, error) {
		keys := b.keys[:0]
		for j := i * per; j < (i+1)*per; j++ {
			var err error
			if keys, err = b.readSpill(keys, j); err != nil {
				return nil, err
			}
		}
		b.keys = keys
		return keys, nil
	}}, nil
}

// cmpShard compares the shard of key k, in a filter of 2^bits shards, with
// shard i.
func cmpShard(k uint64, bits uint, i int) int {
	var s uint64
	if bits > 0 {
		s = k >> (64 - bits)
	}
	switch {
	case s < uint64(i):
		return -1
	case s > uint64(i):
		return 1
	}
	return 0
}

// readSpill appends the keys of spill file i to keys.
func (b *Builder) readSpill(keys []uint64, i int) ([]uint64, error) {
	f := b.spills[i]
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("breached: spill: %w", err)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var buf [8]byte
	for {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("breached: spill: %w", err)
		}
		keys = append(keys, binary.LittleEndian.Uint64(buf[:]))
	}
	return keys, nil
}
