package redisstore

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// maxSpan caps every span and count handed to the scripts, 2^50 µs (about
// 35 years), far beyond any real limit. Lua numbers are doubles, exact up to
// 2^53: the time since the epoch (about 2^50.7 µs) plus two capped spans
// stays exact. A larger interval, burst, cost, limit or hold saturates: it
// denies, or holds, as long as any guardian rule could ask.
const maxSpan = 1 << 50

// The scripts' string arguments, boxed once: an interface holding a string
// variable costs an allocation each time it is made.
var (
	argDo, argPeek, argOnce any = "do", "peek", "once"
	// A Guesses op's code: it never denies its batch.
	argGuesses any = "gs"
	// An op's code, indexed by opCode: its kind, role and condition.
	opCodes     = makeOpCodes()
	argZero any = int64(0)
	// The give-back entries: microseconds off a rate key, units off a
	// counter, keep a counter longer, forget, put on a familiar list,
	// forget one guess, keep one guess longer.
	argGiveBack, argUncount, argConfirm, argForget, argAddFamiliar, argForgetGuess, argConfirmGuess any = "r", "c", "k", "x", "f", "g", "G"
	// Take a member's units off a counter (store.Lift); put a member in a
	// distinct key (store.Add), keep a distinct key's sub-windows
	// (store.ConfirmDistinct), and a distinct key's sub-windows after
	// either.
	argLift, argAddDistinct, argConfirmDistinct, argSubWindow any = "l", "d", "D", "-"
	// Forget a counter (store.Reset): a key that holds a rate's or a
	// distinct index's state, another rule's, stays.
	argReset any = "X"
)

// The op codes' letters: by kind (kindOf), by store.Role, by store.When.
var (
	kindLetters = [...]string{kindRate: "r", kindCounter: "c", kindAttributed: "a", kindFamiliar: "f", kindDistinct: "d", kindExcept: "x"}
	roleLetters = [...]string{store.Enforce: "e", store.Toll: "t", store.Soft: "s", store.Shadow: "h"}
	whenLetters = [...]string{store.Always: "", store.IfFamiliar: "+", store.IfUnfamiliar: "-"}
)

// The kinds of limit an op code names. A Guesses op has a code of its own
// (argGuesses).
const (
	kindRate = iota
	kindCounter
	kindAttributed
	kindFamiliar
	kindDistinct
	kindExcept
)

// kindOf is the op code kind of op's limit, and false for a Guesses op.
func kindOf(op *store.Op) (int, bool) {
	switch op.Limit.(type) {
	case store.Rate:
		return kindRate, true
	case store.Counter:
		if op.Member != "" {
			return kindAttributed, true
		}
		return kindCounter, true
	case store.Familiar:
		return kindFamiliar, true
	case store.Distinct:
		if op.Except != "" {
			return kindExcept, true
		}
		return kindDistinct, true
	}
	return 0, false
}

// makeOpCodes boxes every op code the do script takes.
func makeOpCodes() (c [len(kindLetters)][len(roleLetters)][len(whenLetters)]any) {
	for k, kl := range kindLetters {
		for r, rl := range roleLetters {
			for w, wl := range whenLetters {
				c[k][r][w] = kl + rl + wl
			}
		}
	}
	return c
}

// opCode is the do script's code of op, which is not a Guesses op.
func opCode(op *store.Op) any {
	k, _ := kindOf(op)
	return opCodes[k][op.Role][op.When]
}

// doArgsPerOp is how many ARGV the do script takes per op (a distinct op
// two more, its member and hold, an attributed counter one, its member),
// and doArgsPerBatch per batch besides.
const doArgsPerOp, doArgsPerBatch = 4, 2

// giveback is one entry of the give-back step: how is argGiveBack,
// argUncount, argConfirm, argForget, argAddFamiliar, argForgetGuess,
// argConfirmGuess, argLift, argAddDistinct, argConfirmDistinct,
// argSubWindow or argReset, amount its microseconds or units; spec, when
// set, what the entry carries instead: argConfirm's "span:max", argLift's
// member, argUncount's "units:member" for an attributed counter,
// argAddFamiliar's "hold:member", argForgetGuess's guess,
// argConfirmGuess's "guess:span", argAddDistinct's "step:member".
type giveback struct {
	key    string
	how    any
	amount int64
	spec   string
}

