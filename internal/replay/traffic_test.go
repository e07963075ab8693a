package replay_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/rules"
)

// day is the first instant of every generated day of traffic.
var day = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

// The attacks of a generated day, and how long each keeps normal users
// away (before and after its start), so that nothing else falls in the
// windows of the rules it trips.
var (
	bruteAt = day.Add(3 * time.Hour)
	stuffAt = day.Add(14 * time.Hour)
	sprayAt = day.Add(20 * time.Hour)
	quiet   = 3 * time.Minute
)

const (
	// bruteChecks failed logins to one account from one address, 50ms apart.
	bruteChecks  = 200
	bruteAccount = "victim@example.com"
	bruteIP      = "198.51.100.7"
	// stuffChecks failed logins to as many accounts from four addresses of
	// one /24, in turn, 10ms apart.
	stuffChecks = 1000
	// sprayAccounts accounts fail from each sprayed /24, one failure per
	// account, 20ms apart, every network in turn.
	sprayAccounts = 24
)

// traffic generates a day of replay events: normal users logging in at
// random all day (one in ten after a typo), and, with attacks, a
// single-account brute force at 03:00 and a credential-stuffing burst at
// 14:00.
type traffic struct {
	// users is how many normal users there are; each has an address of
	// its own (a /24 of its own below 65,536 users; an IPv6 /64 for one in
	// four).
	users int
	// perSecond is how many normal logins start per second on average.
	perSecond float64
	attacks   bool
	seed      uint64
	// sprayNets, when set, adds a low-and-slow spray at 20:00 from that
	// many /24s, sprayAccounts accounts failing from each: each network
	// near the 20 accounts a distinct rule challenges at.
	sprayNets int
	// fingerprints has every check carry a secret_fingerprint: each user
	// its own password (and a typo of it), the brute force a new guess
	// each time, the stuffing one of a few common passwords.
	fingerprints bool
}

// trafficStats counts what a traffic wrote.
type trafficStats struct {
	events, checks, reports int64
}

// write writes the day to w, in time order.
func (tr traffic) write(w io.Writer) (trafficStats, error) {
	bw := bufio.NewWriterSize(w, 1<<16)
	rng := rand.New(rand.NewPCG(tr.seed, 7))
	var st trafficStats
	var batch []event.Event
	var line []byte
	var next int64
	id := func() string {
		next++
		return fmt.Sprintf("e%d", next)
	}
	emit := func() error {
		slices.SortStableFunc(batch, func(a, b event.Event) int { return a.Time.Compare(b.Time) })
		for i := range batch {
			line = batch[i].AppendJSON(line[:0])
			if _, err := bw.Write(line); err != nil {
				return err
			}
			st.events++
			if batch[i].Kind == event.Check {
				st.checks++
			} else {
				st.reports++
			}
		}
		batch = batch[:0]
		return nil
	}
	login := func(at time.Time, account, ip, fp string, outcome engine.Outcome, reportAfter time.Duration) {
		e := id()
		if !tr.fingerprints {
			fp = ""
		}
		batch = append(batch,
			event.Event{Time: at, Kind: event.Check, ID: e, Flow: rules.Login, Account: account, IP: ip, SecretFingerprint: fp},
			event.Event{Time: at.Add(reportAfter), Kind: event.Report, ID: e, Outcome: outcome})
	}

	var due float64
	for s := range 86400 {
		sec := day.Add(time.Duration(s) * time.Second)
		switch {
		case tr.attacks && sec.Equal(bruteAt):
			for i := range bruteChecks {
				login(sec.Add(time.Duration(i)*50*time.Millisecond), bruteAccount, bruteIP, fmt.Sprintf("fp-brute-%08d", i), engine.Failure, 10*time.Millisecond)
			}
		case tr.attacks && sec.Equal(stuffAt):
			for i := range stuffChecks {
				login(sec.Add(time.Duration(i)*10*time.Millisecond), fmt.Sprintf("stuffed-%d@example.net", i), fmt.Sprintf("192.0.2.%d", 1+i%4), fmt.Sprintf("fp-common-%08d", i%7), engine.Failure, 5*time.Millisecond)
			}
		case tr.sprayNets > 0 && sec.Equal(sprayAt):
			for i := range tr.sprayNets * sprayAccounts {
				n, a := i%tr.sprayNets, i/tr.sprayNets
				login(sec.Add(time.Duration(i)*20*time.Millisecond), fmt.Sprintf("sprayed-%d-%d@example.org", n, a), fmt.Sprintf("198.18.%d.%d", n, 1+a), fmt.Sprintf("fp-common-%08d", a%3), engine.Failure, 5*time.Millisecond)
			}
		case tr.attacks && (near(sec, bruteAt) || near(sec, stuffAt)),
			tr.sprayNets > 0 && sec.After(sprayAt.Add(-quiet)) && sec.Before(sprayAt.Add(time.Duration(tr.sprayNets*sprayAccounts)*20*time.Millisecond+quiet)):
		default:
			due += tr.perSecond
			for ; due >= 1; due-- {
				u := rng.IntN(tr.users)
				account, ip := fmt.Sprintf("user%d@example.com", u), userIP(u)
				at := sec.Add(time.Duration(rng.IntN(800)) * time.Millisecond)
				if rng.IntN(10) == 0 {
					login(at, account, ip, fmt.Sprintf("fp-user-%08d-typo", u), engine.Failure, 20*time.Millisecond)
					at = at.Add(40 * time.Millisecond)
				}
				login(at, account, ip, fmt.Sprintf("fp-user-%08d-right", u), engine.Success, 20*time.Millisecond)
			}
		}
		if err := emit(); err != nil {
			return st, err
		}
	}
	return st, bw.Flush()
}

// near reports whether t is within quiet of an attack starting at at.
func near(t, at time.Time) bool {
	return t.After(at.Add(-quiet)) && t.Before(at.Add(quiet))
}

// userIP is the address of normal user u.
func userIP(u int) string {
	if u%4 == 0 {
		return fmt.Sprintf("2001:db8:%x:%x::1", u>>16, u&0xffff)
	}
	return fmt.Sprintf("10.%d.%d.%d", u>>8&0xff, u&0xff, 1+u>>16)
}
