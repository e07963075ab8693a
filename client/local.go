package client

import (
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Rule names of decisions the Local policy makes.
const (
	// RuleLocalAccount is the Local policy's per-account limit.
	RuleLocalAccount = "local-account"
	// RuleLocalIP is the Local policy's per-address limit.
	RuleLocalIP = "local-ip"
)

// Rate is one limit of the Local policy: Burst attempts back to back after
// idle, then one every Every (GCRA, like guardian's rate rules: over any span
// t at most Burst + t/Every).
type Rate struct {
	// Burst is how many attempts fit back to back after idle.
	Burst int
	// Every is how often one more attempt fits after the burst.
	Every time.Duration
}

// LocalLimits configures the Local policy. Zero fields take the defaults,
// which mirror guardian's built-in login rules.
//
// Each instance of the auth service keeps its own counts, and they start
// from zero when guardian stops answering: behind a load balancer spreading
// an attacker over N instances, the attacker gets up to N times these
// limits. Divide them by N where that matters.
type LocalLimits struct {
	// Account limits attempts per account and flow (per recipient, for a
	// check without an account). Default: 5 back to back, then one a minute.
	Account Rate
	// IP limits attempts per client address and flow: an IPv4 address, an
	// IPv6 /64. Default: 30 back to back, then one every 20 seconds.
	IP Rate
	// MaxKeys bounds how many accounts, addresses and open attempts the
	// limiter tracks, each (default 100,000). When it is full, a check that
	// needs a new key is slowed, so that an attacker spraying new accounts
	// while guardian is down meets a wall, not an open door. Keys are held
	// in clear, in this process's memory only.
	MaxKeys int
}

// Defaults of LocalLimits.
const (
	defaultLocalAccountBurst = 5
	defaultLocalAccountEvery = time.Minute
	defaultLocalIPBurst      = 30
	defaultLocalIPEvery      = 20 * time.Second
	defaultLocalMaxKeys      = 100_000
	// localAttemptTTL is how long a local attempt id can be reported, as
	// guardian's own attempt ids.
	localAttemptTTL = 10 * time.Minute
	// localPrefix starts every local attempt id; the colon is never in one
	// of guardian's.
	localPrefix = "local:"
)

// withDefaults returns l with its zero fields set to the defaults.
func (l LocalLimits) withDefaults() LocalLimits {
	if l.Account.Burst == 0 {
		l.Account.Burst = defaultLocalAccountBurst
	}
	if l.Account.Every == 0 {
		l.Account.Every = defaultLocalAccountEvery
	}
	if l.IP.Burst == 0 {
		l.IP.Burst = defaultLocalIPBurst
	}
	if l.IP.Every == 0 {
		l.IP.Every = defaultLocalIPEvery
	}
	if l.MaxKeys == 0 {
		l.MaxKeys = defaultLocalMaxKeys
	}
	return l
}

func (l LocalLimits) valid() bool {
	return l.Account.Burst > 0 && l.Account.Every > 0 && l.IP.Burst > 0 && l.IP.Every > 0 && l.MaxKeys > 0
}

// limiter is the Local policy: a GCRA per account and per address, spent
// together or not at all. Like guardian's failure-counting rules, a check
// reserves one unit on each, and a success report gives them back; an
// attempt never reported keeps its reservation. It is safe for concurrent
// use.
type limiter struct {
	mu      sync.Mutex
	account gcra
	ip      gcra
	max     int
	pending map[string]reservation
}

// reservation is what a local attempt id gives back on a success report.
type reservation struct {
	account, ip string
	at          time.Time
}

func newLimiter(l LocalLimits) *limiter {
	return &limiter{
		account: newGCRA(l.Account),
		ip:      newGCRA(l.IP),
		max:     l.MaxKeys,
		pending: make(map[string]reservation),
	}
}

// decide fills in d's action, rule, wait and attempt id for req at now.
func (l *limiter) decide(d *Decision, req CheckRequest, now time.Time) {
	ak, ik := accountKey(req), ipKey(req)
	l.mu.Lock()
	defer l.mu.Unlock()
	var aTAT time.Time
	var aWait time.Duration
	aOK := true
	if ak != "" {
		aTAT, aWait, aOK = l.account.fits(ak, now, l.max)
	}
	iTAT, iWait, iOK := l.ip.fits(ik, now, l.max)
	if !aOK || !iOK {
		d.Action = Slow
		if !aOK && aWait >= iWait {
			d.Rule, d.RetryAfter = RuleLocalAccount, aWait
		} else {
			d.Rule, d.RetryAfter = RuleLocalIP, iWait
		}
		return
	}
	if ak != "" {
		l.account.set(ak, aTAT)
	}
	l.ip.set(ik, iTAT)
	d.Action = Allow
	d.AttemptID = l.open(reservation{account: ak, ip: ik, at: now})
}

// open records r and returns its attempt id, or "" when the limiter cannot
// track another open attempt: the reservation then stays spent.
func (l *limiter) open(r reservation) string {
	if len(l.pending) >= l.max {
		for id, p := range l.pending {
			if r.at.Sub(p.at) >= localAttemptTTL {
				delete(l.pending, id)
			}
		}
		if len(l.pending) >= l.max {
			return ""
		}
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	id := localPrefix + hex.EncodeToString(b[:])
	l.pending[id] = r
	return id
}

// settle closes the local attempt id: a success gives its reservation back.
// An unknown or expired id is ignored, as there is nothing left to give.
func (l *limiter) settle(id string, o Outcome, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.pending[id]
	if !ok {
		return
	}
	delete(l.pending, id)
	if o != Success || now.Sub(r.at) >= localAttemptTTL {
		return
	}
	if r.account != "" {
		l.account.give(r.account, now)
	}
	l.ip.give(r.ip, now)
}

// gcra is one limit's state: each key's theoretical arrival time. A key
// whose time has passed is full again, the same as absent.
type gcra struct {
	interval  time.Duration
	tolerance time.Duration
	tat       map[string]time.Time
	// quietUntil is when the earliest tracked key falls due; a sweep
	// before then would free nothing.
	quietUntil time.Time
}

func newGCRA(r Rate) gcra {
	return gcra{interval: r.Every, tolerance: time.Duration(r.Burst) * r.Every, tat: make(map[string]time.Time)}
}

// fits reports whether one more unit for key fits at now, with the key's
// new arrival time if it does and how long to wait if it does not. It
// changes nothing but the removal of keys already back to full.
func (g *gcra) fits(key string, now time.Time, max int) (time.Time, time.Duration, bool) {
	tat, ok := g.tat[key]
	if !ok {
		if len(g.tat) >= max && !g.sweep(now, max) {
			return time.Time{}, g.interval, false
		}
		tat = now
	}
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(g.interval)
	if over := next.Sub(now) - g.tolerance; over > 0 {
		return time.Time{}, over, false
	}
	return next, 0, true
}

// set stores key's new arrival time.
func (g *gcra) set(key string, tat time.Time) {
	g.tat[key] = tat
	if tat.Before(g.quietUntil) {
		g.quietUntil = tat
	}
}

// sweep removes the keys back to full at now and reports whether there is
// room for one more.
func (g *gcra) sweep(now time.Time, max int) bool {
	if now.Before(g.quietUntil) {
		return false
	}
	var earliest time.Time
	for k, t := range g.tat {
		if !t.After(now) {
			delete(g.tat, k)
			continue
		}
		if earliest.IsZero() || t.Before(earliest) {
			earliest = t
		}
	}
	g.quietUntil = earliest
	return len(g.tat) < max
}

// give returns one unit to key.
func (g *gcra) give(key string, now time.Time) {
	tat, ok := g.tat[key]
	if !ok {
		return
	}
	tat = tat.Add(-g.interval)
	if !tat.After(now) {
		delete(g.tat, key)
		return
	}
	g.tat[key] = tat
}

// accountKey is the Local policy's account key of req: the flow and the
// account trimmed and lower-cased (or the recipient, without an account);
// "" when the check has neither.
func accountKey(req CheckRequest) string {
	id := req.Account
	kind := "a"
	if id == "" {
		id, kind = req.Recipient, "r"
	}
	id = strings.ToLower(strings.TrimSpace(id))
	if id == "" {
		return ""
	}
	return string(req.Flow) + "\x00" + kind + "\x00" + id
}

// ipKey is the Local policy's address key of req: the flow and the IPv4
// address or IPv6 /64 (IPv4-mapped addresses count as IPv4). An address
// that does not parse is its own key.
func ipKey(req CheckRequest) string {
	ip := strings.TrimSpace(req.IP)
	if a, err := netip.ParseAddr(ip); err == nil {
		a = a.Unmap().WithZone("")
		if a.Is6() {
			p, _ := a.Prefix(64) // cannot fail: a is IPv6 without a zone
			ip = p.String()
		} else {
			ip = a.String()
		}
	}
	return string(req.Flow) + "\x00" + ip
}
