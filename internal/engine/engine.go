// Package engine turns a check into a decision: the rules of its flow become
// one batch of store ops, evaluated in one store call, and the results become
// allow, challenge, slow or block with the limits and headers api/openapi.yaml
// describes. It knows nothing of HTTP; package httpapi maps its results and
// errors onto the wire.
//
// The engine is generic: a rule is a key, an algorithm and an action,
// whatever its flow. A check is one plan (package plan), made by one
// builder (build) from the rules in force and the check's subjects: an
// entry per rule with its op and, beside it, what a report settles. What
// is specific to a flow lives in its own package and adds to the plan:
// package loginlimits an account's buckets (trusted devices, challenges,
// familiar networks) and what a report settles; package otp says which
// flows settle at all and which need a recipient. Which key a rule counts a
// check by is worked out in one place, Identifiers.Key. A report rebuilds
// its check's plan, by the rules that decided it (a history of rule sets,
// by hash), from what its attempt id sealed.
package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/loginlimits"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// Errors the engine returns for a request it cannot decide. Each is mapped to
// one error code by package httpapi. A check of a flow guardian does not
// know is rules.ErrUnknownFlow.
var (
	// ErrMissingField reports a field the check's flow requires.
	ErrMissingField = errors.New("engine: missing field")
	// ErrInvalidField reports a field with a value out of range.
	ErrInvalidField = errors.New("engine: invalid field")
	// ErrAlreadyReported reports an attempt id that was reported before.
	ErrAlreadyReported = errors.New("engine: attempt already reported")
	// ErrOtherTenant reports an attempt id of a check of another tenant
	// than the report's: a tenant settles only its own checks.
	ErrOtherTenant = errors.New("engine: attempt of another tenant")
)

// fits refuses a cost that an enforced rate rule r could never allow: more
// than its burst, which no wait makes room for. Shadow rules do not refuse
// a check.
func fits(r *rules.Rule, cost int64) error {
	if r.Type == rules.Rate && r.Mode == rules.Enforce && cost > r.Burst {
		return fmt.Errorf("%w: cost: %d is more than the burst of rule %s (%d), so no wait would let it through", ErrInvalidField, cost, r.Name, r.Burst)
	}
	return nil
}

// Config holds what an Engine is built from. Rules, Store and Key are
// required; every other field has a default.
type Config struct {
	// Rules holds the rule set in force; a reload swaps it.
	Rules *rules.Holder
	// Store is the security store (with its fallback, if any).
	Store store.Store
	// Key is the signing key: attempt ids and device tokens are keyed
	// from it (package tokens).
	Key secret.Key
	// PreviousKeys are signing keys being rotated out: attempt ids and
	// device tokens they signed still open.
	PreviousKeys []secret.Key
	// Keys, when set, are the signing keys in force, which a rotation
	// swaps without a restart; Key and PreviousKeys then only default
	// HashKey.
	Keys *tokens.Keys
	// HashKey keys the subjects accounts, addresses and recipients hash to
	// (package keys), and the guesses of secret fingerprints; default Key.
	HashKey secret.Key
	// Hasher hashes those subjects: the instance's one Hasher of HashKey,
	// shared with what names the same accounts (the audit trail, the
	// decision log). Nil: one of the engine's own, keyed from HashKey.
	Hasher *keys.Hasher
	// Normalizer normalises accounts and recipients before they are hashed
	// (CheckRequest.Normalise); nil: the defaults.
	Normalizer *keys.Normalizer
	// AttemptTTL is how long an attempt id can be reported (default
	// tokens.AttemptTTL); a check never reported by then counts as a failure.
	AttemptTTL time.Duration
	// Aggregate is the global failure rate for failure_rate rules; default
	// one of the engine's own on Now, never shared with other instances.
	Aggregate *aggregate.Aggregate
	// Shadow records what shadow rules would have decided; default a new
	// Book tallying the shadow rules Rules holds at New.
	Shadow *shadow.Book
	// Metrics receives decisions, rule trips and durations; default a set
	// on a registry of its own.
	Metrics *metrics.Metrics
	// Now is the engine's clock for attempt ids and device tokens
	// (default time.Now). Limits run on the store's own clock.
	Now func() time.Time
	// TenantMetrics names the tenants whose checks
	// guardian_tenant_decisions_total counts under their own name; the
	// checks of every other tenant count as metrics.OtherTenants, so the
	// label stays bounded by this list.
	TenantMetrics []string
	// Events, when set, hears accounts enter and leave a hard stop.
	Events Events
	// Tally, when set, hears every decision, every enforced rule that
	// stopped a check and every failure_rate rule's state (package
	// incident); nil: nothing does.
	Tally Tally
	// Lists, when set, are the deny and allow lists every check is
	// matched against before its plan is built (lists.go).
	Lists Lists
	// Logger receives what the engine logs: a report it could not settle
	// (default slog.Default()).
	Logger *slog.Logger
}

