package lists

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// Key is the store key of the fleet's list set (store.Lists): its hash tag
// keeps the set's keys in one Redis Cluster slot.
const Key = "guardian:v1:{lists}"

// MaxEntries is the most entries the admin API may have in force at once,
// fleet-wide, deny and allow together, unless Config.MaxEntries says
// otherwise. Static entries are bounded apart (rules.MaxStaticEntries).
const MaxEntries = 10_000

// Errors of Add and Delete.
var (
	// ErrFull reports an entry refused because MaxEntries are in force:
	// they lapse with their ttl, or DELETE removes them.
	ErrFull = errors.New("lists: too many entries in force")
	// ErrNotFound reports an id no entry in force has.
	ErrNotFound = errors.New("lists: no such entry")
	// ErrStatic reports a DELETE of a static entry, which only its rules
	// file removes.
	ErrStatic = errors.New("lists: a static entry")
	// ErrShared reports a tenant's call on a network entry: network
	// entries apply to every tenant, as address rules do, so only a call
	// without a tenant makes or removes one.
	ErrShared = errors.New("lists: a network entry applies to every tenant")
)

// Config configures a List. Store, Rules and Hasher are required.
type Config struct {
	// Store keeps the entries for every instance sharing it.
	Store store.Lists
	// Key is the set's store key (default Key).
	Key string
	// Rules returns the rules in force, which an allow entry's exempt
	// list is checked against.
	Rules func() *rules.Set
	// Hasher makes an account's pseudonym: the instance's one Hasher of
	// the hash key. Normalizer normalises accounts as the engine does
	// (nil: the defaults).
	Hasher     *keys.Hasher
	Normalizer *keys.Normalizer
	// Now is the clock entries are made and lapse on (default time.Now).
	Now func() time.Time
	// Logger receives the first failure of a run of failing rounds and the
	// recovery (default slog.Default()).
	Logger *slog.Logger
	// MaxEntries bounds the API's entries in force (default MaxEntries).
	MaxEntries int
	// Timeout bounds Add's and Delete's store call (default 2s); rounds
	// are bounded by the deadline of Ride's context.
	Timeout time.Duration
}

// defaultTimeout is Config.Timeout's default.
const defaultTimeout = 2 * time.Second

// List is an instance's view of the deny and allow lists. Match answers
// from an immutable index in memory, which Add and Delete change at once
// and Ride, called on the instance's beat, refreshes from the store, so
// every instance applies a change within a beat or two. It is safe for
// concurrent use; build one with New.
type List struct {
	cfg Config

	// mu guards everything below but view.
	mu sync.Mutex
	// fleet are the store's entries as last read, at version; static the
	// rules file's.
	fleet   []*Entry
	static  []*Entry
	version string
	failing bool

	view atomic.Pointer[index]
}

