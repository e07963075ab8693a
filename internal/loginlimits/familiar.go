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

// memberLen is how many characters of a network's subject its member keeps:
// 96 bits, far more than an account's handful of networks need to stay
// apart.
const memberLen = 16

// kindNetwork is the kind of subject a network's member hashes from.
const kindNetwork = "network"

// Learns reports whether a success of flow makes its network familiar.
func Learns(flow rules.Flow) bool {
	return flow == rules.Login || flow == rules.PasswordReset
}

// Member returns the member that stands for network net on the familiar
// list of the account whose subject is account.
func (p *Policy) Member(account string, net netip.Prefix) string {
	return p.hasher.Subject(kindNetwork, account, net.String())[:memberLen]
}

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
}

// Add adds to p the entry e of a key: account rule (Counts) for an
// untrusted check, in the buckets b chooses: the shared one (e as it is),
// the challenged one, or under familiar networks both the unfamiliar
// bucket and the network's, each conditional on the account's familiar
// list, which a Familiar entry of p reads in the same store call (added
// with the first rule that needs it). The store counts the one the list
// chooses; both share e's Bit and settlements, on their own keys.
func (b Buckets) Add(p *plan.Plan, e plan.Entry) {
	r := e.Rule
	if b.Challenged && r.Type == rules.Rate {
		e.Op.Key = ChallengedKey(e.Subject, r.Name)
	}
	if b.Member == "" {
		p.Add(e)
		return
	}
	if !p.Has(plan.Familiar) {
		p.Add(plan.Entry{
			Kind:    plan.Familiar,
			Op:      store.Op{Key: FamiliarKey(b.Account), Limit: store.Familiar{}, Member: b.Member},
			Subject: b.Account,
			Bit:     plan.NoBit,
		})
	}
	network := e
	e.Op.When = store.IfUnfamiliar
	network.Op.Key, network.Op.When = NetworkKey(e.Subject, r.Name, b.Member), store.IfFamiliar
	p.Add(e)
	p.Add(network)
}

// Learn adds to p what a success report of a check of flow by the account
// with subject account from network member teaches, under set's familiar
// networks, for a login or password_reset check (Learns): the member joins
// the account's familiar list for the networks' hold, and the network's
// consecutive-failure counts of the flow's rules are reset, so that the
// owner's success at home ends a run of failures counted there. They have
// no op, and a failure report does nothing with them.
func Learn(p *plan.Plan, set *rules.Set, flow rules.Flow, account, member string) {
	if member == "" || account == "" || !Learns(flow) {
		return
	}
	for _, r := range set.For(flow) {
		if Counts(r) && r.Type == rules.ConsecutiveFailures {
			p.Add(plan.Entry{Rule: r, Kind: plan.Learning, Bit: plan.NoBit,
				Success: store.Settlement{Key: NetworkKey(account, r.Name, member), Action: store.Reset}})
		}
	}
	p.Add(plan.Entry{Kind: plan.Learning, Bit: plan.NoBit,
		Success: store.Settlement{Key: FamiliarKey(account), Action: store.Learn, Member: member, Span: set.Familiar.Hold}})
}
