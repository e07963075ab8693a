package memstore

import "github.com/guardian-sec/guardian/internal/store"

// memory is the state of a Guesses key: its remembered guesses, oldest
// first, each with the instant (Unix µs) it is forgotten. An entry's memory
// is never changed in place: a spend makes a new one, so that an evaluation
// may keep what it found while its shard is locked.
type memory struct {
	n     int
	guess [store.MaxGuesses]uint64
	exp   [store.MaxGuesses]int64
}

// live returns what m still remembers at now.
func (m *memory) live(now int64) *memory {
	out := &memory{}
	for i := range m.n {
		if m.exp[i] > now {
			out.guess[out.n], out.exp[out.n] = m.guess[i], m.exp[i]
			out.n++
		}
	}
	return out
}

// has reports whether m remembers g.
func (m *memory) has(g uint64) bool {
	for i := range m.n {
		if m.guess[i] == g {
			return true
		}
	}
	return false
}

// last is when m forgets the last of its guesses, the key's expiry; now
// when it remembers none.
func (m *memory) last(now int64) int64 {
	last := now
	for i := range m.n {
		last = max(last, m.exp[i])
	}
	return last
}

// record returns m with g as its most recent guess, remembered until exp at
// least, and at most limit guesses: g moves to the end if m had it, keeping
// a later deadline it had, and the oldest go.
func (m *memory) record(g uint64, exp int64, limit int64) *memory {
	out := &memory{}
	for i := range m.n {
		if m.guess[i] != g {
			out.guess[out.n], out.exp[out.n] = m.guess[i], m.exp[i]
			out.n++
		} else {
			exp = max(exp, m.exp[i])
		}
	}
	if int64(out.n) >= limit {
		drop := out.n - int(limit) + 1
		copy(out.guess[:], out.guess[drop:out.n])
		copy(out.exp[:], out.exp[drop:out.n])
		out.n -= drop
	}
	out.guess[out.n], out.exp[out.n] = g, exp
	out.n++
	return out
}

// confirm returns m with g, if m has it, remembered until exp at least.
func (m *memory) confirm(g uint64, exp int64) *memory {
	out := *m
	for i := range out.n {
		if out.guess[i] == g {
			out.exp[i] = max(out.exp[i], exp)
		}
	}
	return &out
}

// confirmGuess applies the Confirm st of a guess to the entry e of sh,
// which must be locked: a Guesses entry keeps st's guess for st.Span from
// now; any other entry is removed.
func (s *Store) confirmGuess(sh *shard, st *store.Settlement, e entry, now int64) {
	if e.mem == nil {
		s.remove(sh, st.Key, e)
		return
	}
	m := e.mem.live(now).confirm(st.Guess, now+min(micros(st.Span), maxSpan))
	if m.n == 0 {
		s.remove(sh, st.Key, e)
		return
	}
	s.set(sh, st.Key, entry{mem: m, exp: m.last(now)})
}

// evaluateGuesses reads a Guesses op's memory from e (found unexpired or
// not): the op always fits, and finds whether its guess is remembered.
func evaluateGuesses(op *store.Op, ev *eval, e entry, found bool, now int64) {
	ev.ok = true
	ev.mem = &memory{}
	if found && e.mem != nil {
		ev.mem = e.mem.live(now)
	}
	ev.repeat = ev.mem.has(op.Guess)
}

// waive marks the FreeOnRepeat ops of a batch whose Guesses op found its
// guess remembered: they are evaluated, and not spent. With an allowance
// of free repeats (store.Op.OnRepeat) the repeat is free only while the
// allowance fits, and the allowance is spent only by a free repeat.
func waive(ops []store.Op, evs []eval) {
	g, allowance := -1, -1
	for i := range ops {
		if _, ok := ops[i].Limit.(store.Guesses); ok {
			g = i
		}
		if ops[i].OnRepeat {
			allowance = i
		}
	}
	if g < 0 {
		return
	}
	if allowance >= 0 && evs[g].repeat && !evs[allowance].ok {
		evs[g].repeat, evs[g].capped = false, true
	}
	if allowance >= 0 && !evs[g].repeat {
		evs[allowance].waived = true
	}
	if !evs[g].repeat {
		return
	}
	for i := range ops {
		if ops[i].FreeOnRepeat {
			evs[i].waived = true
		}
	}
}

// spendGuesses is the entry a spent Guesses op held to l leaves: its guess
// recorded as the most recent, remembered for l.Hold.
func spendGuesses(op *store.Op, l store.Guesses, ev *eval, now int64) entry {
	m := ev.mem.record(op.Guess, now+min(micros(l.Hold), maxSpan), l.Max)
	return entry{mem: m, exp: m.last(now)}
}

// fillGuesses writes what a Guesses op found into r.
func fillGuesses(ev *eval, r *store.Result, now int64) {
	if ev.full {
		*r = store.Result{}
		return
	}
	*r = store.Result{
		Allowed:    true,
		Spent:      ev.spent,
		Repeat:     ev.repeat,
		Capped:     ev.capped,
		Count:      int64(ev.mem.n),
		ResetAfter: duration(ev.mem.last(now) - now),
	}
}
