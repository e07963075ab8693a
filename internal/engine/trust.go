package engine

import (
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/loginlimits"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// Trust names the bucket a check's key: account rules counted it in, as
// every check answer says: nobody can lock a user out who is on a device,
// a network or behind a challenge that an attacker elsewhere does not share.
type Trust string

// The trusts of a check answer.
const (
	// TrustDevice is a valid device token's own bucket (account+device).
	TrustDevice Trust = "device"
	// TrustNetwork is a familiar network's own bucket (account+network).
	TrustNetwork Trust = "network"
	// TrustChallenge is the account's challenged bucket: the end user
	// passed a challenge.
	TrustChallenge Trust = "challenge"
	// TrustNone is the account's shared bucket.
	TrustNone Trust = "none"
)

// otherBuckets works out the buckets other than the shared one that the
// account rules may count the check of s in: its challenged bucket when the
// end user passed a challenge, and, under familiar networks, its network's.
// A trusted device keeps its own bucket whatever else the check says, but
// its network is still learned on a success.
func (e *Engine) otherBuckets(s *subjects, req *CheckRequest, fam rules.FamiliarNetworks) {
	s.challenged = req.ChallengePassed && s.device == ""
	if fam.On() && s.ids.IP.IsValid() {
		s.member = e.login.Member(s.account, keys.Prefix(s.ids.IP, fam.IPv4Prefix, fam.IPv6Prefix))
	}
}

// add appends to p the ops of rule r for the check: one on the rule's
// subject, or for an untrusted check's account rules (loginlimits.Counts)
// the bucket its trust chooses. Under familiar networks that is two ops,
// the unfamiliar bucket and the network's, and the store counts the one
// the account's familiar list chooses (store.Familiar).
func (s *subjects) add(p *plan, h *keys.Hasher, r *rules.Rule, cost int64) error {
	subject := s.subject(h, r)
	switch {
	case subject == "":
		return nil
	case r.Type == rules.Distinct:
		s.addDistinct(p, r, subject)
		return nil
	}
	if err := fits(r, cost); err != nil {
		return err
	}
	if s.device != "" || !loginlimits.Counts(r) || !s.challenged && s.member == "" {
		p.add(r, subject, cost)
		return nil
	}
	key := keys.StoreKey(subject, r.Name)
	if s.challenged && r.Type == rules.Rate {
		key = loginlimits.ChallengedKey(subject, r.Name)
	}
	if s.member == "" {
		p.addAt(r, subject, key, cost, store.Always)
		return nil
	}
	if !store.HasFamiliar(p.ops) {
		p.ops = append(p.ops, store.Op{Key: loginlimits.FamiliarKey(s.account), Limit: store.Familiar{}, Member: s.member})
		p.rules = append(p.rules, nil)
		p.subjects = append(p.subjects, s.account)
	}
	p.addAt(r, subject, key, cost, store.IfUnfamiliar)
	p.addAt(r, subject, loginlimits.NetworkKey(subject, r.Name, s.member), cost, store.IfFamiliar)
	return nil
}

// distinctMemberLen is how many characters of the account's subject a
// distinct rule counts it by: 96 bits, so that two of a network's accounts
// coincide with odds far below the estimate's own error.
const distinctMemberLen = 16

// addDistinct appends to p the op of distinct rule r on the network
// subject: it counts the check's account among the network's, and adds it
// unless the rule counts failures and the check carries a valid device
// token (a device the account succeeded on). A check without an account
// adds nothing: the rule does not apply.
func (s *subjects) addDistinct(p *plan, r *rules.Rule, subject string) {
	if s.account == "" {
		return
	}
	op := opFor(r, subject, 1)
	op.Member = s.account[:distinctMemberLen]
	if r.Count == rules.Failures && s.device != "" {
		op.Cost = 0
	}
	p.ops = append(p.ops, op)
	p.rules = append(p.rules, r)
	p.subjects = append(p.subjects, subject)
}

// exempt reports whether the check is exempt from failure_rate challenges:
// a trusted device, or a passed challenge. A familiar network is not.
func (s *subjects) exempt(req *CheckRequest) bool {
	return s.device != "" || req.ChallengePassed
}

// trust returns the bucket the account rules counted the check of s in,
// given what the store did with p.
func (s *subjects) trust(p *plan, res []store.Result) Trust {
	switch {
	case s.device != "":
		return TrustDevice
	case s.member != "" && store.FamiliarFound(p.ops, res):
		return TrustNetwork
	case s.challenged:
		return TrustChallenge
	}
	return TrustNone
}

// learn appends to dst what a success of the check of s teaches, under
// set's familiar networks: its network joins the account's familiar list
// (loginlimits.Learn), for a login or password_reset check with an account.
func (s *subjects) learn(dst []store.Settlement, flow rules.Flow, set *rules.Set) []store.Settlement {
	if s.member == "" || !loginlimits.Learns(flow) || !settles(flow) {
		return dst
	}
	return loginlimits.Learn(dst, set.For(flow), set.Familiar, s.account, s.member)
}

// tolls reports whether rule r's op is a toll (store.Op.Toll): an enforced
// rate rule by address that slows, which a check slowed by another rule
// still pays. So a poller that keeps knocking on an account held at zero
// spends its own address's budget, and soon stops draining the account.
func tolls(r *rules.Rule) bool {
	return r.Key == rules.KeyIP && r.Type == rules.Rate && r.Mode == rules.Enforce && r.Action != rules.Challenge
}
