package simulate

import (
	"slices"
	"time"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
)

// How the auth service and the people behind it behave (README, "Tuning a
// rule" in docs/operations.md).
const (
	// userSolves is the share of challenges a legitimate user solves; the
	// others give up.
	userSolves = 0.9
	// attackerSolves is the share of challenges an attacker's bot solves
	// (paying a solving service); the others are abandoned, unreported.
	attackerSolves = 0.05
	// solveTime is how long solving a challenge takes.
	solveTime = 10 * time.Second
	// patience is the longest wait a slowed user accepts, maxRetries how
	// many times they wait: past either, they give up.
	patience   = 15 * time.Minute
	maxRetries = 3
	// retypeAfter is how long a user takes to type their password again
	// after a typo; codeAfter to type a one-time code once it is sent.
	retypeAfter = 3 * time.Second
	codeAfter   = 20 * time.Second
)

// step is one check of a login, and what its verification finds.
type step struct {
	flow      rules.Flow
	secret    string
	recipient string
	outcome   engine.Outcome
}

// login is a legitimate user getting in: one or more steps (a typo, the
// password, a one-time code sent and typed), each checked, verified and
// reported by the auth service as guardian asks. A slowed step is waited
// out and retried within the user's patience; a challenge is solved (or
// the user gives up) and the step re-checked with challenge_passed; a
// block ends the login.
type login struct {
	w    *world
	u    *user
	figs *friction
	// ip is where the user is; device says whether they are on their
	// trusted device.
	ip     string
	device bool
	steps  []step
	i      int
	tries  int
	passed bool
	// met are the rules that stood in this login's way, by action.
	met                       []trip
	slowed, challenged, block bool
}

// trip is a rule that slowed, challenged or blocked a check.
type trip struct {
	rule   string
	action rules.Action
}

func (l *login) attempt() {
	s := &l.steps[l.i]
	req := engine.CheckRequest{Flow: s.flow, Account: l.u.account, IP: l.ip, SecretFingerprint: s.secret, Recipient: s.recipient, ChallengePassed: l.passed}
	if l.device {
		req.DeviceToken = l.u.device
	}
	d, ok := l.w.check(req)
	if !ok {
		return
	}
	switch d.Action {
	case rules.Allow:
		l.verify(d.AttemptID)
	case rules.Challenge:
		l.note(d)
		switch {
		case l.passed:
			// Challenged again right after passing one: the service goes
			// ahead, as gateway mode does.
			l.verify(d.AttemptID)
		case l.w.chance(userSolves):
			l.passed = true
			l.w.after(solveTime, l.attempt)
		default:
			l.done(false)
		}
	case rules.Slow:
		l.note(d)
		if l.tries < maxRetries && d.RetryAfter <= patience {
			l.tries++
			l.w.after(d.RetryAfter, l.attempt)
			return
		}
		l.done(false)
	default:
		l.note(d)
		l.done(false)
	}
}

// verify has the auth service verify the step and report it, then moves
// on to the next step, or ends the login.
func (l *login) verify(attemptID string) {
	s := l.steps[l.i]
	l.w.report(attemptID, s.outcome, func(deviceToken string) {
		if s.flow == rules.Login && s.outcome == engine.Success && l.device && deviceToken != "" {
			l.u.device = deviceToken
		}
		l.passed, l.tries = false, 0
		if l.i++; l.i == len(l.steps) {
			l.done(true)
			return
		}
		wait := retypeAfter
		if l.steps[l.i].flow == rules.OTPVerify {
			wait = codeAfter
		}
		l.w.after(wait, l.attempt)
	})
}

func (l *login) note(d engine.Decision) {
	switch d.Action {
	case rules.Slow:
		l.slowed = true
	case rules.Challenge:
		l.challenged = true
	case rules.Block:
		l.block = true
	}
	for _, t := range l.met {
		if t.rule == d.Rule && t.action == d.Action {
			return
		}
	}
	l.met = append(l.met, trip{d.Rule, d.Action})
}

// done counts the login, unless it is a user's first login before the
// scenario starts (figs nil).
func (l *login) done(gotIn bool) {
	if l.figs == nil {
		return
	}
	l.figs.add(l.slowed, l.challenged, l.block, gotIn)
	for i, t := range l.met {
		if slices.ContainsFunc(l.met[:i], func(o trip) bool { return o.rule == t.rule }) {
			continue // counted with the rule's first trip
		}
		var slowed, challenged, blocked bool
		for _, o := range l.met[i:] {
			if o.rule == t.rule {
				slowed = slowed || o.action == rules.Slow
				challenged = challenged || o.action == rules.Challenge
				blocked = blocked || o.action == rules.Block
			}
		}
		l.w.rec.rule(t.rule).friction(l.figs).add(slowed, challenged, blocked, gotIn)
	}
}

// guess is one attacker's attempt: a login guessing a password, or a code
// sent to a number.
type guess struct {
	flow      rules.Flow
	account   string
	ip        string
	secret    string
	recipient string
	// right: the guess is the account's password (a compromise, if it
	// goes ahead).
	right bool
}

// attack makes g's check. An allowed guess goes ahead: the auth service
// verifies it and reports it. A challenged one goes ahead only when the
// bot solves the challenge and the re-check with challenge_passed lets it;
// a slowed or blocked one is lost (the attacker moves on, as a list-driven
// bot does).
func (w *world) attack(g guess) {
	req := engine.CheckRequest{Flow: g.flow, Account: g.account, IP: g.ip, SecretFingerprint: g.secret, Recipient: g.recipient}
	d, ok := w.check(req)
	if !ok {
		return
	}
	w.rec.attacker.Guesses++
	switch d.Action {
	case rules.Allow:
		w.goAhead(g, d.AttemptID, true)
		return
	case rules.Challenge:
		w.rec.stopped(d)
		if !w.chance(attackerSolves) {
			return
		}
		w.after(solveTime, func() {
			req.ChallengePassed = true
			d, ok := w.check(req)
			if ok && (d.Action == rules.Allow || d.Action == rules.Challenge) {
				w.goAhead(g, d.AttemptID, false)
			}
		})
	default:
		w.rec.stopped(d)
	}
}

// goAhead counts g as a guess that went ahead, and has it verified and
// reported: a wrong password a failure, a code sent a success.
func (w *world) goAhead(g guess, attemptID string, unchallenged bool) {
	w.rec.allowed(g, unchallenged)
	outcome := engine.Failure
	if g.right || g.flow == rules.OTPSend {
		outcome = engine.Success
	}
	w.report(attemptID, outcome, nil)
}
