package simulate

import (
	"math"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
)

// Attacker is what one scenario's attacker got.
type Attacker struct {
	// Guesses counts the attacker's attempts: logins tried, or codes asked
	// for in sms_pumping.
	Guesses int64 `json:"guesses"`
	// Allowed counts the guesses that went ahead (the auth service
	// verified the password, or sent the code): allowed, or challenged and
	// solved. Unchallenged counts those allowed without a challenge.
	Allowed      int64 `json:"allowed"`
	Unchallenged int64 `json:"unchallenged"`
	// MaxPerAccount is the most guesses that went ahead against one
	// account (one number in sms_pumping).
	MaxPerAccount int64 `json:"max_per_account"`
	// AccountsReached counts the accounts (numbers) at least one guess
	// went ahead against.
	AccountsReached int64 `json:"accounts_reached"`
	// AccountsCompromised counts the accounts whose password a guess that
	// went ahead was: the model's reused and common passwords.
	AccountsCompromised int64 `json:"accounts_compromised"`
	// MaxUnchallengedPerSecret is the most guesses of one password allowed
	// without a challenge, across every account.
	MaxUnchallengedPerSecret int64 `json:"max_unchallenged_per_secret"`
	// Slowed, Challenged and Blocked count the guesses the rules first
	// answered so.
	Slowed     int64 `json:"slowed"`
	Challenged int64 `json:"challenged"`
	Blocked    int64 `json:"blocked"`
}

// Stops are the attacker's guesses one rule answered, by decision.
type Stops struct {
	Slowed     int64 `json:"slowed"`
	Challenged int64 `json:"challenged"`
	Blocked    int64 `json:"blocked"`
}

// Friction is what the rules cost legitimate logins: how many logins met a
// slow, a challenge or a block (a login may meet several), and how many
// never got in.
type Friction struct {
	Logins     int64 `json:"logins"`
	Slowed     int64 `json:"slowed"`
	Challenged int64 `json:"challenged"`
	Blocked    int64 `json:"blocked"`
	// Failed counts the logins that never got in: a block, a challenge
	// given up, a wait past the user's patience.
	Failed int64 `json:"failed"`
	// The shares of Logins, rounded to six decimals.
	SlowedShare     float64 `json:"slowed_share"`
	ChallengedShare float64 `json:"challenged_share"`
	BlockedShare    float64 `json:"blocked_share"`
	FailedShare     float64 `json:"failed_share"`
}

// Way is the friction of one of the owner's ways in, in lockout and cgnat.
type Way struct {
	// Way is home (the owner's familiar network, no device), device (the
	// owner's trusted device) or new_network (neither).
	Way string `json:"way"`
	Friction
}

// RuleFigures is what one rule decided in a scenario, the set running as
// written: the guesses and logins whose check it was the deciding rule of.
type RuleFigures struct {
	Rule     string   `json:"rule"`
	Attacker Stops    `json:"attacker"`
	Users    Friction `json:"users"`
	// Owner is set in lockout and cgnat.
	Owner []Way `json:"owner,omitempty"`
}

// friction counts logins as they end.
type friction struct{ logins, slowed, challenged, blocked, failed int64 }

