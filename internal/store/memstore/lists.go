package memstore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/guardian-sec/guardian/internal/store"
)

var _ store.Lists = (*Store)(nil)

// listSets are a Store's Lists sets by key. They take no part in MaxKeys
// nor in eviction: each is bounded by the max of its puts.
type listSets struct {
	mu   sync.Mutex
	sets map[string]*listSet
}

// listSet is one set: its entries by id and its version, which every
// change increments.
type listSet struct {
	entries map[string]store.ListEntry
	version int64
}

// set returns the set of key, making it when make is set; l.mu is held.
func (l *listSets) set(key string, make bool) *listSet {
	if s := l.sets[key]; s != nil || !make {
		return s
	}
	if l.sets == nil {
		l.sets = map[string]*listSet{}
	}
	s := &listSet{entries: map[string]store.ListEntry{}}
	l.sets[key] = s
	return s
}

// ListPut adds e to the set of key, as store.Lists says.
func (s *Store) ListPut(_ context.Context, key string, e store.ListEntry, max int) error {
	if key == "" || e.ID == "" {
		return store.ErrBadBatch
	}
	now := s.now()
	l := &s.lists
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.set(key, true)
	for id, old := range set.entries {
		if !old.Expires.IsZero() && !now.Before(old.Expires) {
			delete(set.entries, id)
		}
	}
	if _, held := set.entries[e.ID]; !held && len(set.entries) >= max {
		return store.ErrFull
	}
	e.Data = slices.Clone(e.Data)
	set.entries[e.ID] = e
	set.version++
	return nil
}

// ListDelete removes the entry of id from the set of key.
func (s *Store) ListDelete(_ context.Context, key, id string) (bool, error) {
	l := &s.lists
	l.mu.Lock()
	defer l.mu.Unlock()
	set := l.set(key, false)
	if set == nil {
		return false, nil
	}
	if _, held := set.entries[id]; !held {
		return false, nil
	}
	delete(set.entries, id)
	set.version++
	return true, nil
}

// ListLoad returns the set of key unless version is its own.
func (s *Store) ListLoad(_ context.Context, key, version string) (store.ListSnapshot, bool, error) {
	now := s.now()
	l := &s.lists
	l.mu.Lock()
	defer l.mu.Unlock()
	v := "0"
	set := l.set(key, false)
	if set != nil {
		v = strconv.FormatInt(set.version, 10)
	}
	if v == version {
		return store.ListSnapshot{Version: v}, false, nil
	}
	snap := store.ListSnapshot{Version: v}
	if set != nil {
		for _, e := range set.entries {
			if e.Expires.IsZero() || now.Before(e.Expires) {
				e.Data = slices.Clone(e.Data)
				snap.Entries = append(snap.Entries, e)
			}
		}
	}
	slices.SortFunc(snap.Entries, func(a, b store.ListEntry) int { return strings.Compare(a.ID, b.ID) })
	return snap, true, nil
}
