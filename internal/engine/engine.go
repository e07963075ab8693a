// Package engine turns a check into a decision: the rules of its flow become
// one batch of store ops, evaluated in one store call, and the results become
// allow, challenge, slow or block with the limits and headers the contract
// describes. It knows nothing of HTTP; package httpapi maps its results and
// errors onto the wire.
//
// The engine is generic: a rule is a key, an algorithm and an action,
// whatever its flow. What is specific to a flow lives in its own package and
// the engine asks it: package loginlimits for accounts, trusted devices,
// what a success gives back, and an account's status and reset; package otp
// for recipients and for what an OTP send settles.
package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/loginlimits"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/otp"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// Errors the engine returns for a request it cannot decide. Each is mapped to
// one error code by package httpapi.
var (
	// ErrMissingField reports a field the check's flow requires.
	ErrMissingField = errors.New("engine: missing field")
	// ErrInvalidField reports a field with a value out of range.
	ErrInvalidField = errors.New("engine: invalid field")
	// ErrAlreadyReported reports an attempt id that was reported before.
	ErrAlreadyReported = errors.New("engine: attempt already reported")
)

// MaxCost is the largest cost one check may spend.
const MaxCost = 1000

// fits refuses a cost that an enforced rate rule r could never allow: more
// than its burst, which no wait makes room for. Shadow rules do not refuse
// a check.
func fits(r *rules.Rule, cost int64) error {
	if r.Type == rules.Rate && r.Mode == rules.Enforce && cost > r.Burst {
		return fmt.Errorf("%w: cost: %d is more than the burst of rule %s (%d), so no wait would let it through", ErrInvalidField, cost, r.Name, r.Burst)
	}
	return nil
}

// Config holds what an Engine is built from. Every field but Normalizer
// and Now is required.
type Config struct {
	// Rules holds the rule set in force; a reload swaps it.
	Rules *rules.Holder
	// Store is the security store (with its fallback, if any).
	Store store.Store
	// Hasher turns accounts, addresses and recipients into subjects.
	Hasher *keys.Hasher
	// Normalizer normalises accounts and recipients before hashing
	// (optional; nil: the defaults).
	Normalizer *keys.Normalizer
	// Attempts seals and opens attempt ids.
	Attempts *tokens.Attempts
	// Devices issues and verifies trusted-device tokens.
	Devices *tokens.Devices
	// Aggregate is the global failure rate for failure_rate rules.
	Aggregate *aggregate.Aggregate
	// Shadow records what shadow rules would have decided.
	Shadow *shadow.Book
	// Metrics receives decisions, rule trips and durations.
	Metrics *metrics.Metrics
	// Now is the engine's clock for attempt ids and device tokens
	// (default time.Now). Limits run on the store's own clock.
	Now func() time.Time
}

// Engine decides checks and records reports. It is safe for concurrent use.
type Engine struct {
	rules     *rules.Holder
	store     store.Store
	hasher    *keys.Hasher
	attempts  *tokens.Attempts
	login     *loginlimits.Policy
	otp       *otp.Policy
	aggregate *aggregate.Aggregate
	shadow    *shadow.Book
	metrics   *metrics.Metrics
	now       func() time.Time
}

// New returns an Engine built from cfg.
func New(cfg Config) *Engine {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Engine{
		rules:     cfg.Rules,
		store:     cfg.Store,
		hasher:    cfg.Hasher,
		attempts:  cfg.Attempts,
		login:     loginlimits.New(cfg.Hasher, cfg.Devices, cfg.Normalizer),
		otp:       otp.New(cfg.Hasher, cfg.Normalizer),
		aggregate: cfg.Aggregate,
		shadow:    cfg.Shadow,
		metrics:   cfg.Metrics,
		now:       now,
	}
}

// Rules returns the rule set checks are decided by now.
func (e *Engine) Rules() *rules.Set { return e.rules.Load() }
