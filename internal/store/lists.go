package store

import (
	"context"
	"time"
)

// Lists is a store that keeps a small versioned set of entries apart from
// limit state: the fleet's deny and allow lists (package lists). An entry
// is opaque to the store but for its id and expiry. Every instance sharing
// the store reads the same set; a reader polls ListLoad with the version it
// holds, which costs the store almost nothing while the set does not
// change. Both of guardian's stores implement it; a set lives under one
// key, which on Redis names a few keys in one Cluster slot (its hash tag),
// and survives guardian's restarts as the store does.
type Lists interface {
	// ListPut adds e to the set under key, or replaces the entry of its
	// id, first forgetting the entries whose expiry has passed by the
	// store's clock. It returns ErrFull, changing nothing, when the set
	// holds max entries and none of e's id.
	ListPut(ctx context.Context, key string, e ListEntry, max int) error
	// ListDelete removes the entry of id from the set under key, and
	// reports whether there was one.
	ListDelete(ctx context.Context, key, id string) (bool, error)
	// ListLoad returns the set under key with its version, entries in order
	// of id, without the
	// entries whose expiry has passed by the store's clock; when version
	// is still the set's, it returns changed false and no entries. A set
	// never written has a version too, never "".
	ListLoad(ctx context.Context, key, version string) (snap ListSnapshot, changed bool, err error)
}

// ListEntry is one entry of a Lists set: an id, when it expires (the zero
// time: never) and the entry itself, encoded by its owner.
type ListEntry struct {
	ID      string
	Expires time.Time
	Data    []byte
}

// ListSnapshot is a Lists set as of one version.
type ListSnapshot struct {
	Version string
	Entries []ListEntry
}
