// Package metrics defines guardian's Prometheus metrics, the names
// api/openapi.yaml lists under /metrics and the alerts and dashboard in
// deploy/ query. Every instance registers its own set on the registry it is
// given, so tests can run servers side by side.
// No label ever carries a user, an address or a key.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/guardian-sec/guardian/internal/version"
)

// Metrics holds guardian's collectors. Build it with New; it is safe for
// concurrent use.
type Metrics struct {
	// Decisions counts checks by flow and decision.
	Decisions *prometheus.CounterVec
	// RuleTrips counts rules that tripped on a check, by rule, mode
	// (enforce, shadow) and action.
	RuleTrips *prometheus.CounterVec
	// CheckDuration observes how long a check took, by flow.
	CheckDuration *prometheus.HistogramVec
	// StoreErrors counts failed store calls by kind (timeout, unreachable,
	// rejected, script).
	StoreErrors *prometheus.CounterVec
	// FallbackActive is 1 while the store is failing and the fallback decides.
	FallbackActive prometheus.Gauge
	// StoreMemoryRatio is the store's used memory over its maxmemory, read
	// periodically. It has no labels; its one series is absent until the
	// ratio is known (never without maxmemory, nor on the embedded store).
	StoreMemoryRatio *prometheus.GaugeVec
	// FallbackDecisions counts every op the fallback decided, by rule and
	// on_store_error.
	FallbackDecisions *prometheus.CounterVec
	// RecalledChecks counts checks answered from what the store last said
	// about their keys (a key it slowed, until its retry time), without a
	// store call.
	RecalledChecks prometheus.Counter
	// StoreAdmissionRejected counts checks the store's queue had no room
	// for, answered from the local fallback at once (admission control).
	StoreAdmissionRejected prometheus.Counter
	// GlobalFailures is the failure rate per second seen by failure_rate
	// rules, by flow.
	GlobalFailures *prometheus.GaugeVec
	// TenantDecisions counts the checks of tenants' tokens by tenant and
	// decision: a tenant named by --tenant-metrics under its name, any
	// other under OtherTenants, so the label's values are bounded by the
	// flag. The default tenant's checks are not counted here.
	TenantDecisions *prometheus.CounterVec
	// Reports counts reports by outcome.
	Reports *prometheus.CounterVec
	// UnsettledReports counts reports accepted without settling what their
	// check spent: the check was decided by rules this instance does not
	// know.
	UnsettledReports prometheus.Counter
	// FailureRateInForce is 1 while a failure_rate rule is in force (its
	// hysteresis included), by rule and mode.
	FailureRateInForce *prometheus.GaugeVec
	// RulesReloads counts reloads of the rules file, by result (ok,
	// error), whatever asked for them: the API, SIGHUP or a change of the
	// file.
	RulesReloads *prometheus.CounterVec
	// RulesInfo is 1 for the hash of the rules in force (rules.Set.Hash),
	// the only series: instances of a fleet whose series differ run
	// different rules.
	RulesInfo *prometheus.GaugeVec
	// ListMatches counts what the deny and allow lists decided, by list
	// (deny, allow) and rule: deny-list for a check a deny entry blocked,
	// the exempted rule for each rule an allow entry made a check skip.
	ListMatches *prometheus.CounterVec
	// AdminActions counts admin calls that change state, by action (reset,
	// reload, revoke, list_add, list_delete) and result (ok, error).
	AdminActions *prometheus.CounterVec
	// Rules is how many rules are in force, by mode (enforce, shadow); set
	// it with SetRuleCount.
	Rules *prometheus.GaugeVec
	// HTTPRequests counts answered HTTP requests by route (the path
	// template, "other" for a path guardian does not serve) and status code.
	HTTPRequests *prometheus.CounterVec
	// ExpiringTokens counts requests authenticated by a service token in
	// the last tenth of its life (at most its last 72 hours), by scope: a
	// caller about to lose access.
	ExpiringTokens *prometheus.CounterVec
	// SigningKeys is 1 for each signing key in force, by its id (kid, never
	// the key) and use: "sign" for the key that signs, "verify" for each
	// other key that verifies; set it with SetSigningKeys.
	SigningKeys *prometheus.GaugeVec
	// BuildInfo is 1, labelled with the running binary's version, revision
	// and Go version.
	BuildInfo *prometheus.GaugeVec
	// BreachedEntries is how many passwords the breached-password filter
	// in use holds (serve --breached), 0 without one.
	BreachedEntries prometheus.Gauge
}

// OtherTenants is the tenant label of guardian_tenant_decisions_total for
// every tenant --tenant-metrics does not name: '_' is in no tenant's name.
const OtherTenants = "_other"

