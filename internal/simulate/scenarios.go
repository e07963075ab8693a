package simulate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
)

// run is one scenario being set up and run.
type run struct {
	cfg Config
	w   *world
	rec *recorder
	// pop draws the population and its logins; the world's own source
	// draws what happens as it runs (who solves a challenge).
	pop *rand.Rand
	// start and span are the simulated day.
	start time.Time
	span  time.Duration
	// nUsers is the population's size, once made.
	nUsers int
}

// scenario is one attack on a population.
type scenario struct {
	name, what string
	// ways are the owner's ways in, for scenarios with an owner.
	ways []string
	// setup schedules the attacker (and the owner) on r, and the
	// population, whose users it may place first.
	setup func(r *run)
}

// The owner's ways in.
const (
	wayHome       = "home"
	wayDevice     = "device"
	wayNewNetwork = "new_network"
)

var ownerWays = []string{wayHome, wayDevice, wayNewNetwork}

// scenarios are every scenario, in the order of the contract.
var scenarios = []scenario{
	{name: "stuffing", what: "a day of 100,000 breached pairs from 5,000 addresses in 2,000 /24s", setup: stuffing},
	{name: "spray", what: "10 common passwords across 50,000 accounts, from 20,000 addresses in 10,000 /24s, over a day", setup: spray},
	{name: "targeted", what: "one account guessed once a second for a day, from 1,000 addresses", setup: targeted},
	{name: "lockout", what: "an attacker polling and failing against one account at 10 checks a second for 4 hours, while its owner logs in from home, on a device and on a new network", ways: ownerWays, setup: lockout},
	{name: "cgnat", what: "an attacker and the owner behind one carrier-grade NAT /24 shared with 250 users; the attacker guesses the owner's password once a minute for a day", ways: ownerWays, setup: cgnat},
	{name: "sms_pumping", what: "otp_send to 10,000 numbers of 5 ranges, 10 codes each over a day, from 500 addresses", setup: smsPumping},
}

// scaled is n scaled by the attack's scale, at least 1.
func (r *run) scaled(n int) int { return max(1, int(math.Round(float64(n)*r.cfg.Attack))) }

// stream schedules n guesses, spread evenly over span from from, each made
// by g when its time comes: only the next guess waits in the queue.
func (r *run) stream(n int, from time.Time, span time.Duration, g func(i int) guess) {
	step := span / time.Duration(n)
	var next func(i int)
	next = func(i int) {
		r.w.attack(g(i))
		if i+1 < n {
			r.w.at(from.Add(time.Duration(i+1)*step), func() { next(i + 1) })
		}
	}
	r.w.at(from, func() { next(0) })
}

// remoteIP is address host (from 1) of /24 number net (below 65,536) of
// 20.0.0.0/8, which stands for the internet beyond the population's home
// and carrier networks: attackers' addresses, the owner's new networks.
func remoteIP(net, host int) string {
	return fmt.Sprintf("20.%d.%d.%d", net>>8&0xff, net&0xff, host)
}

// stuffing: pairs from another site's breach. One in twenty names an
// account of this site; a fiftieth of those reuse the breached password.
// Passwords follow a Zipf law, so the commonest recur across pairs.
func stuffing(r *run) {
	us := r.users()
	n := r.scaled(100_000)
	type pair struct {
		account, password string
		right             bool
	}
	rng := rand.New(rand.NewPCG(r.cfg.seed(1), 1))
	zipf := rand.NewZipf(rng, 1.1, 1, 19_999)
	pairs := make([]pair, n)
	for i := range pairs {
		p := pair{account: fmt.Sprintf("breach%06d@example.net", i), password: fmt.Sprintf("fp-breach-%06d-pw", zipf.Uint64())}
		if rng.Float64() < 0.05 {
			u := us[rng.IntN(len(us))]
			p.account = u.account
			if rng.Float64() < 0.02 {
				u.password = p.password
			}
		}
		pairs[i] = p
	}
	// Whether a pair is right once every reuse is drawn.
	byAccount := map[string]*user{}
	for _, u := range us {
		byAccount[u.account] = u
	}
	for i := range pairs {
		if u := byAccount[pairs[i].account]; u != nil && u.password == pairs[i].password {
			pairs[i].right = true
		}
	}
	r.enrol(us)
	r.days(us)
	ips := make([]string, 5000)
	for a := range ips {
		ips[a] = remoteIP(a%2000, 1+a/2000)
	}
	r.stream(n, r.start, r.span, func(i int) guess {
		return guess{flow: rules.Login, account: pairs[i].account, ip: ips[i%len(ips)], secret: pairs[i].password, right: pairs[i].right}
	})
}

