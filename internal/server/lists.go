package server

import (
	"context"
	"time"

	"github.com/guardian-sec/guardian/internal/httpapi"
	"github.com/guardian-sec/guardian/internal/lists"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
)

// listStore returns what the instance keeps its lists in: st when it is a
// store.Lists (the embedded store, a test's), a fresh embedded store
// otherwise, so an instance without a shared store keeps its entries until
// it restarts.
func listStore(st store.Store, now func() time.Time) store.Lists {
	if l, ok := st.(store.Lists); ok {
		return l
	}
	return memstore.New(memstore.Config{Now: now})
}

// newLists builds the instance's deny and allow lists on st, with the
// static entries of the rules in force, and reads the store's entries once,
// so that an instance restarted applies them before its first check.
func (s *Server) newLists(st store.Lists) *lists.List {
	l := lists.New(lists.Config{Store: st, Rules: s.holder.Load, Hasher: s.hasher, Normalizer: s.cfg.Normalizer, Now: s.cfg.Now, Logger: s.log})
	l.SetStatic(s.holder.Load())
	ctx, cancel := context.WithTimeout(context.Background(), beatTimeout)
	l.Ride(ctx, false)
	cancel()
	return l
}

// listAdmin is the admin API's way to the lists: every change an admin
// makes goes through it, and so through listChanged.
type listAdmin struct{ s *Server }

var _ httpapi.Lister = listAdmin{}

// Add adds an entry and tells listChanged.
func (a listAdmin) Add(ctx context.Context, spec lists.Spec, subject string) (lists.Entry, error) {
	e, err := a.s.lists.Add(ctx, spec, subject)
	if err == nil {
		a.s.listChanged(ctx, "added", e)
	}
	return e, err
}

// Delete removes an entry and tells listChanged.
func (a listAdmin) Delete(ctx context.Context, id string) (lists.Entry, error) {
	e, err := a.s.lists.Delete(ctx, id)
	if err == nil {
		a.s.listChanged(ctx, "deleted", e)
	}
	return e, err
}

// Entries returns the entries in force that the tenant of ctx sees.
func (a listAdmin) Entries(ctx context.Context, now time.Time) (deny, allow []lists.Entry) {
	return a.s.lists.Entries(ctx, now)
}

// listChanged is the one place every change of the lists made here goes
// through, once it took effect: change is "added" or "deleted", e the
// entry (an account only as its pseudonym). The audit line is the API's;
// the list_changed webhook event (contract 8.5) is sent from here.
func (s *Server) listChanged(ctx context.Context, change string, e lists.Entry) {
	s.log.DebugContext(ctx, "lists changed", "change", change, "list", e.List, "id", e.ID)
	name := e.Account
	if e.Network.IsValid() {
		name = e.Network.String()
	}
	s.listEvent(e.List, change, e.ID, name, e.Tenant)
}
