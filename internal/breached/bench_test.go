package breached

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchFilter builds and opens a SHA-1 filter of n random keys.
func benchFilter(b *testing.B, n int) *Filter {
	b.Helper()
	bl, err := NewBuilder(BuildConfig{Format: SHA1, TempDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer bl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for range n {
		if err := bl.add(rng.Uint64()); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(b.TempDir(), "bench.bgf")
	st, err := bl.Write(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d entries: %d bytes, %.2f bits an entry, %d shards", st.Entries, st.Bytes, st.BitsPerEntry(), st.Shards)
	return f
}

// BenchmarkContainsSHA1 is the lookup of POST /v1/passwords/check, once the
// hex is decoded: no allocation. The larger filter is past the CPU's
// caches, as a filter of the full list (a gigabyte) is.
func BenchmarkContainsSHA1(b *testing.B) {
	for _, n := range []int{1 << 20, 1 << 24} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			f := benchFilter(b, n)
			sums := make([][sha1.Size]byte, 1<<12)
			for i := range sums {
				sums[i] = sha1.Sum([]byte(fmt.Sprint("bench-", i)))
			}
			b.ReportAllocs()
			b.ResetTimer()
			hits, i := 0, 0
			for ; b.Loop(); i++ {
				in, err := f.ContainsSHA1(sums[i&(len(sums)-1)])
				if err != nil {
					b.Fatal(err)
				}
				if in {
					hits++
				}
			}
			b.ReportMetric(float64(hits)/float64(i), "hits/op")
		})
	}
}

// BenchmarkCheckHex is what a check carrying password_sha1 adds: decoding
// the hex and the lookup.
func BenchmarkCheckHex(b *testing.B) {
	f := benchFilter(b, 1<<20)
	sum := sha1.Sum([]byte("correct horse battery staple"))
	s := hex.EncodeToString(sum[:])
	b.ReportAllocs()
	for b.Loop() {
		d, ok := ParseSHA1(s)
		if !ok {
			b.Fatal("ParseSHA1")
		}
		if _, err := f.ContainsSHA1(d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkContainsPassword is the gateway's lookup of a secret it saw:
// hashing included.
func BenchmarkContainsPassword(b *testing.B) {
	f := benchFilter(b, 1<<20)
	b.ReportAllocs()
	for b.Loop() {
		f.ContainsPassword("correct horse battery staple")
	}
}

// BenchmarkNTLMHash is the hash an NTLM filter's gateway lookup pays.
func BenchmarkNTLMHash(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		NTLMHash("correct horse battery staple")
	}
}

// BenchmarkBuild reads Have I Been Pwned SHA-1 lines and builds their
// filter, in memory: the throughput of `guardian breached build` once
// input arrives faster than it is parsed.
func BenchmarkBuild(b *testing.B) {
	const lines = 1 << 20
	var in bytes.Buffer
	rng := rand.New(rand.NewPCG(3, 4))
	var raw [sha1.Size]byte
	for range lines {
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		fmt.Fprintf(&in, "%X:%d\r\n", raw, 1+rng.IntN(1000))
	}
	out := filepath.Join(b.TempDir(), "build.bgf")
	b.SetBytes(int64(in.Len()))
	b.ReportAllocs()
	start, n := time.Now(), 0
	for ; b.Loop(); n++ {
		bl, err := NewBuilder(BuildConfig{Format: SHA1, TempDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		if err := bl.Read(context.Background(), "bench", bytes.NewReader(in.Bytes())); err != nil {
			b.Fatal(err)
		}
		if _, err := bl.Write(context.Background(), out); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(lines)*float64(n)/time.Since(start).Seconds(), "lines/s")
	os.Remove(out)
}
