package breached_test

import (
	"context"
	"crypto/sha1"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/guardian-sec/guardian/internal/breached"
)

// A filter of a short list of common passwords, looked up by password (as
// a gateway that sees the secret does) and by SHA-1 (as the API is asked).
func Example() {
	dir, err := os.MkdirTemp("", "breached-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "common.bgf")

	b, err := breached.NewBuilder(breached.BuildConfig{Format: breached.Plain})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	if err := b.Read(context.Background(), "common.txt", strings.NewReader("123456\npassword\nqwerty\n")); err != nil {
		panic(err)
	}
	st, err := b.Write(context.Background(), path)
	if err != nil {
		panic(err)
	}

	f, err := breached.Open(path)
	if err != nil {
		panic(err)
	}
	in, err := f.ContainsSHA1(sha1.Sum([]byte("qwerty")))
	fmt.Println(st.Entries, f.Info().Format, in, err)
	fmt.Println(f.ContainsPassword("password"), f.ContainsPassword("correct horse battery staple"))
	// Output:
	// 3 plain true <nil>
	// true false
}
