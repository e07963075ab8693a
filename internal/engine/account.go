package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// AccountStatus is where an account stands on its enforced account rules.
type AccountStatus struct {
	// ConsecutiveFailures is the highest consecutive-failure count.
	ConsecutiveFailures int64
	// Blocked reports that a blocking consecutive-failure rule is at its limit.
	Blocked bool
	// NextAllowed is how long until an untrusted check of the account could
	// be allowed by its rate rules; zero when one could be now.
	NextAllowed time.Duration
	Limits      []Limit
}

// accountRules returns the enforced rate and consecutive-failure rules keyed
// by account, once each, with their ops for the account's subject.
func accountRules(set *rules.Set, subject string) ([]*rules.Rule, []store.Op) {
	var rs []*rules.Rule
	var ops []store.Op
	for i := range set.Rules {
		r := &set.Rules[i]
		if r.Key != rules.KeyAccount || r.Type == rules.FailureRate || r.Mode != rules.Enforce {
			continue
		}
		var p plan
		p.add(r, subject, 1)
		rs = append(rs, r)
		ops = append(ops, p.ops[0])
	}
	return rs, ops
}

// Status reports where account stands, without spending anything. An account
// guardian never saw answers zeros, exactly like one that exists.
func (e *Engine) Status(ctx context.Context, account string) (AccountStatus, error) {
	norm, err := keys.Account(account)
	if err != nil {
		return AccountStatus{}, err
	}
	rs, ops := accountRules(e.rules.Load(), e.hasher.Subject("account", norm))
	st := AccountStatus{Limits: []Limit{}}
	if len(ops) == 0 {
		return st, nil
	}
	res := make([]store.Result, len(ops))
	if err := e.store.Peek(ctx, ops, res); err != nil {
		return AccountStatus{}, fmt.Errorf("engine: store: %w", err)
	}
	for i, r := range rs {
		rs := &res[i]
		st.Limits = append(st.Limits, Limit{Rule: r.Name, Remaining: rs.Remaining, Reset: rs.ResetAfter})
		switch r.Type {
		case rules.ConsecutiveFailures:
			st.ConsecutiveFailures = max(st.ConsecutiveFailures, rs.Count)
			if !rs.Allowed && r.Action == rules.Block {
				st.Blocked = true
			}
		case rules.Rate:
			st.NextAllowed = max(st.NextAllowed, rs.RetryAfter)
		}
	}
	return st, nil
}

// Reset clears the account's hard stop and its account counters, after the
// account's owner proved themselves through a verified channel. Counters of
// trusted devices and of account+ip pairs are left to expire.
func (e *Engine) Reset(ctx context.Context, account string) error {
	norm, err := keys.Account(account)
	if err != nil {
		return err
	}
	subject := e.hasher.Subject("account", norm)
	set := e.rules.Load()
	var ks []string
	for i := range set.Rules {
		r := &set.Rules[i]
		if r.Key == rules.KeyAccount && r.Type != rules.FailureRate {
			ks = append(ks, keys.StoreKey(subject, r.Name))
		}
	}
	if len(ks) == 0 {
		return nil
	}
	if err := e.store.Delete(ctx, ks...); err != nil {
		return fmt.Errorf("engine: store: %w", err)
	}
	return nil
}
