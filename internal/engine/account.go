package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/loginlimits"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
)

// AccountStatus is where an account stands on its enforced account rules.
type AccountStatus struct {
	// ConsecutiveFailures is the highest consecutive-failure count.
	ConsecutiveFailures int64
	// Blocked reports that a blocking rule would block an untrusted check
	// now; for the hard stop, until a reset.
	Blocked bool
	// NextAllowed is how long until the account's slowing rules would let
	// an untrusted check through; zero when they would now.
	NextAllowed time.Duration
	// Limits are the account's enforced rate and consecutive-failure rules,
	// in file order, as a check would find them.
	Limits []Limit
	// RememberedGuesses is how many failed guesses the account
	// remembers (guess.go): a check repeating one of them spends nothing
	// on the account's rules.
	RememberedGuesses int64
	// Networks are the account's familiar networks, each as an untrusted
	// check from there would find its buckets; none when the rules learn
	// no networks.
	Networks []NetworkStatus
}

// NetworkStatus is where an account stands on its enforced account rules
// for checks from one of its familiar networks without a device.
type NetworkStatus struct {
	// Network is the network's pseudonym (keys.PseudonymNetwork).
	Network string
	// ConsecutiveFailures is the highest consecutive-failure count of the
	// network's buckets.
	ConsecutiveFailures int64
	// Blocked reports that a blocking rule would block a check from the
	// network without a device: past its hard stop, until a reset.
	Blocked bool
}

// Status reports where account stands, without spending anything: the rules
// loginlimits.StatusRules names, evaluated on the account's own subject at
// cost 1. An account guardian never saw answers zeros, exactly like one that
// exists. The account is the tenant's that ctx carries (keys.TenantOf):
// another tenant's account of the same name is another account.
func (e *Engine) Status(ctx context.Context, account string) (AccountStatus, error) {
	subject, err := e.accountSubject(ctx, account)
	if err != nil {
		return AccountStatus{}, err
	}
	rs := loginlimits.StatusRules(e.rules.Load())
	st := AccountStatus{Limits: make([]Limit, 0, len(rs))}
	hold := 2 * e.attempts.TTL()
	ops := make([]store.Op, len(rs), len(rs)+1)
	for i, r := range rs {
		ops[i] = newRuleOp(r, hold)
		ops[i].Key = keys.StoreKey(subject, r.Name)
	}
	// The memory of guesses is read with a guess of its own: only how
	// many it holds matters.
	ops = append(ops, e.guessesOp(subject, 1, 0))
	res := make([]store.Result, len(ops))
	if err := e.store.Peek(ctx, ops, res); err != nil {
		return AccountStatus{}, fmt.Errorf("engine: store: %w", err)
	}
	for i, r := range rs {
		st.Limits = append(st.Limits, Limit{Rule: r.Name, Remaining: res[i].Remaining, Reset: res[i].ResetAfter})
	}
	st.RememberedGuesses = res[len(rs)].Count
	ls := loginlimits.ReadStatus(rs, res[:len(rs)])
	st.ConsecutiveFailures, st.Blocked, st.NextAllowed = ls.ConsecutiveFailures, ls.Blocked, ls.NextAllowed
	if e.rules.Load().Familiar.On() {
		if st.Networks, err = e.networks(ctx, subject, rs, hold); err != nil {
			return AccountStatus{}, err
		}
	}
	return st, nil
}

// networks reads where the account with subject stands from each of its
// familiar networks: the buckets of its rules rs that a check from a
// familiar network counts in (loginlimits.Counts), in one Peek.
func (e *Engine) networks(ctx context.Context, subject string, rs []*rules.Rule, hold time.Duration) ([]NetworkStatus, error) {
	members, err := e.store.Familiar(ctx, loginlimits.FamiliarKey(subject))
	if err != nil {
		return nil, fmt.Errorf("engine: store: %w", err)
	}
	if len(members) == 0 {
		return nil, nil
	}
	var counted []*rules.Rule
	for _, r := range rs {
		if loginlimits.Counts(r) {
			counted = append(counted, r)
		}
	}
	ops := make([]store.Op, 0, len(members)*len(counted))
	for _, m := range members {
		for _, r := range counted {
			op := newRuleOp(r, hold)
			op.Key = loginlimits.NetworkKey(subject, r.Name, m)
			ops = append(ops, op)
		}
	}
	res := make([]store.Result, len(ops))
	if err := e.store.Peek(ctx, ops, res); err != nil {
		return nil, fmt.Errorf("engine: store: %w", err)
	}
	out := make([]NetworkStatus, len(members))
	for i, m := range members {
		ls := loginlimits.ReadStatus(counted, res[i*len(counted):(i+1)*len(counted)])
		out[i] = NetworkStatus{Network: m, ConsecutiveFailures: ls.ConsecutiveFailures, Blocked: ls.Blocked}
	}
	return out, nil
}

// Reset clears the account's hard stop and its account counters
// (loginlimits.ResetKeys), and forgets its remembered guesses, after the
// account's owner proved themselves through a verified channel. It resets
// the account of the tenant ctx carries, as Status reads it.
func (e *Engine) Reset(ctx context.Context, account string) error {
	subject, err := e.accountSubject(ctx, account)
	if err != nil {
		return err
	}
	members, err := e.store.Familiar(ctx, loginlimits.FamiliarKey(subject))
	if err != nil {
		return fmt.Errorf("engine: store: %w", err)
	}
	ks := append(loginlimits.ResetKeys(e.rules.Load(), subject, members), guessesKey(subject), repeatsKey(subject))
	// Whether the reset ends a hard stop, for Events: one more store call,
	// on an admin call.
	var blocked bool
	if e.events != nil {
		st, err := e.Status(ctx, account)
		blocked = err == nil && st.Blocked
	}
	if err := e.store.Delete(ctx, ks...); err != nil {
		return fmt.Errorf("engine: store: %w", err)
	}
	if blocked {
		e.events.HardStopEnded(keys.TenantOf(ctx), subject)
	}
	return nil
}