// New returns a List for cfg, holding no entry until Ride reads the
// store's and SetStatic the rules file's.
func New(cfg Config) *List {
	if cfg.Key == "" {
		cfg.Key = Key
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = MaxEntries
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	l := &List{cfg: cfg}
	l.view.Store(emptyIndex)
	return l
}

// Match returns what the lists say of a check from ip (the zero Addr for
// none) of the normalised account ("" for none) in the tenant ctx carries
// (keys.TenantOf), at now. It hashes the account into its tenant's
// pseudonym only when an entry names an account, so an account entry
// matches the checks of its own tenant alone, and costs a map lookup per
// prefix length in use otherwise.
func (l *List) Match(ctx context.Context, ip netip.Addr, account string, now time.Time) Match {
	return l.view.Load().match(ip, func() string {
		if account == "" {
			return ""
		}
		return l.cfg.Hasher.ForContext(ctx).Pseudonym(keys.PseudonymAccount, account)
	}, now)
}

// Add makes the entry spec asks for, added by the admin token's subject
// in the tenant ctx carries, in the store and here at once; other
// instances apply it on their next round. It returns an error wrapping
// ErrInvalid or ErrMissing for a spec that makes no entry, ErrShared for a
// tenant's network entry, ErrFull, or store.ErrUnavailable when the store
// did not take it (nothing is applied then).
func (l *List) Add(ctx context.Context, spec Spec, subject string) (Entry, error) {
	tenant := keys.TenantOf(ctx)
	if tenant != "" && spec.Account == "" {
		return Entry{}, ErrShared
	}
	e, err := spec.entry(l.cfg.Rules(), l.cfg.Hasher.ForContext(ctx), l.cfg.Normalizer, l.cfg.Now())
	if err != nil {
		return Entry{}, err
	}
	e.ID, e.Subject, e.Tenant = newID(), subject, tenant
	data, err := json.Marshal(&e)
	if err != nil {
		return Entry{}, fmt.Errorf("lists: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	switch err := l.cfg.Store.ListPut(ctx, l.cfg.Key, store.ListEntry{ID: e.ID, Expires: e.ExpiresAt, Data: data}, l.cfg.MaxEntries); {
	case errors.Is(err, store.ErrFull):
		return Entry{}, ErrFull
	case err != nil:
		return Entry{}, fmt.Errorf("lists: %w: %w", store.ErrUnavailable, err)
	}
	l.mu.Lock()
	l.fleet = append(slices.DeleteFunc(slices.Clone(l.fleet), func(o *Entry) bool { return o.ID == e.ID }), &e)
	l.publish()
	l.mu.Unlock()
	return e, nil
}

// Delete removes the entry of id from the store and here at once, and
// returns it as it was known here (its ID alone when this instance had not
// read it yet). It returns ErrStatic for a static entry, ErrNotFound for an
// id the store does not hold or that names another tenant's account (a
// tenant's call deletes only the entries this instance knows to be its
// own), ErrShared for a tenant's call on a network entry, and
// store.ErrUnavailable when the store did not answer.
func (l *List) Delete(ctx context.Context, id string) (Entry, error) {
	tenant := keys.TenantOf(ctx)
	var e *Entry
	for _, o := range l.view.Load().entries {
		if o.ID == id {
			e = o
		}
	}
	switch {
	case e == nil && tenant != "":
		return Entry{ID: id}, ErrNotFound
	case e == nil:
		e = &Entry{ID: id}
	case e.Source != SourceAPI:
		return *e, ErrStatic
	case e.Account != "" && e.Tenant != tenant:
		return Entry{ID: id}, ErrNotFound
	case e.Account == "" && tenant != "":
		return *e, ErrShared
	}
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timeout)
	defer cancel()
	found, err := l.cfg.Store.ListDelete(ctx, l.cfg.Key, id)
	switch {
	case err != nil:
		return *e, fmt.Errorf("lists: %w: %w", store.ErrUnavailable, err)
	case !found:
		return *e, ErrNotFound
	}
	l.mu.Lock()
	l.fleet = slices.DeleteFunc(slices.Clone(l.fleet), func(o *Entry) bool { return o.ID == id })
	l.publish()
	l.mu.Unlock()
	return *e, nil
}

// Entries returns the entries in force at now that the tenant ctx carries
// sees, deny and allow, each in the order they were made: every network
// entry, and the account entries of that tenant alone.
func (l *List) Entries(ctx context.Context, now time.Time) (deny, allow []Entry) {
	tenant := keys.TenantOf(ctx)
	deny, allow = []Entry{}, []Entry{}
	for _, e := range l.view.Load().entries {
		switch {
		case !e.live(now), e.Account != "" && e.Tenant != tenant:
		case e.List == Deny:
			deny = append(deny, *e)
		default:
			allow = append(allow, *e)
		}
	}
	return deny, allow
}

// SetStatic makes the static entries of set's rules file (rules.Lists)
// the ones in force, in place of those of the rules before: a reload calls
// it with the new rules. Their ids are the list and the entry's place in
// it ("rules-allow-1"), and their CreatedAt the rules' LoadedAt.
func (l *List) SetStatic(set *rules.Set) {
	var static []*Entry
	for _, part := range []struct {
		list    string
		entries []rules.ListEntry
	}{{Deny, set.Lists.Deny}, {Allow, set.Lists.Allow}} {
		for i, se := range part.entries {
			static = append(static, &Entry{
				ID: "rules-" + part.list + "-" + strconv.Itoa(i+1), List: part.list, Network: se.Network,
				Exempt: se.Exempt, Reason: se.Reason, CreatedAt: set.LoadedAt, Source: set.Source,
			})
		}
	}
	l.mu.Lock()
	l.static = static
	l.publish()
	l.mu.Unlock()
}

// Ride reads the store's set if it changed. A failure keeps the entries
// read last.
func (l *List) Ride(ctx context.Context, _ bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	snap, changed, err := l.cfg.Store.ListLoad(ctx, l.cfg.Key, l.version)
	switch {
	case err != nil && !l.failing:
		l.failing = true
		l.cfg.Logger.Warn("lists: the store is not answering: applying the entries last read", "err", err)
	case err == nil && l.failing:
		l.failing = false
		l.cfg.Logger.Info("lists: the store answers again")
	}
	if err != nil || !changed {
		return
	}
	fleet := make([]*Entry, 0, len(snap.Entries))
	for _, se := range snap.Entries {
		e := new(Entry)
		if err := json.Unmarshal(se.Data, e); err != nil || e.ID != se.ID || e.Source != SourceAPI {
			l.cfg.Logger.Warn("lists: an entry in the store guardian cannot read: skipped", "id", se.ID)
			continue
		}
		fleet = append(fleet, e)
	}
	l.fleet, l.version = fleet, snap.Version
	l.publish()
}

// publish makes the static and fleet entries the index Match reads; l.mu
// is held.
func (l *List) publish() {
	all := slices.Concat(l.static, l.fleet)
	slices.SortStableFunc(all, func(a, b *Entry) int { return cmp.Compare(a.CreatedAt.UnixNano(), b.CreatedAt.UnixNano()) })
	l.view.Store(newIndex(all))
}

// newID returns a new entry id: 26 random base32 characters.
func newID() string { return rand.Text() }
