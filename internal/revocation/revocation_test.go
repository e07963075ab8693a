package revocation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/testclock"
)

// memShared is a Shared in memory that can be made to fail.
type memShared struct {
	mu      sync.Mutex
	entries map[string]time.Time
	version int
	fail    bool
	loads   int
}

var errDown = errors.New("store down")

func newMemShared() *memShared { return &memShared{entries: map[string]time.Time{}} }

func (m *memShared) setFailing(f bool) {
	m.mu.Lock()
	m.fail = f
	m.mu.Unlock()
}

func (m *memShared) Add(_ context.Context, e Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return errDown
	}
	if e.Until.After(m.entries[e.JTI]) {
		m.entries[e.JTI] = e.Until
	}
	m.version++
	return nil
}

func (m *memShared) Load(_ context.Context, version string) (Snapshot, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.loads++
	if m.fail {
		return Snapshot{}, false, errDown
	}
	v := fmt.Sprint(m.version)
	if v == version {
		return Snapshot{Version: v}, false, nil
	}
	snap := Snapshot{Version: v}
	for jti, until := range m.entries {
		snap.Entries = append(snap.Entries, Entry{JTI: jti, Until: until})
	}
	return snap, true, nil
}

func TestRevocationsAcrossAFleet(t *testing.T) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	shared := newMemShared()
	a := New(Config{Shared: shared, Now: clock.Now})
	b := New(Config{Shared: shared, Now: clock.Now})

	if err := a.Revoke(ctx, "jti-1", clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !a.Revoked("jti-1") {
		t.Error("the instance that took the revocation does not apply it at once")
	}
	if b.Revoked("jti-1") {
		t.Error("another instance applies it before reading the store")
	}
	b.Ride(ctx, false)
	if !b.Revoked("jti-1") || b.Revoked("jti-2") {
		t.Error("after a round, another instance does not apply exactly the revocation")
	}

	// The store fails: the last set seen holds, and a new revocation is
	// applied where it was taken and sent once the store answers.
	shared.setFailing(true)
	err := b.Revoke(ctx, "jti-2", clock.Now().Add(time.Hour))
	if !errors.Is(err, ErrNotShared) {
		t.Fatalf("Revoke with the store down = %v, want ErrNotShared", err)
	}
	a.Ride(ctx, false)
	b.Ride(ctx, false)
	if !a.Revoked("jti-1") || !b.Revoked("jti-1") || !b.Revoked("jti-2") || a.Revoked("jti-2") {
		t.Errorf("store down: a %v %v, b %v %v; want jti-1 on both, jti-2 on b only",
			a.Revoked("jti-1"), a.Revoked("jti-2"), b.Revoked("jti-1"), b.Revoked("jti-2"))
	}
	shared.setFailing(false)
	b.Ride(ctx, false) // sends jti-2
	a.Ride(ctx, false)
	if !a.Revoked("jti-2") {
		t.Error("the revocation taken while the store failed never reached the other instance")
	}

	// Each lapses with its token; a second revocation of one jti keeps
	// the later expiry.
	if err := a.Revoke(ctx, "jti-1", clock.Now().Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	b.Ride(ctx, false)
	clock.Advance(2 * time.Hour)
	a.Ride(ctx, false)
	b.Ride(ctx, false)
	for name, l := range map[string]*List{"a": a, "b": b} {
		if !l.Revoked("jti-1") || l.Revoked("jti-2") || l.Len() != 1 {
			t.Errorf("%s two hours on: jti-1 %v, jti-2 %v, %d in force; want jti-1 alone", name, l.Revoked("jti-1"), l.Revoked("jti-2"), l.Len())
		}
	}
	clock.Advance(time.Hour)
	a.Ride(ctx, false)
	if a.Revoked("jti-1") || a.Len() != 0 {
		t.Error("a revocation outlived its token")
	}
}

func TestRevocationsAlone(t *testing.T) {
	clock := testclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	l := New(Config{Now: clock.Now})
	if err := l.Revoke(context.Background(), "solo", clock.Now().Add(time.Minute)); err != nil {
		t.Fatalf("Revoke without a store = %v", err)
	}
	if !l.Revoked("solo") {
		t.Fatal("not applied")
	}
	clock.Advance(time.Minute)
	l.Ride(context.Background(), false)
	if l.Revoked("solo") {
		t.Fatal("kept past its token's expiry")
	}
}

func TestRevocationsBounded(t *testing.T) {
	ctx := context.Background()
	clock := testclock.New(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	const max = 100
	l := New(Config{Now: clock.Now, MaxEntries: max})
	until := clock.Now().Add(time.Hour)
	for i := range max {
		if err := l.Revoke(ctx, fmt.Sprint("jti-", i), until); err != nil {
			t.Fatalf("revocation %d: %v", i, err)
		}
	}
	if err := l.Revoke(ctx, "one-more", until); !errors.Is(err, ErrFull) {
		t.Fatalf("revocation %d = %v, want ErrFull", max+1, err)
	}
	if err := l.Revoke(ctx, "jti-7", until.Add(time.Hour)); err != nil {
		t.Fatalf("a jti in force again = %v, want it taken", err)
	}
	if l.Len() != max {
		t.Fatalf("%d in force, want %d", l.Len(), max)
	}
	if New(Config{}).max != MaxEntries {
		t.Fatal("the default bound is not MaxEntries")
	}
}

// TestRevokedWhileRiding reads and writes from many goroutines while the
// loop rides, for the race detector, and checks every revocation is seen.
func TestRevokedWhileRiding(t *testing.T) {
	ctx := context.Background()
	shared := newMemShared()
	a, b := New(Config{Shared: shared}), New(Config{Shared: shared})
	stop := make(chan struct{})
	var riders sync.WaitGroup
	riders.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				b.Ride(ctx, false)
			}
		}
	})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				jti := fmt.Sprintf("w%d-%d", w, i)
				if err := a.Revoke(ctx, jti, time.Now().Add(time.Hour)); err != nil {
					t.Error(err)
				}
				_ = b.Revoked(jti)
			}
		})
	}
	wg.Wait()
	close(stop)
	riders.Wait()
	b.Ride(ctx, false)
	if b.Len() != 400 {
		t.Fatalf("b sees %d revocations, want 400", b.Len())
	}
}
