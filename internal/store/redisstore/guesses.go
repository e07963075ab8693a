package redisstore

import (
	"strconv"
	"strings"

	"github.com/guardian-sec/guardian/internal/store"
)

// guessText is a guess as the scripts hold it: 16 lower-case hex digits.
func guessText(g uint64) string {
	const digits = 16
	s := strconv.FormatUint(g, 16)
	return strings.Repeat("0", digits-len(s)) + s
}

// appendGuessOp appends the do script's arguments for the Guesses op op of
// the batch ops: its code, its cost, its guess as the first number, and as
// the second "limit:hold:" then the 1-based indexes, within the batch, of
// the FreeOnRepeat ops a repeat of the guess does not spend,
// comma-separated, and ":" and the index of its allowance of free repeats
// (store.Op.OnRepeat), 0 for none.
func appendGuessOp(args []any, b *boxes, op *store.Op, ops []store.Op) []any {
	p := paramsOf(op)
	var y strings.Builder
	y.WriteString(strconv.FormatInt(p.limit, 10))
	y.WriteByte(':')
	y.WriteString(strconv.FormatInt(p.hold, 10))
	y.WriteByte(':')
	sep, allowance := "", 0
	for j := range ops {
		if ops[j].FreeOnRepeat {
			y.WriteString(sep)
			y.WriteString(strconv.Itoa(j + 1))
			sep = ","
		}
		if ops[j].OnRepeat {
			allowance = j + 1
		}
	}
	y.WriteByte(':')
	y.WriteString(strconv.Itoa(allowance))
	return append(args, argGuesses, b.num(p.cost), b.str(guessText(op.Guess)), b.str(y.String()))
}

// readGuesses turns what the do script replied for each Guesses op of ops
// into its Result: a remaining of 1 is a remembered guess, free; 2 one
// the allowance of free repeats capped.
func readGuesses(ops []store.Op, res []store.Result) {
	for i := range ops {
		if _, ok := ops[i].Limit.(store.Guesses); ok {
			res[i].Repeat, res[i].Capped = res[i].Remaining == 1, res[i].Remaining == 2
			res[i].Remaining = 0
		}
	}
}

// slotGiveback is what a batch spread over cluster slots gives back of op,
// which r says was spent, and whether it gives back anything. A batch that
// some enforced op denied gives back its enforced ops, and forgets the
// guess its Guesses op recorded (a guess it only found stays remembered:
// an earlier check made it). A batch whose guess was remembered gives back
// the FreeOnRepeat ops that slots other than the guess's own spent, so
// that a repeat costs them nothing, as in one script. Tolls stay paid
// unless a toll denied (tollDenied); a member added to a HyperLogLog
// cannot be taken out, so a Distinct op stays counted, the strict side.
func slotGiveback(op *store.Op, r *store.Result, denied, tollDenied, repeat bool) (giveback, bool) {
	_, distinct := op.Limit.(store.Distinct)
	if !r.Spent || distinct {
		return giveback{}, false
	}
	_, guesses := op.Limit.(store.Guesses)
	switch {
	case repeat && op.FreeOnRepeat:
	case !denied || op.Role == store.Shadow || op.Role == store.Toll && !tollDenied:
		return giveback{}, false
	case guesses:
		if r.Repeat {
			return giveback{}, false
		}
		return giveback{key: op.Key, how: argForgetGuess, spec: guessText(op.Guess)}, true
	}
	p := paramsOf(op)
	if _, rate := op.Limit.(store.Rate); rate {
		return giveback{key: op.Key, how: argGiveBack, amount: p.cost * p.interval}, true
	}
	if op.Member != "" {
		return giveback{key: op.Key, how: argUncount, spec: strconv.FormatInt(p.cost, 10) + ":" + op.Member}, true
	}
	return giveback{key: op.Key, how: argUncount, amount: p.cost}, true
}