// spray: each of 10 common passwords tried against 50,000 accounts (every
// user of the population and accounts that do not exist), one password
// after the other, from a botnet.
func spray(r *run) {
	us := r.users()
	accounts := r.scaled(50_000)
	targets := make([]string, accounts)
	for i := range targets {
		if i < len(us) {
			targets[i] = us[i].account
		} else {
			targets[i] = fmt.Sprintf("spray%06d@example.org", i)
		}
	}
	rng := rand.New(rand.NewPCG(r.cfg.seed(2), 2))
	rng.Shuffle(len(targets), func(i, j int) { targets[i], targets[j] = targets[j], targets[i] })
	passwords := map[string]string{}
	for _, u := range us {
		passwords[u.account] = u.password
	}
	r.enrol(us)
	r.days(us)
	var common [10]string
	for k := range common {
		common[k] = commonPassword(k)
	}
	ips := make([]string, 20_000)
	for a := range ips {
		ips[a] = remoteIP(a%10_000, 1+a/10_000)
	}
	r.stream(10*accounts, r.start, r.span, func(i int) guess {
		pw, account := common[i/accounts], targets[i%accounts]
		return guess{flow: rules.Login, account: account, ip: ips[i%len(ips)], secret: pw, right: passwords[account] == pw}
	})
}

// targeted: one user's account, guessed once a second for a day with a
// new password each time, from 1,000 addresses in turn.
func targeted(r *run) {
	us := r.users()
	victim := us[0]
	r.enrol(us)
	r.days(us)
	r.stream(r.scaled(86_400), r.start, r.span, func(i int) guess {
		return guess{flow: rules.Login, account: victim.account, ip: remoteIP(1000+i%1000, 7), secret: fmt.Sprintf("fp-target-%06d-pw", i)}
	})
}

// owner is the user whose ways in lockout and cgnat measure, apart from the
// population: enrolled from home on their device.
func (r *run) owner(home string) *user {
	o := &user{account: "owner@example.com", home: home, password: "fp-owner-password-00"}
	r.loginAt(r.start.Add(-3*time.Hour), o, nil, home, true, false)
	return o
}

// ownerLogins schedules the owner's logins every every from from to to,
// in each way: from home without the device, on the device away from home
// (a new network each time), and from a new network without it.
func (r *run) ownerLogins(o *user, from, to time.Time, every time.Duration) {
	k := 0
	for at := from; at.Before(to); at = at.Add(every) {
		r.loginAt(at, o, r.rec.owner[wayHome], o.home, false, false)
		r.loginAt(at.Add(time.Second), o, r.rec.owner[wayDevice], remoteIP(40_000+k, 5), true, false)
		r.loginAt(at.Add(2*time.Second), o, r.rec.owner[wayNewNetwork], remoteIP(50_000+k, 5), false, false)
		k++
	}
}

// lockout: a poller fails against the owner's account from four addresses
// of one /24, 10 times a second from 10:00 to 14:00, each time with a new
// password; the owner logs in every 10 minutes from 09:00 to 15:00.
func lockout(r *run) {
	us := r.users()
	o := r.owner("10.250.0.10")
	r.enrol(us)
	r.days(us)
	from := r.start.Add(10 * time.Hour)
	r.stream(r.scaled(144_000), from, 4*time.Hour, func(i int) guess {
		return guess{flow: rules.Login, account: o.account, ip: remoteIP(3000, 1+i%4), secret: fmt.Sprintf("fp-poll-%07d-pw", i)}
	})
	r.ownerLogins(o, r.start.Add(9*time.Hour), r.start.Add(15*time.Hour), 10*time.Minute)
}

// cgnat: the owner's home network is a carrier-grade NAT /24 that 250
// users of the population share too, several on each address; the
// attacker, on one of its addresses, guesses the owner's password once a
// minute all day; the owner logs in every 30 minutes.
func cgnat(r *run) {
	us := r.users()
	for i, u := range us[:min(250, len(us))] {
		u.home = fmt.Sprintf("100.72.10.%d", 1+i%254)
	}
	o := r.owner("100.72.10.20")
	r.enrol(us)
	r.days(us)
	r.stream(r.scaled(1440), r.start, r.span, func(i int) guess {
		return guess{flow: rules.Login, account: o.account, ip: "100.72.10.77", secret: fmt.Sprintf("fp-cgnat-%06d-pw", i)}
	})
	r.ownerLogins(o, r.start, r.start.Add(r.span), 30*time.Minute)
}

// smsPumping: codes asked for 10,000 numbers of five premium ranges, each
// number 10 times over the day, from 500 addresses; every code asked for
// and allowed is sent.
func smsPumping(r *run) {
	us := r.users()
	r.enrol(us)
	r.days(us)
	numbers := r.scaled(10_000)
	r.stream(10*numbers, r.start, r.span, func(i int) guess {
		n := i % numbers
		return guess{flow: rules.OTPSend, recipient: fmt.Sprintf("+88234%d%06d", n%5, n), ip: remoteIP(5000+i%500, 9)}
	})
}
