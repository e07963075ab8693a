package loginlimits

import (
	"net/netip"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/plan"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// Familiar networks and passed challenges: the buckets an untrusted check
// of an account counts on instead of the account's shared one.
//
// A success report of a login or password_reset check makes the check's
// network familiar to its account (rules.FamiliarNetworks): the network's
// member, a keyed hash of the account and the network, joins the account's
// familiar list, a store key of the account's own subject holding at most
// store.MaxFamiliar members (under 300 bytes). A later check of the account
// names both buckets of each key: account rule, the shared one and the
// network's, and the store counts the one the list chooses, in the same call
// (store.Familiar): a check from a familiar network costs no extra round
// trip. The network's bucket of a rule is a key of the account's own subject
// too, so that on Redis Cluster the list and both buckets share a slot.
//
// A check whose end user passed a challenge counts on key: account rate
// rules in the account's challenged bucket, with the rule's own numbers; its
// consecutive-failure rules stay on the shared count. From a familiar
// network, the network's buckets win: they are the owner's own.

// sourceLen is how many characters of a source's subject its member keeps
// (Source): 96 bits, far more than a count's handful of sources need to
// stay apart.
const sourceLen = 16

// kindSource is the kind of subject a source's member hashes from.
const kindSource = "source"

// Learns reports whether a success of flow makes its network familiar.
func Learns(flow rules.Flow) bool {
	return flow == rules.Login || flow == rules.PasswordReset
}

// Member returns the member that stands for network net on the familiar
// list of the account whose subject is account: the network's pseudonym
// (keys.PseudonymNetwork), so that an account's status can name its
// familiar networks as every other view of guardian names them.
func (p *Policy) Member(account string, net netip.Prefix) string {
	return p.hasher.Pseudonym(keys.PseudonymNetwork, net.Masked().String())
}

// Source returns the member a consecutive-failure count of the account
// whose subject is account attributes a check from addr to
// (store.MaxAttributed): addr's IPv4 address or IPv6 /64, hashed with the
// account, so that the owner's success lifts the failures made from the
// owner's address and nothing else.
func (p *Policy) Source(account string, addr netip.Addr) string {
	net := keys.Prefix(addr, sourceIPv4Bits, sourceIPv6Bits)
	return p.hasher.Subject(kindSource, account, net.String())[:sourceLen]
}

// A source is an IPv4 address or an IPv6 /64, as key: account+ip rules
// count a client.
const (
	sourceIPv4Bits = 32
	sourceIPv6Bits = 64
)

// FamiliarKey returns the store key of the familiar list of the account
// whose subject is account.
func FamiliarKey(account string) string {
	return keys.StoreKey(account, "familiar")
}

// NetworkKey returns the store key of rule's bucket for the network member
// of the account whose subject is account.
func NetworkKey(account, rule, member string) string {
	return keys.StoreKey(account, rule+":net:"+member)
}

// ChallengedKey returns the store key of rule's bucket for the account's
// checks whose end user passed a challenge.
func ChallengedKey(account, rule string) string {
	return keys.StoreKey(account, rule+":challenged")
}

// Counts reports whether rule r counts an untrusted check of an account in
// a bucket chosen by its network: the key: account rate and
// consecutive-failure rules.
func Counts(r *rules.Rule) bool {
	return r.Key == rules.KeyAccount && (r.Type == rules.Rate || r.Type == rules.ConsecutiveFailures)
}

// Buckets are the buckets other than the account's shared one that an
// untrusted check of an account may count in on its key: account rules
// (Counts). The zero Buckets chooses the shared bucket.
type Buckets struct {
	// Account is the account's subject.
	Account string
	// Challenged reports that the end user passed a challenge: key:
	// account rate rules count in the account's challenged bucket.
	Challenged bool
	// Member is the check's network as the account's familiar list holds
	// it (Policy.Member), "" when the rules learn no networks.
	Member string
	// Source is the check's source as the account's consecutive-failure
	// counts attribute it (Policy.Source), "" without an address.
	Source string
}

// Add adds to p the entry e of a key: account rule (Counts) for an
// untrusted check, in the buckets b chooses: the shared one (e as it is),
// the challenged one, or under familiar networks both the unfamiliar
// bucket and the network's, each conditional on the account's familiar
// list, which a Familiar entry of p reads in the same store call (added
// with the first rule that needs it). The store counts the one the list
// chooses; both share e's Bit and settlements, on their own keys.
//
// A consecutive-failure count attributes the check to its source, and a
// success lifts what its source spent there and nothing else (Attribute).
func (b Buckets) Add(p *plan.Plan, e plan.Entry) {
	r := e.Rule
	if b.Challenged && r.Type == rules.Rate {
		e.Op.Key = ChallengedKey(e.Subject, r.Name)
	}
	if r.Type == rules.ConsecutiveFailures {
		Attribute(&e, b.Source)
	}
	if b.Member == "" {
		p.Add(e)
		return
	}
	readFamiliar(p, b.Account, b.Member)
	network := e
	e.Op.When = store.IfUnfamiliar
	network.Op.Key, network.Op.When = NetworkKey(e.Subject, r.Name, b.Member), store.IfFamiliar
	p.Add(e)
	p.Add(network)
}

// readFamiliar adds to p, unless it has one, the entry that reads the
// familiar list of the account with subject account for network member:
// what decides the plan's conditional entries.
func readFamiliar(p *plan.Plan, account, member string) {
	if p.Has(plan.Familiar) {
		return
	}
	p.Add(plan.Entry{
		Kind:    plan.Familiar,
		Op:      store.Op{Key: FamiliarKey(account), Limit: store.Familiar{}, Member: member},
		Subject: account,
		Bit:     plan.NoBit,
	})
}

// Attribute makes e, the entry of a consecutive_failures rule for an
// untrusted check, attribute its count to source, and its success lift
// what source spent there instead of resetting the count (store.Lift):
// failures made from elsewhere stay counted until they expire or a
// verified reset, however often the owner succeeds. Without a source the
// success lifts nothing. An entry whose success settles nothing (an OTP
// send, Settle not called) is left alone.
func Attribute(e *plan.Entry, source string) {
	if e.Success.Action != store.Reset {
		return
	}
	if source == "" {
		e.Success = store.Settlement{}
		return
	}
	e.Op.Member = source
	e.Success = store.Settlement{Action: store.Lift, Member: source}
}

// Learn adds to p what a success report of a check of flow by the account
// with subject account from network member teaches, under set's familiar
// networks, for a login or password_reset check (Learns): the member joins
// the account's familiar list for the networks' hold. It resets nothing: a
// network's bucket keeps what others on the network failed, even while the
// network is off the list and when it is learned again (an owner who logs
// in from many networks pushes home off the list, and relearning it must
// hand an attacker there no new guesses); the owner's success lifts its own
// source's failures (Attribute), and only a verified reset (ResetKeys with
// the list's networks) or the hold ends the rest. The lesson has no op, and
// a failure report does nothing with it.
func Learn(p *plan.Plan, set *rules.Set, flow rules.Flow, account, member string) {
	if member == "" || account == "" || !Learns(flow) {
		return
	}
	p.Add(plan.Entry{Kind: plan.Learning, Bit: plan.NoBit,
		Success: store.Settlement{Key: FamiliarKey(account), Action: store.Learn, Member: member, Span: set.Familiar.Hold}})
}
