package storetest

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// listCases test the list sets of store.Lists, which every store
// implements.
var listCases = []testCase{
	{"lists/put_load", testListPutLoad},
	{"lists/bounded", testListBounded},
	{"lists/expiry", testListExpiry},
	{"lists/apart", testListApart},
}

// lists returns the harness's store as a store.Lists, failing the test when
// it is not one.
func (h *harness) lists() store.Lists {
	h.t.Helper()
	l, ok := h.s.(store.Lists)
	if !ok {
		h.t.Fatalf("%T does not implement store.Lists", h.s)
	}
	return l
}

// listKey returns the key of the list set the test calls name.
func (h *harness) listKey(name string) string { return h.prefix + "{l" + name + "}" }

// load calls ListLoad, failing the test on an error.
func (h *harness) load(key, version string) (store.ListSnapshot, bool) {
	h.t.Helper()
	snap, changed, err := h.lists().ListLoad(context.Background(), key, version)
	if err != nil {
		h.t.Fatalf("ListLoad: %v", err)
	}
	return snap, changed
}

// put calls ListPut with a bound of max, failing the test on an error.
func (h *harness) put(key string, e store.ListEntry, max int) {
	h.t.Helper()
	if err := h.lists().ListPut(context.Background(), key, e, max); err != nil {
		h.t.Fatalf("ListPut %s: %v", e.ID, err)
	}
}

// ids are the ids of entries, in order.
func ids(entries []store.ListEntry) []string {
	out := []string{}
	for _, e := range entries {
		out = append(out, e.ID)
	}
	return out
}

// testListPutLoad: a set never written has a version; every change makes a
// new one; a reader holding the version reads nothing; a replaced entry is
// one entry; a delete removes it once.
func testListPutLoad(h *harness) {
	k := h.listKey("set")
	v0, changed := h.load(k, "")
	if !changed || v0.Version == "" || len(v0.Entries) != 0 {
		h.t.Fatalf("ListLoad of a new set = %+v, %v, want a version, changed, no entries", v0, changed)
	}
	if snap, changed := h.load(k, v0.Version); changed || len(snap.Entries) != 0 {
		h.t.Fatalf("ListLoad at its version = %+v, %v, want unchanged", snap, changed)
	}
	exp := t0.Add(time.Hour)
	h.put(k, store.ListEntry{ID: "b", Data: []byte(`{"n":1}`), Expires: exp}, 10)
	h.put(k, store.ListEntry{ID: "a", Data: []byte("x")}, 10)
	h.put(k, store.ListEntry{ID: "b", Data: []byte(`{"n":2}`), Expires: exp}, 10)
	v1, changed := h.load(k, v0.Version)
	want := []store.ListEntry{{ID: "a", Data: []byte("x")}, {ID: "b", Data: []byte(`{"n":2}`), Expires: exp}}
	if !changed || v1.Version == v0.Version || !sameEntries(v1.Entries, want) {
		h.t.Fatalf("ListLoad after puts = %+v, %v, want a new version and %+v", v1, changed, want)
	}
	if snap, changed := h.load(k, v1.Version); changed || len(snap.Entries) != 0 {
		h.t.Fatalf("ListLoad at the new version = %+v, %v, want unchanged", snap, changed)
	}
	for i, want := range []bool{true, false} {
		got, err := h.lists().ListDelete(context.Background(), k, "a")
		if err != nil || got != want {
			h.t.Fatalf("ListDelete %d = %v, %v, want %v", i, got, err, want)
		}
	}
	v2, changed := h.load(k, v1.Version)
	if !changed || v2.Version == v1.Version || !slices.Equal(ids(v2.Entries), []string{"b"}) {
		h.t.Fatalf("ListLoad after the delete = %+v, %v, want a new version and b alone", v2, changed)
	}
	if got, err := h.lists().ListDelete(context.Background(), h.listKey("never"), "a"); err != nil || got {
		h.t.Errorf("ListDelete on a set never written = %v, %v, want false", got, err)
	}
}

// sameEntries reports whether got and want hold the same entries, expiries
// compared as instants to the microsecond.
func sameEntries(got, want []store.ListEntry) bool {
	return slices.EqualFunc(got, want, func(a, b store.ListEntry) bool {
		return a.ID == b.ID && string(a.Data) == string(b.Data) && a.Expires.UnixMicro() == b.Expires.UnixMicro() && a.Expires.IsZero() == b.Expires.IsZero()
	})
}

// testListBounded: a set at its bound refuses a new id with ErrFull and
// changes nothing, still replaces an entry it holds, and takes a new one
// once another is deleted.
func testListBounded(h *harness) {
	k := h.listKey("set")
	h.put(k, store.ListEntry{ID: "a"}, 2)
	h.put(k, store.ListEntry{ID: "b"}, 2)
	before, _ := h.load(k, "")
	if err := h.lists().ListPut(context.Background(), k, store.ListEntry{ID: "c"}, 2); !errors.Is(err, store.ErrFull) {
		h.t.Fatalf("ListPut beyond the bound = %v, want ErrFull", err)
	}
	if snap, changed := h.load(k, before.Version); changed {
		h.t.Fatalf("ListLoad after a refused put = %+v, changed, want unchanged", snap)
	}
	h.put(k, store.ListEntry{ID: "b", Data: []byte("again")}, 2)
	if _, err := h.lists().ListDelete(context.Background(), k, "a"); err != nil {
		h.t.Fatal(err)
	}
	h.put(k, store.ListEntry{ID: "c"}, 2)
	if snap, _ := h.load(k, ""); !slices.Equal(ids(snap.Entries), []string{"b", "c"}) {
		h.t.Errorf("entries = %v, want [b c]", ids(snap.Entries))
	}
}

// testListExpiry: an entry is read until its expiry by the store's clock
// and not from then; a put forgets what expired, so it takes no room.
func testListExpiry(h *harness) {
	k := h.listKey("set")
	h.put(k, store.ListEntry{ID: "short", Expires: t0.Add(time.Minute)}, 2)
	h.put(k, store.ListEntry{ID: "long", Expires: t0.Add(time.Hour)}, 2)
	h.clock.Set(t0.Add(time.Minute - time.Microsecond))
	if snap, _ := h.load(k, ""); !slices.Equal(ids(snap.Entries), []string{"long", "short"}) {
		h.t.Fatalf("entries just before the expiry = %v, want [long short]", ids(snap.Entries))
	}
	h.clock.Set(t0.Add(time.Minute))
	if snap, _ := h.load(k, ""); !slices.Equal(ids(snap.Entries), []string{"long"}) {
		h.t.Fatalf("entries at the expiry = %v, want [long]", ids(snap.Entries))
	}
	h.put(k, store.ListEntry{ID: "next"}, 2)
	if snap, _ := h.load(k, ""); !slices.Equal(ids(snap.Entries), []string{"long", "next"}) {
		h.t.Errorf("entries after a put = %v, want [long next]", ids(snap.Entries))
	}
}

// testListApart: sets under two keys do not share entries nor bounds.
func testListApart(h *harness) {
	a, b := h.listKey("a"), h.listKey("b")
	h.put(a, store.ListEntry{ID: "x"}, 1)
	h.put(b, store.ListEntry{ID: "y"}, 1)
	if snap, _ := h.load(a, ""); !slices.Equal(ids(snap.Entries), []string{"x"}) {
		h.t.Errorf("set a = %v, want [x]", ids(snap.Entries))
	}
	if snap, _ := h.load(b, ""); !slices.Equal(ids(snap.Entries), []string{"y"}) {
		h.t.Errorf("set b = %v, want [y]", ids(snap.Entries))
	}
}
