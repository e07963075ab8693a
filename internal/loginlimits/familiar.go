package loginlimits

import (
	"net/netip"

	"github.com/guardian-sec/guardian/internal/keys"
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

// Learn appends to dst what a success report of a check of the account
// with subject account from network member makes of it: the member joins
// the account's familiar list for fam.Hold, and the network's
// consecutive-failure counts of rs are reset, so that the owner's success
// at home ends a run of failures counted there. A failure report confirms
// none of them (their Amount is zero).
func Learn(dst []store.Settlement, rs []*rules.Rule, fam rules.FamiliarNetworks, account, member string) []store.Settlement {
	for _, r := range rs {
		if Counts(r) && r.Type == rules.ConsecutiveFailures {
			dst = append(dst, store.Settlement{Key: NetworkKey(account, r.Name, member), Action: store.Reset})
		}
	}
	return append(dst, store.Settlement{Key: FamiliarKey(account), Action: store.Learn, Member: member, Span: fam.Hold})
}
