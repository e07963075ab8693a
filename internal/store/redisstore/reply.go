package redisstore

import (
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/store"
)

// replyWidth is how many integers the do script replies per op: allowed,
// spent, remaining, retry after (µs), reset after (µs), count.
const replyWidth = 6

// errBadState reports a batch the do script could not read: a key of the
// batch held a value that is not guardian's state. The batch spent nothing.
var errBadState = fmt.Errorf("%w: a key holds something other than guardian's state", ErrBadReply)

// parseResults reads the do script's reply to a call of one batch into res.
func parseResults(reply any, res []store.Result) error {
	vals, err := replyInts(reply, replyWidth*len(res))
	if err != nil {
		return err
	}
	return parseBatch(vals, res)
}

// replyInts checks that the do script's reply is an array of want values,
// and returns it.
func replyInts(reply any, want int) ([]any, error) {
	vals, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: want an array, got %T", ErrBadReply, reply)
	}
	if len(vals) != want {
		return nil, fmt.Errorf("%w: want %d integers, got %d", ErrBadReply, want, len(vals))
	}
	return vals, nil
}

// parseMark reads a mark's reply, the once script's or a "once" batch's
// part of the do script's: whether the call set the mark. -1, an entry
// that could not be applied, is errBadState.
func parseMark(v any) (bool, error) {
	switch v {
	case int64(1):
		return true, nil
	case int64(0):
		return false, nil
	case int64(-1):
		return false, errBadState
	}
	return false, fmt.Errorf("%w: a mark's reply: want 0 or 1, got %v", ErrBadReply, v)
}

// parseBatch reads one batch's part of the do script's reply into res, one
// op per replyWidth integers. Anything else (another type, a flag that is
// not 0 or 1, a spend that was not allowed, a negative value) is
// ErrBadReply; a batch of -1s is errBadState.
func parseBatch(vals []any, res []store.Result) error {
	if len(res) > 0 && vals[0] == int64(-1) {
		return errBadState
	}
	var ints [replyWidth]int64
	for i := range res {
		for j := range ints {
			v, ok := vals[i*replyWidth+j].(int64)
			if !ok {
				return fmt.Errorf("%w: op %d field %d: want an integer, got %T",
					ErrBadReply, i, j, vals[i*replyWidth+j])
			}
			if v < 0 {
				return fmt.Errorf("%w: op %d field %d: negative %d", ErrBadReply, i, j, v)
			}
			ints[j] = v
		}
		allowed, spent := ints[0], ints[1]
		if allowed > 1 || spent > 1 || spent > allowed {
			return fmt.Errorf("%w: op %d: allowed %d, spent %d", ErrBadReply, i, allowed, spent)
		}
		if ints[3] > 4*maxSpan || ints[4] > 4*maxSpan {
			return fmt.Errorf("%w: op %d: retry after %dµs, reset after %dµs",
				ErrBadReply, i, ints[3], ints[4])
		}
		res[i] = store.Result{
			Allowed:    allowed == 1,
			Spent:      spent == 1,
			Remaining:  ints[2],
			RetryAfter: time.Duration(ints[3]) * time.Microsecond,
			ResetAfter: time.Duration(ints[4]) * time.Microsecond,
			Count:      ints[5],
		}
	}
	return nil
}
