package store

// An account's familiar networks, and the ops that depend on them.
//
// A Familiar op reads the list of networks its key's account succeeded
// from: at most MaxFamiliar members, each a short keyed hash of a network
// with the instant it is forgotten. Its result's Allowed reports whether
// its Member is on the list, unexpired; ResetAfter is how long it stays
// there, Count how many members the list holds. It spends nothing and never
// denies the batch.
//
// The Familiar op decides the batch's conditional ops, in the same store
// call: an op with When IfFamiliar counts only when the member is on the
// list, one with IfUnfamiliar only when it is not. An op that does not count
// is skipped: its result is Allowed alone, it spends nothing and denies
// nothing. So a check names both of an account's buckets, the shared one and
// the one of its network, and the store picks the bucket by state the check
// cannot see beforehand, without a second round trip. On Redis Cluster a
// Familiar op and the ops conditional on it must share a slot (one hash
// tag): guardian keys all of them by the account's subject.
//
// A Learn settlement puts Member on its key's list for Span from now
// (refreshing it when it is there already), evicting the member forgotten
// soonest when the list is full. Unlike other settlements it creates the
// key.

// Familiar reads an account's familiar networks: it never spends or denies,
// and decides which of the batch's conditional ops count. Its op has no
// cost, enforces, counts always, and looks for its Member.
type Familiar struct{}

// Divided is l itself: a list of networks is not shared out.
func (l Familiar) Divided(int64) Limit { return l }

func (l Familiar) valid(op *Op) bool {
	return ValidMember(op.Member) && op.Cost == 0 && op.Role == Enforce && op.When == Always
}

// When says whether an op counts, given the batch's Familiar op.
type When uint8

const (
	// Always counts the op whatever the batch's Familiar op finds.
	Always When = iota
	// IfFamiliar counts the op only when the Familiar op's member is on
	// its list.
	IfFamiliar
	// IfUnfamiliar counts the op only when it is not.
	IfUnfamiliar
)

// MaxFamiliar is how many networks one account's list holds: a success
// from a ninth network makes the one forgotten soonest unfamiliar again.
const MaxFamiliar = 8

// MaxMemberLen is the longest Member, in bytes.
const MaxMemberLen = 24

// ValidMember reports whether m can be a Member: 1 to MaxMemberLen bytes of
// unpadded base64url, which the stores' list encodings rely on.
func ValidMember(m string) bool {
	if m == "" || len(m) > MaxMemberLen {
		return false
	}
	for i := 0; i < len(m); i++ {
		c := m[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Counts reports whether an op that is When counts, given whether the
// batch's Familiar op found its member.
func (w When) Counts(familiar bool) bool {
	switch w {
	case IfFamiliar:
		return familiar
	case IfUnfamiliar:
		return !familiar
	}
	return true
}

// validateFamiliar checks what ErrBadBatch says of the ops above: at most
// one Familiar op, and conditional ops only with one.
func validateFamiliar(ops []Op) error {
	familiar, conditional := 0, false
	for i := range ops {
		op := &ops[i]
		if _, ok := op.Limit.(Familiar); ok {
			familiar++
		}
		if op.When > IfUnfamiliar {
			return ErrBadBatch
		}
		conditional = conditional || op.When != Always
	}
	if familiar > 1 || conditional && familiar == 0 {
		return ErrBadBatch
	}
	return nil
}

// FamiliarFound reports what the batch's Familiar op found: whether its
// member is on the list. A batch without one finds nothing.
func FamiliarFound(ops []Op, res []Result) bool {
	for i := range ops {
		if _, ok := ops[i].Limit.(Familiar); ok {
			return res[i].Allowed
		}
	}
	return false
}

// HasFamiliar reports whether ops hold a Familiar op.
func HasFamiliar(ops []Op) bool {
	for i := range ops {
		if _, ok := ops[i].Limit.(Familiar); ok {
			return true
		}
	}
	return false
}
