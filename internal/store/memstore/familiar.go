package memstore

import (
	"context"
	"fmt"

	"github.com/guardian-sec/guardian/internal/store"
)

// famList is a Familiar key's networks, each with the instant (Unix µs) it
// is forgotten; at most store.MaxFamiliar of them. A list is replaced, never
// changed in place, so an entry copied out of its shard stays valid.
type famList struct {
	members []famMember
}

// famMember is one familiar network.
type famMember struct {
	tag string
	exp int64
}

// find returns the unexpired member tag of l, if there is one.
func (l *famList) find(tag string, now int64) (famMember, bool) {
	if l != nil {
		for _, m := range l.members {
			if m.tag == tag && m.exp > now {
				return m, true
			}
		}
	}
	return famMember{}, false
}

// evaluateFamiliar evaluates the batch's Familiar op, if it has one, and
// reports whether its member is familiar. Its shard must be locked.
func (s *Store) evaluateFamiliar(ops []store.Op, evs []eval, now int64) bool {
	for i := range ops {
		op, ev := &ops[i], &evs[i]
		if !isFamiliar(op) {
			continue
		}
		*ev = eval{shard: ev.shard, curExp: now}
		sh := &s.shards[ev.shard]
		e, found := sh.m[op.Key]
		if found && e.exp <= now {
			s.remove(sh, op.Key, e)
			found = false
		}
		if !found {
			return false
		}
		ev.live = true
		ev.cur = int64(len(e.fam.members))
		if m, ok := e.fam.find(op.Member, now); ok {
			ev.ok, ev.curExp = true, m.exp
		}
		return ev.ok
	}
	return false
}

// addFamiliar applies a Learn: st.Member joins st.Key's list until st.Span
// from now, or stays there until then if that is later; a full
// list drops the member forgotten soonest first. A new list takes a slot
// like any new key (upsert).
func (s *Store) addFamiliar(st *store.Settlement) {
	s.upsert(st.Key, func(e entry, found bool, now int64) entry {
		exp := now + min(micros(st.Span), maxSpan)
		members := make([]famMember, 0, store.MaxFamiliar)
		if found {
			for _, m := range e.fam.members {
				switch {
				case m.exp <= now:
				case m.tag == st.Member:
					exp = max(exp, m.exp)
				default:
					members = append(members, m)
				}
			}
		}
		if len(members) == store.MaxFamiliar {
			soonest := 0
			for i, m := range members {
				if m.exp < members[soonest].exp {
					soonest = i
				}
			}
			members = append(members[:soonest], members[soonest+1:]...)
		}
		members = append(members, famMember{tag: st.Member, exp: exp})
		last := int64(0)
		for _, m := range members {
			last = max(last, m.exp)
		}
		return entry{exp: last, fam: &famList{members: members}}
	})
}

// upsert sets key to what next makes of its entry, found unexpired or not,
// at now, with key's shard locked: a settlement that creates its key. A new
// key takes a slot, evicting to make room; with none to be had, nothing is
// set.
func (s *Store) upsert(key string, next func(e entry, found bool, now int64) entry) {
	now := s.now().UnixMicro()
	sh := &s.shards[s.shardOf(key)]
	var held int64
	for try := 0; ; try++ {
		sh.mu.Lock()
		e, found := sh.m[key]
		if found && e.exp <= now {
			s.remove(sh, key, e)
			found = false
		}
		if !found && held == 0 {
			held = s.take(1)
		}
		if !found && held == 0 {
			sh.mu.Unlock()
			if try == roomTries {
				return
			}
			held = s.makeRoom(1, now)
			continue
		}
		if found {
			s.n.Add(-held)
		}
		s.set(sh, key, next(e, found, now))
		sh.mu.Unlock()
		return
	}
}

// Familiar returns the unexpired members of the familiar list at key.
func (s *Store) Familiar(ctx context.Context, key string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: %w", err)
	}
	sh := &s.shards[s.shardOf(key)]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.now().UnixMicro()
	e, found := sh.m[key]
	if !found || e.exp <= now || e.fam == nil {
		return nil, nil
	}
	out := make([]string, 0, len(e.fam.members))
	for _, m := range e.fam.members {
		if m.exp > now {
			out = append(out, m.tag)
		}
	}
	return out, nil
}