// Events hears the lifecycle of accounts' hard stops. account is the
// account's subject (a keyed hash), never the account in clear, and tenant
// the account's tenant, "" for the default tenant. Calls come from the
// request that caused them and must not block.
type Events interface {
	// HardStopStarted: a failure report took the account's blocking
	// consecutive-failure count to its limit.
	HardStopStarted(tenant, account string)
	// HardStopEnded: a reset lifted the account's block.
	HardStopEnded(tenant, account string)
}

// Tally hears what enforced rules decide, for the incident view. Calls
// come from the check's own path and must not block. *incident.Book
// implements it.
type Tally interface {
	// Decided: a check was decided with decision, by rule ("" on allow).
	Decided(decision rules.Action, rule string)
	// Tripped: the enforced rule stopped a check with decision; subject
	// is the hashed key it counted the check by.
	Tripped(rule string, decision rules.Action, subject string)
	// Global: a check found the enforced failure_rate rule in force, or
	// not.
	Global(rule string, inForce bool)
}

// noTally is the Tally of an engine without one.
type noTally struct{}

func (noTally) Decided(rules.Action, string)         {}
func (noTally) Tripped(string, rules.Action, string) {}
func (noTally) Global(string, bool)                  {}

// Engine decides checks and records reports. It is safe for concurrent use.
type Engine struct {
	rules     *rules.Holder
	store     store.Store
	hasher    *keys.Hasher
	guesser   *keys.Guesser
	norm      *keys.Normalizer
	attempts  *tokens.Attempts
	login     *loginlimits.Policy
	aggregate *aggregate.Aggregate
	shadow    *shadow.Book
	metrics   *metrics.Metrics
	now       func() time.Time
	events    Events
	tally     Tally
	lists     Lists
	log       *slog.Logger
	history   *history
	// tenants are the tenants counted under their own name
	// (Config.TenantMetrics).
	tenants map[string]bool
	// guesses is the limit of every account's memory of guesses, boxed
	// once.
	guesses store.Limit
}

// New returns an Engine built from cfg: the one way to build one.
func New(cfg Config) *Engine {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	hashKey := cfg.HashKey
	if hashKey.IsZero() {
		hashKey = cfg.Key
	}
	signing := cfg.Keys
	if signing == nil {
		signing = tokens.NewKeys(cfg.Key, cfg.PreviousKeys...)
	}
	e := &Engine{
		rules:     cfg.Rules,
		store:     cfg.Store,
		hasher:    cfg.Hasher,
		guesser:   keys.NewGuesser(hashKey),
		norm:      cfg.Normalizer,
		attempts:  signing.Attempts().WithTTL(cfg.AttemptTTL),
		aggregate: cfg.Aggregate,
		shadow:    cfg.Shadow,
		metrics:   cfg.Metrics,
		now:       now,
		events:    cfg.Events,
		tally:     cfg.Tally,
		lists:     cfg.Lists,
		log:       cfg.Logger,
	}
	if e.tally == nil {
		e.tally = noTally{}
	}
	// What only unreported checks counted is kept for twice the attempt
	// TTL at most; a failure report confirms it for longer.
	hold := 2 * e.attempts.TTL()
	e.history = newHistory(e.attempts.OnceTTL(), hold)
	e.guesses = store.Guesses{Max: rememberedGuesses, Hold: min(guessHold, hold)}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.tenants = make(map[string]bool, len(cfg.TenantMetrics))
	for _, t := range cfg.TenantMetrics {
		e.tenants[t] = true
	}
	if e.hasher == nil {
		e.hasher = keys.NewHasher(hashKey)
	}
	e.login = loginlimits.New(e.hasher, signing.Devices(0))
	if e.aggregate == nil {
		e.aggregate = aggregate.New(aggregate.Config{Now: now})
	}
	if e.shadow == nil {
		e.shadow = shadow.NewBook()
		e.shadow.Sync(cfg.Rules.Load().ShadowNames())
	}
	if e.metrics == nil {
		e.metrics = metrics.New(prometheus.NewRegistry())
	}
	return e
}

// Rules returns the rule set checks are decided by now.
func (e *Engine) Rules() *rules.Set { return e.rules.Load() }

// ruleSet returns the rule set in force at now as checks use it, keeping it
// in the engine's history for the reports of its checks.
func (e *Engine) ruleSet(now time.Time) *ruleSet { return e.history.current(e.rules.Load(), now) }
