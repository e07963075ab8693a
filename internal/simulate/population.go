package simulate

import (
	"fmt"
	"math"
	"time"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
)

// The legitimate population, at Config.Population 1 (README, "Tuning a
// rule" in docs/operations.md, says the same in words).
const (
	// baseUsers is how many users there are.
	baseUsers = 10_000
	// loginsMin and loginsMax: each user logs in a number of times a day
	// drawn evenly from this range (2 on average), at times spread evenly
	// over the day.
	loginsMin, loginsMax = 1, 3
	// homeShare of logins come from the user's home network (familiar to
	// guardian from earlier logins); the others from a mobile carrier's
	// network, shared by many users.
	homeShare = 0.8
	// deviceShare of logins come from the user's trusted device (it holds
	// a device token from an earlier login).
	deviceShare = 0.6
	// typoShare of logins start with a mistyped password, reported a
	// failure, then the right one.
	typoShare = 0.05
	// smsShare of users have an SMS second factor: after the password, a
	// code is sent (otp_send) and typed (otp_verify).
	smsShare = 0.1
	// commonShare of users have one of the ten common passwords sprayed in
	// spray as their password.
	commonShare = 0.005
	// usersPerNet users share each home IPv4 /24; carrierNets mobile /24s
	// carry every roaming login.
	usersPerNet = 5
	carrierNets = 200
)

// user is one legitimate user, or the owner of lockout and cgnat.
type user struct {
	account string
	// home is the address of the user's home network.
	home string
	// password and typo are the fingerprints the auth service sends for
	// the user's password and for their usual typo of it.
	password, typo string
	// phone is the number codes are sent to; "" without an SMS factor.
	phone string
	// device is the token of the user's trusted device, once they got one.
	device string
}

// commonPassword is the fingerprint of the k-th common password.
func commonPassword(k int) string { return fmt.Sprintf("fp-common-%02d-password", k) }

// users makes the population of a scenario: n users, the same ones in
// every scenario (they depend on cfg.Population alone).
func (r *run) users() []*user {
	n := max(1, int(math.Round(baseUsers*r.cfg.Population)))
	r.nUsers = n
	us := make([]*user, n)
	for i := range us {
		net := i / usersPerNet
		u := &user{
			account:  fmt.Sprintf("user%06d@example.com", i),
			home:     fmt.Sprintf("10.%d.%d.%d", net>>8&0xff, net&0xff, 1+i%usersPerNet),
			password: fmt.Sprintf("fp-user-%06d-password", i),
			typo:     fmt.Sprintf("fp-user-%06d-typotypo", i),
		}
		if chance(r.pop, smsShare) {
			u.phone = fmt.Sprintf("+1555%07d", i)
		}
		if chance(r.pop, commonShare) {
			u.password = commonPassword(r.pop.IntN(10))
		}
		us[i] = u
	}
	return us
}

// enrol has every user log in once, from home on their device, in the two
// hours before the day starts: their home network becomes familiar and
// their device trusted. These logins are not counted.
func (r *run) enrol(us []*user) {
	for i, u := range us {
		at := r.start.Add(-2*time.Hour + time.Duration(i)*(time.Hour/time.Duration(len(us))))
		r.loginAt(at, u, nil, u.home, true, false)
	}
}

// days schedules the users' logins of the day, counted as the users'
// friction.
func (r *run) days(us []*user) {
	for _, u := range us {
		for range loginsMin + r.pop.IntN(loginsMax-loginsMin+1) {
			at := r.start.Add(time.Duration(r.pop.Int64N(int64(r.span))))
			ip := u.home
			if !chance(r.pop, homeShare) {
				ip = fmt.Sprintf("100.64.%d.%d", r.pop.IntN(carrierNets), 1+r.pop.IntN(254))
			}
			r.loginAt(at, u, &r.rec.users, ip, chance(r.pop, deviceShare), chance(r.pop, typoShare))
		}
	}
}

// loginAt schedules a login of u at at, counted in figs (nil: not
// counted): from ip, on u's trusted device or not, after a typo or not.
func (r *run) loginAt(at time.Time, u *user, figs *friction, ip string, device, typo bool) {
	var steps []step
	if typo {
		steps = append(steps, step{flow: rules.Login, secret: u.typo, outcome: engine.Failure})
	}
	steps = append(steps, step{flow: rules.Login, secret: u.password, outcome: engine.Success})
	if u.phone != "" && figs != nil {
		steps = append(steps,
			step{flow: rules.OTPSend, recipient: u.phone, outcome: engine.Success},
			step{flow: rules.OTPVerify, recipient: u.phone, outcome: engine.Success})
	}
	l := &login{w: r.w, u: u, figs: figs, ip: ip, device: device, steps: steps}
	r.w.at(at, l.attempt)
}
