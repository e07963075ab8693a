package memstore

import "github.com/guardian-sec/guardian/internal/store"

// attribution is a Counter key's attributed units (store.MaxAttributed
// members at most, the most recent last). Like a famList it is replaced,
// never changed in place, once stored.
type attribution struct {
	members []attributed
}

// attributed is the units one member spent on a Counter.
type attributed struct {
	member string
	units  int64
}

// with returns a copy of a (nil: none) with units more attributed to member,
// which becomes the most recent; the least recent beyond
// store.MaxAttributed is forgotten, its units staying counted.
func (a *attribution) with(member string, units int64) *attribution {
	out := &attribution{members: make([]attributed, 0, store.MaxAttributed)}
	if a != nil {
		for _, m := range a.members {
			if m.member == member {
				units += m.units
				continue
			}
			out.members = append(out.members, m)
		}
	}
	if len(out.members) == store.MaxAttributed {
		out.members = out.members[1:]
	}
	out.members = append(out.members, attributed{member: member, units: units})
	return out
}

// without returns a copy of a without member, and the units it had; a
// itself when member has none.
func (a *attribution) without(member string) (*attribution, int64) {
	if a == nil {
		return nil, 0
	}
	for i, m := range a.members {
		if m.member == member {
			out := &attribution{members: make([]attributed, 0, len(a.members)-1)}
			out.members = append(append(out.members, a.members[:i]...), a.members[i+1:]...)
			return out, m.units
		}
	}
	return a, 0
}

// attributeSpend returns the attribution a spend of the Counter op leaves,
// from what the key held when live.
func attributeSpend(op *store.Op, ev *eval) *attribution {
	var held *attribution
	if ev.live {
		held = ev.found.attr
	}
	if op.Member == "" {
		return held
	}
	return held.with(op.Member, op.Cost)
}

// lift applies a Lift to the live Counter entry e of key in sh, which must
// be locked: the units of st.Member come off its count, and the key goes
// when none are left.
func (s *Store) lift(sh *shard, st *store.Settlement, e entry) {
	attr, units := e.attr.without(st.Member)
	if units == 0 {
		return
	}
	e.v -= units
	if e.v <= 0 {
		s.remove(sh, st.Key, e)
		return
	}
	e.attr = attr
	s.set(sh, st.Key, e)
}