// New registers guardian's metrics on reg, guardian_build_info set.
func New(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		Decisions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_decisions_total",
			Help: "Checks answered, by flow and decision.",
		}, []string{"flow", "decision"}),
		RuleTrips: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_rule_trips_total",
			Help: "Rules that tripped on a check, by rule, mode and action.",
		}, []string{"rule", "mode", "action"}),
		CheckDuration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "guardian_check_duration_seconds",
			Help:    "Time to decide a check, by flow.",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1},
		}, []string{"flow"}),
		StoreErrors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_store_errors_total",
			Help: "Store calls that failed, by kind (timeout, unreachable, rejected, script).",
		}, []string{"kind"}),
		FallbackActive: f.NewGauge(prometheus.GaugeOpts{
			Name: "guardian_fallback_active",
			Help: "1 while the store is failing and the fallback decides, else 0.",
		}),
		StoreMemoryRatio: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "guardian_store_memory_ratio",
			Help: "Redis used memory over maxmemory (highest over Cluster masters), read every few seconds; absent without maxmemory.",
		}, nil),
		FallbackDecisions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_fallback_decisions_total",
			Help: "Ops decided by the fallback, by rule and on_store_error.",
		}, []string{"rule", "on_store_error"}),
		StoreAdmissionRejected: f.NewCounter(prometheus.CounterOpts{
			Name: "guardian_store_admission_rejected_total",
			Help: "Checks the store's queue had no room for, answered from the local fallback at once instead of queueing.",
		}),
		RecalledChecks: f.NewCounter(prometheus.CounterOpts{
			Name: "guardian_recalled_checks_total",
			Help: "Checks answered from the store's last answer for keys it slowed, without a store call.",
		}),
		GlobalFailures: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "guardian_global_failures_per_second",
			Help: "Reported failures per second seen by failure_rate rules, by flow.",
		}, []string{"flow"}),
		TenantDecisions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_tenant_decisions_total",
			Help: "Checks of tenants' tokens answered, by tenant (those --tenant-metrics names; _other for the rest) and decision.",
		}, []string{"tenant", "decision"}),
		Reports: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_reports_total",
			Help: "Reports recorded, by outcome.",
		}, []string{"outcome"}),
		UnsettledReports: f.NewCounter(prometheus.CounterOpts{
			Name: "guardian_reports_unsettled_total",
			Help: "Reports accepted without settling what their check spent, because rules this instance does not know decided the check.",
		}),
		FailureRateInForce: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "guardian_failure_rate_in_force",
			Help: "1 while a failure_rate rule is in force, hysteresis included, by rule and mode; else 0.",
		}, []string{"rule", "mode"}),
		RulesReloads: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_rules_reloads_total",
			Help: "Reloads of the rules file, by result (ok, error).",
		}, []string{"result"}),
		RulesInfo: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "guardian_rules_info",
			Help: "1 for the hash of the rules in force.",
		}, []string{"hash"}),
		SigningKeys: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "guardian_signing_key_info",
			Help: "1 for each signing key in force, by key id and use (sign, verify).",
		}, []string{"kid", "use"}),
		ListMatches: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_list_matches_total",
			Help: "What the deny and allow lists decided, by list (deny, allow) and rule: deny-list for a check a deny entry blocked, the exempted rule for each rule an allow entry made a check skip.",
		}, []string{"list", "rule"}),
		AdminActions: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_admin_actions_total",
			Help: "Admin calls that change state, by action (reset, reload, revoke, list_add, list_delete) and result (ok, error).",
		}, []string{"action", "result"}),
		Rules: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "guardian_rules",
			Help: "Rules in force, by mode.",
		}, []string{"mode"}),
		HTTPRequests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_http_requests_total",
			Help: "HTTP requests answered, by route (path template, other for unknown paths) and status code.",
		}, []string{"route", "code"}),
		ExpiringTokens: f.NewCounterVec(prometheus.CounterOpts{
			Name: "guardian_expiring_token_requests_total",
			Help: "Requests authenticated by a service token in the last tenth of its life (at most its last 72 hours), by scope.",
		}, []string{"scope"}),
		BuildInfo: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "guardian_build_info",
			Help: "1, labelled with the running guardian's version, revision and Go version.",
		}, []string{"version", "revision", "goversion"}),
		BreachedEntries: f.NewGauge(prometheus.GaugeOpts{
			Name: "guardian_breached_entries",
			Help: "Passwords in the breached-password filter in use (serve --breached); 0 without one.",
		}),
	}
	v := version.Get()
	m.BuildInfo.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	return m
}

// SetRules makes hash the one series of RulesInfo.
func (m *Metrics) SetRules(hash string) {
	m.RulesInfo.Reset()
	m.RulesInfo.WithLabelValues(hash).Set(1)
}

// SetSigningKeys records the signing keys in force by their ids: sign
// signs, every other id of verify verifies.
func (m *Metrics) SetSigningKeys(sign string, verify []string) {
	m.SigningKeys.Reset()
	m.SigningKeys.WithLabelValues(sign, "sign").Set(1)
	for _, kid := range verify {
		if kid != sign {
			m.SigningKeys.WithLabelValues(kid, "verify").Set(1)
		}
	}
}

// SetRuleCount records how many rules of each mode are in force.
func (m *Metrics) SetRuleCount(enforced, shadow int) {
	m.Rules.WithLabelValues("enforce").Set(float64(enforced))
	m.Rules.WithLabelValues("shadow").Set(float64(shadow))
}
