package gateway

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/guardian-sec/guardian/client"
)

// ChallengeTTL is how long a proof-of-work challenge, and the pass its
// solution earns, last.
const ChallengeTTL = 5 * time.Minute

// ChallengePath is where a browser or an API client posts a solved proof
// of work.
const ChallengePath = "/.guardian/challenge"

// Token kinds: a challenge to solve, and the pass a solution earns.
const (
	kindChallenge = 'c'
	kindPass      = 'p'
)

// token layout: kind (1), expiry in unix ms (8), id (12), difficulty (1),
// binding (16), then a MAC (16) of all of that.
const (
	idLen      = 12
	bindLen    = 16
	macLen     = 16
	payloadLen = 1 + 8 + idLen + 1 + bindLen
	tokenLen   = payloadLen + macLen
)

// Errors of a challenge token or solution.
var (
	errBadToken  = errors.New("the challenge token is not one guardian issued, or it was altered")
	errExpired   = errors.New("the challenge expired; repeat the request for a new one")
	errBadNonce  = errors.New("the nonce does not solve the challenge")
	errUsed      = errors.New("the challenge was solved already; each solution is used once")
	errWrongBind = errors.New("the pass was earned for another account, network or route")
)

// Claimer claims a name for a time, fleet-wide: true for the one call that
// set it (a SET NX with a TTL in the store the fleet shares).
type Claimer interface {
	Claim(ctx context.Context, name string, ttl time.Duration) (bool, error)
}

// spentPrefix starts the claim of a spent challenge or pass: its random id,
// nothing of the account or the client.
const spentPrefix = "spent:"

// claimTimeout bounds the fleet-wide claim of a solution: past it the
// instance's own memory decides alone.
const claimTimeout = 250 * time.Millisecond

// challenges signs and verifies challenge tokens and passes, and
// remembers the ones used, so each is used once: in this instance's memory
// and, with a fleet (Config.Spent), claimed in the store the fleet shares,
// so that a solution spent on one instance is spent on all.
type challenges struct {
	key   []byte
	now   func() time.Time
	fleet Claimer
	log   *slog.Logger

	mu   sync.Mutex
	used map[[idLen]byte]time.Time
}

// maxUsed bounds the memory of used ids; past it the oldest go first.
const maxUsed = 1 << 18

func newChallenges(key []byte, now func() time.Time, fleet Claimer, log *slog.Logger) *challenges {
	return &challenges{key: key, now: now, fleet: fleet, log: log, used: make(map[[idLen]byte]time.Time)}
}

// binding is what a challenge is bound to: the account, the client's /64
// (an IPv4 address itself) and the route, under the challenge key.
func (c *challenges) binding(account string, ip netip.Addr, route string) [bindLen]byte {
	net := ip
	if ip.Is6() && !ip.Is4In6() {
		p, _ := ip.Prefix(64)
		net = p.Addr()
	} else {
		net = ip.Unmap()
	}
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("bind\x00"))
	m.Write([]byte(route))
	m.Write([]byte{0})
	n, _ := net.MarshalBinary()
	m.Write(n)
	m.Write([]byte{0})
	m.Write([]byte(account))
	var out [bindLen]byte
	copy(out[:], m.Sum(nil))
	return out
}

// issue returns a signed token of kind, expiring at exp.
func (c *challenges) issue(kind byte, exp time.Time, difficulty int, bind [bindLen]byte) string {
	var b [tokenLen]byte
	b[0] = kind
	binary.BigEndian.PutUint64(b[1:9], uint64(exp.UnixMilli()))
	_, _ = rand.Read(b[9 : 9+idLen]) // never fails
	b[9+idLen] = byte(difficulty)
	copy(b[10+idLen:payloadLen], bind[:])
	copy(b[payloadLen:], c.mac(b[:payloadLen]))
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (c *challenges) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(payload)
	return m.Sum(nil)[:macLen]
}

// token is an opened challenge token or pass.
type token struct {
	kind       byte
	exp        time.Time
	id         [idLen]byte
	difficulty int
	bind       [bindLen]byte
}

// open verifies s, of kind, and that it has not expired.
func (c *challenges) open(s string, kind byte) (token, error) {
	var t token
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != tokenLen || b[0] != kind || !hmac.Equal(c.mac(b[:payloadLen]), b[payloadLen:]) {
		return t, errBadToken
	}
	t.kind = b[0]
	t.exp = time.UnixMilli(int64(binary.BigEndian.Uint64(b[1:9])))
	copy(t.id[:], b[9:9+idLen])
	t.difficulty = int(b[9+idLen])
	copy(t.bind[:], b[10+idLen:payloadLen])
	if !c.now().Before(t.exp) {
		return t, errExpired
	}
	return t, nil
}

// solve checks a solution and returns the pass it earns, which carries
// the challenge's binding and expiry. The challenge is spent.
func (c *challenges) solve(ctx context.Context, tok, nonce string) (string, time.Time, error) {
	t, err := c.open(tok, kindChallenge)
	if err != nil {
		return "", time.Time{}, err
	}
	if len(nonce) == 0 || len(nonce) > 32 || !client.ChallengeSolved(tok, nonce, t.difficulty) {
		return "", time.Time{}, errBadNonce
	}
	if !c.spend(ctx, t.id, t.exp) {
		return "", time.Time{}, errUsed
	}
	return c.issue(kindPass, t.exp, 0, t.bind), t.exp, nil
}

// redeem checks a pass against the binding of the request it comes with
// and spends it.
func (c *challenges) redeem(ctx context.Context, pass string, bind [bindLen]byte) error {
	t, err := c.open(pass, kindPass)
	if err != nil {
		return err
	}
	if !hmac.Equal(t.bind[:], bind[:]) {
		return errWrongBind
	}
	if !c.spend(ctx, t.id, t.exp) {
		return errUsed
	}
	return nil
}

// spend marks id used until exp; false if it was used already, on this
// instance or, with a fleet, on any.
func (c *challenges) spend(ctx context.Context, id [idLen]byte, exp time.Time) bool {
	return c.spendHere(id, exp) && c.spendInFleet(ctx, id, exp)
}

// spendHere marks id used in this instance's memory.
func (c *challenges) spendHere(id [idLen]byte, exp time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.used[id]; ok {
		return false
	}
	if len(c.used) >= maxUsed {
		c.prune()
	}
	c.used[id] = exp
	return true
}

// spendInFleet claims id in the store the fleet shares until exp. A store
// that does not answer leaves the instance's memory to decide alone (each
// solution then used at most once per instance while it lasts), and says
// so in the log.
func (c *challenges) spendInFleet(ctx context.Context, id [idLen]byte, exp time.Time) bool {
	if c.fleet == nil {
		return true
	}
	ttl := exp.Sub(c.now())
	if ttl <= 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, claimTimeout)
	defer cancel()
	ok, err := c.fleet.Claim(ctx, spentPrefix+base64.RawURLEncoding.EncodeToString(id[:]), ttl)
	if err != nil {
		c.log.Warn("gateway: could not claim a solved challenge in the store; this instance's memory alone keeps it single use", "err", err)
		return true
	}
	return ok
}

// prune forgets the ids that expired, and when none had, the soonest to
// expire, so the table never refuses a solution for being full.
func (c *challenges) prune() {
	now := c.now()
	var soonest [idLen]byte
	var at time.Time
	for id, exp := range c.used {
		if !now.Before(exp) {
			delete(c.used, id)
			continue
		}
		if at.IsZero() || exp.Before(at) {
			soonest, at = id, exp
		}
	}
	if len(c.used) >= maxUsed {
		delete(c.used, soonest)
	}
}