// settlementEntries converts settlements to give-back entries.
func settlementEntries(settlements []store.Settlement) ([]giveback, error) {
	if err := store.ValidateSettlements(settlements); err != nil {
		return nil, err
	}
	entries := make([]giveback, 0, len(settlements))
	for _, st := range settlements {
		e := giveback{key: st.Key, how: argForget}
		switch {
		case st.Action == store.GiveBack:
			// Rounded up as the spend's interval was: cost × T rounded up
			// is never more than cost × (T rounded up).
			e.how, e.amount = argGiveBack, micros(st.Span)
		case st.Action == store.Reset:
			e.how = argReset
		case st.Action == store.Learn:
			e.how, e.spec = argAddFamiliar, strconv.FormatInt(micros(st.Span), 10)+":"+st.Member
		case st.Action == store.Lift:
			e.how, e.spec = argLift, st.Member
		case st.Action == store.Add:
			e.how, e.spec = argAddDistinct, strconv.FormatInt(micros(st.Span), 10)+":"+st.Member
			entries = withSubWindows(entries, e)
			continue
		case st.Action == store.ConfirmDistinct:
			e.how, e.amount = argConfirmDistinct, micros(st.Span)
			entries = withSubWindows(entries, e)
			continue
		case st.Action == store.Confirm && st.Guess == 0:
			e.how, e.spec = argConfirm, strconv.FormatInt(micros(st.Span), 10)+":"+strconv.FormatInt(st.Max, 10)
		case st.Action == store.Confirm:
			e.how, e.spec = argConfirmGuess, guessText(st.Guess)+":"+strconv.FormatInt(micros(st.Span), 10)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// withSubWindows appends e, an entry on a distinct key, and the entries of
// its sub-windows' keys after it.
func withSubWindows(entries []giveback, e giveback) []giveback {
	entries = append(entries, e)
	for j := range store.DistinctSlots {
		entries = append(entries, giveback{key: distinctSlotKey(e.key, j), how: argSubWindow})
	}
	return entries
}

// appendGiveback appends the key of each entry to keys and its how and
// amount to args, as the give-back and once scripts take them.
func appendGiveback(keys []string, args []any, entries []giveback) ([]string, []any) {
	for _, e := range entries {
		keys = append(keys, e.key)
		if e.spec != "" {
			args = append(args, e.how, e.spec)
			continue
		}
		args = append(args, e.how, e.amount)
	}
	return keys, args
}

// appendMark appends a report's mark as a batch of the do script ("once"):
// the mark's key and its entries' to keys, its ttl (microseconds) and its
// entries to args.
func appendMark(keys []string, args []any, mark string, ttl int64, entries []giveback) ([]string, []any) {
	keys = append(keys, mark)
	args = append(args, argOnce, int64(len(entries)), ttl)
	return appendGiveback(keys, args, entries)
}

// encodeOps builds the do script's KEYS and ARGV for one batch of ops.
func encodeOps(mode string, now any, ops []store.Op) ([]string, []any) {
	args := make([]any, 0, 2+doArgsPerBatch+doArgsPerOp*len(ops))
	return appendOps(make([]string, 0, len(ops)), appendDoHeader(args, now, 1), mode, ops)
}

// appendDoHeader appends the do script's first arguments to args: the time
// and how many batches the call carries.
func appendDoHeader(args []any, now any, batches int) []any {
	return append(args, now, int64(batches))
}

// appendOps appends one batch of the do script, the keys of ops to keys and
// their arguments to args.
func appendOps(keys []string, args []any, mode string, ops []store.Op) ([]string, []any) {
	m := argDo
	if mode != "do" {
		m = argPeek
	}
	args = append(args, m, int64(len(ops)))
	b := boxes{ops: len(ops)}
	for i := range ops {
		op := &ops[i]
		keys = append(keys, op.Key)
		switch l := op.Limit.(type) {
		case store.Guesses:
			args = appendGuessOp(args, &b, op, ops)
		case store.Familiar:
			args = append(args, opCode(op), argZero, b.str(op.Member), argZero)
		case store.Distinct:
			keys = appendSubKeys(keys, op.Key, true)
			if op.Except != "" {
				keys = appendSubKeys(append(keys, op.Except), op.Except, false)
			}
			args = append(args, opCode(op), b.num(op.Cost), b.num(micros(l.Step)), b.num(min(l.Max, maxSpan)), b.str(op.Member), b.num(micros(l.Hold)))
		case store.Counter:
			p := paramsOf(op)
			args = append(args, opCode(op), b.num(p.cost), b.num(p.limit), b.num(p.hold))
			if op.Member != "" {
				args = append(args, b.str(op.Member))
			}
		default:
			p := paramsOf(op)
			args = append(args, opCode(op), b.num(p.cost), b.num(p.interval), b.num(p.burst))
		}
	}
	return keys, args
}

// boxes holds one batch's script arguments that an any could not hold
// without an allocation each, numbers above 255 and strings: each goes
// into the arguments as a pointer into one array of its kind, made when
// the batch first needs it, with room for two numbers and one string an
// op (a login check's ops have fewer). The client writes what a pointer
// points to.
type boxes struct {
	ops  int
	nums []int64
	strs []string
}

// num returns v as a script argument.
func (b *boxes) num(v int64) any {
	if v >= 0 && v < 256 {
		// Go boxes these without an allocation.
		return v
	}
	if b.nums == nil {
		b.nums = make([]int64, 0, 2*b.ops)
	}
	// An append past capacity moves later numbers to a new array; those
	// boxed before keep pointing into the old one, unchanged.
	b.nums = append(b.nums, v)
	return &b.nums[len(b.nums)-1]
}

// str returns s as a script argument.
func (b *boxes) str(s string) any {
	if b.strs == nil {
		b.strs = make([]string, 0, b.ops)
	}
	b.strs = append(b.strs, s)
	return &b.strs[len(b.strs)-1]
}

// distinctSlotKey is the key of sub-window j of the Distinct key k: k with
// a suffix, so in k's slot.
func distinctSlotKey(k string, j int) string {
	return k + ":" + strconv.Itoa(j)
}

// distinctCountKey is the key that remembers a busy Distinct key k's count
// for a second (distinct.lua), in k's slot.
func distinctCountKey(k string) string {
	return k + ":n"
}

// A sub-window's suffix is one digit (appendSubKeys).
const _ = uint(9 - store.DistinctSlots)

// appendSubKeys appends the keys of the Distinct key k's sub-windows
// (distinctSlotKey) to keys and, with count, its count key
// (distinctCountKey). They are slices of one string: a distinct op's six
// keys cost one allocation, not six.
func appendSubKeys(keys []string, k string, count bool) []string {
	n, w := store.DistinctSlots, len(k)+2
	if count {
		n++
	}
	var b strings.Builder
	b.Grow(n * w)
	for j := range store.DistinctSlots {
		b.WriteString(k)
		b.WriteByte(':')
		b.WriteByte(byte('0' + j))
	}
	if count {
		b.WriteString(k)
		b.WriteString(":n")
	}
	all := b.String()
	for j := range n {
		keys = append(keys, all[j*w:(j+1)*w])
	}
	return keys
}

// batch is the KEYS and ARGV of one script call, reused through batches:
// the client copies both into its command, so they are free again once the
// call returns.
type batch struct {
	keys []string
	args []any
}

var batches = sync.Pool{New: func() any { return &batch{} }}

// maxPooledOps bounds the batches kept for reuse.
const maxPooledOps = 64

// release clears b, so that it holds no key, and returns it to the pool.
func (b *batch) release() {
	if cap(b.keys) > maxPooledOps {
		return
	}
	clear(b.keys)
	clear(b.args)
	b.keys, b.args = b.keys[:0], b.args[:0]
	batches.Put(b)
}

// params are an op's numbers as the do script takes them: whole
// microseconds, capped at maxSpan.
type params struct {
	cost, interval, burst, limit, hold int64
}

// paramsOf converts op for the do script. An interval or hold that is not a
// whole number of microseconds counts as the next one, so a limit is never
// looser than configured; spans saturate at maxSpan, and a cost that could
// never fit stays one that never fits.
func paramsOf(op *store.Op) params {
	switch l := op.Limit.(type) {
	case store.Rate:
		t := micros(l.Interval)
		return params{
			cost:     min(op.Cost, maxSpan/t+1),
			interval: t,
			burst:    min(l.Burst, maxSpan/t),
		}
	case store.Counter:
		return params{cost: min(op.Cost, maxSpan+1), limit: min(l.Max, maxSpan), hold: micros(l.Hold)}
	case store.Guesses:
		return params{cost: min(op.Cost, maxSpan+1), limit: min(l.Max, maxSpan), hold: micros(l.Hold)}
	}
	return params{cost: min(op.Cost, maxSpan+1)}
}

// micros converts a positive duration to whole microseconds, rounding up,
// capped at maxSpan.
func micros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond != 0 {
		us++
	}
	return min(us, maxSpan)
}
