package storetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store"
)

// networkLimit is the op limit of the built-in rule
// login-ip-distinct-accounts as the engine builds it: 20 accounts in 24
// hours, sub-windows of 6 hours, unconfirmed spends held 20 minutes (twice
// the attempt TTL).
var networkLimit = store.Distinct{Step: 6 * time.Hour, Max: 20, Hold: 20 * time.Minute}

// networkStart is when SharedNetwork's network starts: a sub-window of
// networkLimit begins, and the checks of 10,000 accounts, networkEvery
// apart, fall in it.
var networkStart = t0.Truncate(networkLimit.Step).Add(networkLimit.Step)

// networkEvery is how far apart the network's checks come: more than the
// second the Redis store remembers a busy network's count for, so that
// every check counts afresh.
const networkEvery = 2 * time.Second

// networkSample is how many of a network's successful accounts there are
// to one whose check SharedNetwork makes with a Do: a Do on a network that
// thousands share costs Redis about 150 µs (it merges the HyperLogLogs),
// an Add a few.
const networkSample = 100

// maxMadeUp is how many made-up accounts SharedNetwork tries before it
// gives up on a challenge.
const maxMadeUp = 1000

// NetworkCount is what SharedNetwork found.
type NetworkCount struct {
	// HonestMax is the highest count a check of a successful account found,
	// Honest the count after the last of them.
	HonestMax, Honest int64
	// Challenged is the made-up account (1 for the first) whose check was
	// the first past the limit; 0 when none of maxMadeUp was.
	Challenged int
}

// SharedNetwork plays the built-in rule login-ip-distinct-accounts (count:
// failures) on a fresh store newStore makes, for one network that
// accounts successful accounts share, a carrier NAT or a campus: each
// account checks (the rule's Distinct op, adding its member) and succeeds
// (an Add of its member to the network's succeeded key, as
// loginlimits.Settle builds it), one after another; then made-up accounts
// check and fail (a ConfirmDistinct) one by one until one is challenged. A
// member is what the engine counts an account by, the first 16 characters
// of its subject, hashed with a key derived from seed alone, so that a
// seed always gives the same members and counts.
func SharedNetwork(t *testing.T, newStore Factory, seed string, accounts int) NetworkCount {
	t.Helper()
	h := newHarness(t, newStore, networkStart)
	sum := sha256.Sum256([]byte("storetest shared network " + seed))
	key, err := secret.New(sum[:])
	if err != nil {
		t.Fatal(err)
	}
	hasher := keys.NewHasher(key)
	member := func(account string) string {
		return hasher.KeySubject(keys.AccountKey(account))[:16]
	}
	network, succeeded := h.key("net"), h.key("net")+":succeeded"
	add := func(k, m string) store.Settlement {
		return store.Settlement{Key: k, Action: store.Add, Member: m, Span: networkLimit.Step}
	}
	check := func(m string) store.Result {
		t.Helper()
		op := store.Op{Key: network, Member: m, Cost: 1, Role: store.Soft, Limit: networkLimit, Except: succeeded}
		res := make([]store.Result, 1)
		if err := h.s.Do(context.Background(), []store.Op{op}, res); err != nil {
			t.Fatalf("Do: %v", err)
		}
		h.clock.Advance(networkEvery)
		return res[0]
	}

	// Every networkSample-th account checks with a Do. The others' checks
	// add their members with an Add instead, batched with the successes:
	// the same members in the same sub-windows, confirmed where a spend is
	// held, which changes no count, since each of them is in the succeeded
	// key as well (with a Do for every check, the counts were the same).
	var got NetworkCount
	var pending []store.Settlement
	for i := range accounts {
		m := member(fmt.Sprintf("user%d@example.com", i))
		if i%networkSample == 0 {
			h.settle(pending...)
			pending = pending[:0]
			got.HonestMax = max(got.HonestMax, check(m).Count)
		} else {
			pending = append(pending, add(network, m))
			h.clock.Advance(networkEvery)
		}
		pending = append(pending, add(succeeded, m))
	}
	h.settle(pending...)
	got.Honest = h.peekOne(store.Op{Key: network, Member: "z", Limit: networkLimit, Except: succeeded}).Count

	for i := 1; i <= maxMadeUp; i++ {
		if r := check(member(fmt.Sprintf("madeup%d@example.com", i))); !r.Allowed {
			got.Challenged = i
			break
		}
		h.settle(store.Settlement{Key: network, Action: store.ConfirmDistinct, Span: networkLimit.Step})
	}
	return got
}

// networkAccounts is how many successful accounts CheckSharedNetwork's
// network has: a carrier NAT's or a campus's day.
const networkAccounts = 10_000

// networkSeeds is how many seeds CheckSharedNetwork plays, "0" and on: a
// few, each a network of its own, since the embedded store takes about
// 3 s a network under the race detector.
const networkSeeds = 4

// CheckSharedNetwork plays SharedNetwork with networkAccounts successful
// accounts for each of networkSeeds seeds, as subtests of t, on stores
// newStore makes. It checks that no successful account is counted (every
// one is in the succeeded key, so the union's registers are the succeeded
// key's and the two estimates are the same, whatever their error) and
// that the first made-up account challenged is from the first to the last.
// The subtests run in parallel, each on keys of its own: newStore must not
// empty a store that another one uses.
func CheckSharedNetwork(t *testing.T, newStore Factory, first, last int) {
	for s := range networkSeeds {
		seed := strconv.Itoa(s)
		t.Run("seed_"+seed, func(t *testing.T) {
			t.Parallel()
			got := SharedNetwork(t, newStore, seed, networkAccounts)
			t.Logf("%d successful accounts: count %d (at most %d); challenged at made-up account %d",
				networkAccounts, got.Honest, got.HonestMax, got.Challenged)
			if got.HonestMax != 0 || got.Honest != 0 {
				t.Errorf("%d successful accounts counted %d (a check found at most %d), want 0",
					networkAccounts, got.Honest, got.HonestMax)
			}
			if got.Challenged < first || got.Challenged > last {
				t.Errorf("challenged at made-up account %d (0: none of %d), want from made-up account %d to %d",
					got.Challenged, maxMadeUp, first, last)
			}
		})
	}
}
