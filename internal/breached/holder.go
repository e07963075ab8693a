package breached

import (
	"sync/atomic"
	"time"
)

// Loaded is a filter in use, with where and when it was loaded.
type Loaded struct {
	Filter *Filter
	// Source is the path it was read from.
	Source string
	// LoadedAt is when it was read.
	LoadedAt time.Time
}

// Holder holds the filter in use and swaps it atomically on a reload: a
// lookup that loaded one finishes on it. The zero value holds none; it is
// safe for concurrent use.
type Holder struct {
	p atomic.Pointer[Loaded]
}

// Load returns the filter in use, or nil when none is loaded. A nil Holder
// holds none.
func (h *Holder) Load() *Loaded {
	if h == nil {
		return nil
	}
	return h.p.Load()
}

// Store makes l the filter in use.
func (h *Holder) Store(l *Loaded) { h.p.Store(l) }