func (f *friction) add(slowed, challenged, blocked, gotIn bool) {
	f.logins++
	f.slowed += b2i(slowed)
	f.challenged += b2i(challenged)
	f.blocked += b2i(blocked)
	f.failed += b2i(!gotIn)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// of returns the figures of f; logins is the number shares are of (the
// cohort's logins, for a rule's figures too).
func (f *friction) of(logins int64) Friction {
	share := func(n int64) float64 {
		if logins == 0 {
			return 0
		}
		return math.Round(float64(n)/float64(logins)*1e6) / 1e6
	}
	return Friction{Logins: logins, Slowed: f.slowed, Challenged: f.challenged, Blocked: f.blocked, Failed: f.failed,
		SlowedShare: share(f.slowed), ChallengedShare: share(f.challenged), BlockedShare: share(f.blocked), FailedShare: share(f.failed)}
}

// recorder collects a scenario's figures as its world runs.
type recorder struct {
	attacker    Attacker
	perAccount  map[string]int64
	compromised map[string]bool
	perSecret   map[string]int64
	users       friction
	// ways are the owner's ways in, in order; owner their friction.
	ways  []string
	owner map[string]*friction
	rules map[string]*ruleTally
}

// ruleTally is what one rule decided.
type ruleTally struct {
	stops Stops
	// byCohort is the friction it caused, by cohort (the users' or one of
	// the owner's ways').
	byCohort map[*friction]*friction
}

func newRecorder(ways []string) *recorder {
	r := &recorder{perAccount: map[string]int64{}, compromised: map[string]bool{}, perSecret: map[string]int64{},
		ways: ways, owner: map[string]*friction{}, rules: map[string]*ruleTally{}}
	for _, w := range ways {
		r.owner[w] = &friction{}
	}
	return r
}

func (r *recorder) rule(name string) *ruleTally {
	t := r.rules[name]
	if t == nil {
		t = &ruleTally{byCohort: map[*friction]*friction{}}
		r.rules[name] = t
	}
	return t
}

// friction returns the rule's friction of cohort.
func (t *ruleTally) friction(cohort *friction) *friction {
	f := t.byCohort[cohort]
	if f == nil {
		f = &friction{}
		t.byCohort[cohort] = f
	}
	return f
}

// stopped counts a guess the rules answered d.
func (r *recorder) stopped(d engine.Decision) {
	s := &r.rule(d.Rule).stops
	switch d.Action {
	case rules.Slow:
		r.attacker.Slowed++
		s.Slowed++
	case rules.Challenge:
		r.attacker.Challenged++
		s.Challenged++
	case rules.Block:
		r.attacker.Blocked++
		s.Blocked++
	}
}

// allowed counts a guess that went ahead.
func (r *recorder) allowed(g guess, unchallenged bool) {
	a := &r.attacker
	a.Allowed++
	key := g.account
	if g.flow == rules.OTPSend {
		key = g.recipient
	}
	n := r.perAccount[key] + 1
	r.perAccount[key] = n
	a.MaxPerAccount = max(a.MaxPerAccount, n)
	a.AccountsReached = int64(len(r.perAccount))
	if g.right && !r.compromised[g.account] {
		r.compromised[g.account] = true
		a.AccountsCompromised++
	}
	if unchallenged {
		a.Unchallenged++
		if g.secret != "" {
			m := r.perSecret[g.secret] + 1
			r.perSecret[g.secret] = m
			a.MaxUnchallengedPerSecret = max(a.MaxUnchallengedPerSecret, m)
		}
	}
}

// figures returns what r recorded, its rules in the order of set.
func (r *recorder) figures(set *rules.Set) (Attacker, Friction, []Way, []RuleFigures) {
	ways := func(cohortOf func(w string) *friction) []Way {
		if len(r.ways) == 0 {
			return nil
		}
		out := make([]Way, 0, len(r.ways))
		for _, w := range r.ways {
			f := cohortOf(w)
			if f == nil {
				f = &friction{}
			}
			out = append(out, Way{Way: w, Friction: f.of(r.owner[w].logins)})
		}
		return out
	}
	owner := ways(func(w string) *friction { return r.owner[w] })
	var perRule []RuleFigures
	for i := range set.Rules {
		name := set.Rules[i].Name
		t := r.rules[name]
		if t == nil {
			continue
		}
		users := t.byCohort[&r.users]
		if users == nil {
			users = &friction{}
		}
		perRule = append(perRule, RuleFigures{
			Rule:     name,
			Attacker: t.stops,
			Users:    users.of(r.users.logins),
			Owner:    ways(func(w string) *friction { return t.byCohort[r.owner[w]] }),
		})
	}
	if perRule == nil {
		perRule = []RuleFigures{}
	}
	return r.attacker, r.users.of(r.users.logins), owner, perRule
}
