package redisagg

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/shadow"
)

// Shadow is a shadow.Shared on Redis: one hash per rule definition,
// ShadowKey(def), holding each instance's tally of it under the instance's
// id. A write is one pipelined round trip of HSET and PEXPIRE per
// definition that changed; a read, one of HGETALL per definition. It holds
// no state and is safe for concurrent use.
type Shadow struct {
	c redis.UniversalClient
}

var _ shadow.Shared = (*Shadow)(nil)

// NewShadow returns a Shadow on c, which the caller keeps and closes.
func NewShadow(c redis.UniversalClient) *Shadow { return &Shadow{c: c} }

// ShadowKey returns the key of the tallies of the rule definition def
// (rules.Rule.Hash). Every definition is under the hash tag {shadow}.
func ShadowKey(def string) string { return "guardian:v1:{shadow}:" + def }

// storedTally is a shadow.Tally as the store keeps it. Top keys are hashed
// subjects, never identifiers in clear.
type storedTally struct {
	Since     time.Time `json:"since"`
	Evaluated uint64    `json:"evaluated"`
	Slow      uint64    `json:"slow"`
	Block     uint64    `json:"block"`
	Challenge uint64    `json:"challenge"`
	// Top is the hits of each top key.
	Top map[string]uint64 `json:"top"`
}

// Put writes tallies, each under its definition's key and its instance,
// and keeps each key for keep after this write.
func (s *Shadow) Put(ctx context.Context, tallies []shadow.Tally, keep time.Duration) error {
	if len(tallies) == 0 {
		return nil
	}
	if keep < time.Millisecond {
		return fmt.Errorf("%w: keep %v: want at least 1ms", ErrBadBatch, keep)
	}
	vals := make([][]byte, len(tallies))
	for i, t := range tallies {
		if t.Instance == "" || t.Def == "" {
			return fmt.Errorf("%w: a tally without an instance or a definition", ErrBadBatch)
		}
		st := storedTally{Since: t.Since, Evaluated: t.Evaluated, Slow: t.Slow, Block: t.Block, Challenge: t.Challenge, Top: make(map[string]uint64, len(t.Top))}
		for _, k := range t.Top {
			st.Top[k.Key] = k.Hits
		}
		b, err := json.Marshal(st)
		if err != nil {
			return fmt.Errorf("redisagg: shadow tally: %w", err)
		}
		vals[i] = b
	}
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, t := range tallies {
			k := ShadowKey(t.Def)
			p.HSet(ctx, k, t.Instance, vals[i])
			p.PExpire(ctx, k, keep)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redisagg: shadow tallies: %w", err)
	}
	return nil
}

// Get returns every instance's tallies of defs; a tally it cannot read is
// left out.
func (s *Shadow) Get(ctx context.Context, defs []string) ([]shadow.Tally, error) {
	cmds := make([]*redis.MapStringStringCmd, len(defs))
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, def := range defs {
			cmds[i] = p.HGetAll(ctx, ShadowKey(def))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisagg: shadow tallies: %w", err)
	}
	var out []shadow.Tally
	for i, def := range defs {
		for inst, raw := range cmds[i].Val() {
			t, err := parseTally(raw)
			if err != nil {
				// One instance's unreadable tally (another version's
				// format, a damaged field) costs only its own counts,
				// never the whole fleet's view.
				continue
			}
			t.Instance, t.Def = inst, def
			out = append(out, t)
		}
	}
	return out, nil
}

// parseTally reads one stored tally; its top keys come in no order.
func parseTally(raw string) (shadow.Tally, error) {
	var st storedTally
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return shadow.Tally{}, err
	}
	t := shadow.Tally{Since: st.Since, Evaluated: st.Evaluated, Slow: st.Slow, Block: st.Block, Challenge: st.Challenge, Top: make([]shadow.KeyCount, 0, len(st.Top))}
	for k, n := range st.Top {
		t.Top = append(t.Top, shadow.KeyCount{Key: k, Hits: n})
	}
	return t, nil
}
