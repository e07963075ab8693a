package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// TokenFunc is a TokenSource calling a function for every token: a secret
// manager's client, say. It must be safe for concurrent use and should
// cache what it fetches.
type TokenFunc func(ctx context.Context) (string, error)

// Token returns f(ctx).
func (f TokenFunc) Token(ctx context.Context) (string, error) { return f(ctx) }

var _ TokenSource = TokenFunc(nil)

// DefaultFileTokenEvery is how often a FileToken looks at its file when
// FileToken.Every is not set.
const DefaultFileTokenEvery = 10 * time.Second

// ErrNoToken is returned by a FileToken whose file has never held a token.
var ErrNoToken = errors.New("client: no service token")

// FileToken is a TokenSource reading the service token from a file (its
// first line, surrounding space trimmed), such as a mounted Kubernetes
// secret, and reading it again when the file changes: a rotated token is
// used without a restart. The file is looked at, with one stat, at most
// every Every; and at once when guardian refuses the token (401), since
// the Client then asks for a fresh one (Invalidate) and resends the call
// once if it got another token.
//
// While the file is missing, empty or being rewritten, the last token read
// is kept. A FileToken is safe for concurrent use; build it with
// NewFileToken.
type FileToken struct {
	path  string
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	token   string
	info    os.FileInfo // of the file the token was read from
	checked time.Time
	force   bool // read the file at the next Token, changed or not
}

var _ TokenSource = (*FileToken)(nil)

// NewFileToken returns a FileToken for path, looked at every every (zero
// means DefaultFileTokenEvery). It reads the file once, and fails when
// that gives no token.
func NewFileToken(path string, every time.Duration) (*FileToken, error) {
	if every <= 0 {
		every = DefaultFileTokenEvery
	}
	f := &FileToken{path: path, every: every, now: time.Now}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.reload(); err != nil {
		return nil, err
	}
	f.checked = f.now()
	return f, nil
}

// Token returns the token the file holds, reading it again when the file
// changed since it was last read.
func (f *FileToken) Token(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := f.now(); now.Sub(f.checked) >= f.every {
		f.checked = now
		_ = f.reload() // on failure the last token stays in use
	}
	if f.token == "" {
		return "", fmt.Errorf("%w in %s", ErrNoToken, f.path)
	}
	return f.token, nil
}

// Invalidate makes the next Token read the file again, whenever it last
// did. The Client calls it when guardian refuses a token.
func (f *FileToken) Invalidate() {
	f.mu.Lock()
	f.checked, f.force = time.Time{}, true
	f.mu.Unlock()
}

// reload reads the file if it changed; f.mu is held.
func (f *FileToken) reload() error {
	st, err := os.Stat(f.path)
	if err != nil {
		return fmt.Errorf("client: token file: %w", err)
	}
	if f.token != "" && !f.force && os.SameFile(st, f.info) && st.ModTime().Equal(f.info.ModTime()) && st.Size() == f.info.Size() {
		return nil
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return fmt.Errorf("client: token file: %w", err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return fmt.Errorf("%w in %s", ErrNoToken, f.path)
	}
	f.token, f.info, f.force = tok, st, false
	return nil
}

// invalidator is a TokenSource that can be told its token was refused.
type invalidator interface {
	Invalidate()
}
