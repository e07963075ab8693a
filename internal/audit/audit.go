// Package audit writes guardian's audit trail, for a SIEM: one log line per
// admin call that changes state (an account reset, a rules reload, a token
// revocation, a list change), and one
// per account entering or leaving a hard stop. Lines go to guardian's own
// logger (JSON by default), at info level, and are told apart by a field:
//
//	{"msg": "admin action", "audit": true, "action": "reset", "subject": "ops-alice", "result": "ok", "account": "h-…", "request_id": "…"}
//	{"msg": "admin action", "audit": true, "action": "reload", "subject": "ops-alice", "result": "ok", "request_id": "…", "rules_added": [], "rules_removed": [],
//	 "rules_changed": [{"rule": "login-ip-24", "fields": ["mode"], "mode_from": "shadow", "mode_to": "enforce"}], "rules_promoted": ["login-ip-24"], …}
//	{"msg": "admin action", "audit": true, "action": "revoke", "subject": "ops-alice", "result": "ok", "jti": "…", "request_id": "…"}
//	{"msg": "admin action", "audit": true, "action": "list_add", "subject": "ops-alice", "result": "ok", "list": "deny", "id": "…", "network": "198.51.100.0/24", "request_id": "…"}
//	{"msg": "hard stop started", "event": "hard_stop_started", "account": "h-…"}
//	{"msg": "hard stop ended", "event": "hard_stop_ended", "account": "h-…"}
//	{"msg": "admin action", "audit": true, "action": "reset", "subject": "acme-ops", "result": "ok", "tenant": "acme", "account": "h-…", …}
//
// A line of a call made with a tenant's token, or of a tenant's account,
// carries the tenant's name in tenant; a line of the default tenant has
// none. An account's pseudonym is its tenant's: the same name in two
// tenants is two accounts with two pseudonyms.
// No line carries an account in clear. account is its pseudonym
// (keys.Hasher.Pseudonym): "h-" and 22 characters of a keyed hash under the
// hash key, the one the decision log, the console and webhooks name it by,
// so every instance of a fleet writes the same pseudonym for one account
// and a reset's line names the account its hard stop's lines named, while
// nobody without the key can tell which account it is. subject is the
// admin token's subject claim, a name the operator chose for the caller.
package audit

import (
	"context"
	"log/slog"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
)

// The actions and results of admin calls.
const (
	ActionReset  = "reset"
	ActionReload = "reload"
	ActionRevoke = "revoke"
	// ActionListAdd and ActionListDelete are changes of the deny and
	// allow lists; their lines name the entry's list, id, and network or
	// account pseudonym.
	ActionListAdd    = "list_add"
	ActionListDelete = "list_delete"
	ResultOK         = "ok"
	ResultError      = "error"
)

// Config configures a Log. Metrics, and Hasher or Key, are required.
type Config struct {
	// Hasher hashes accounts into their subjects, and subjects into
	// pseudonyms: the instance's one Hasher of the hash key
	// (server.Config.HashKey). Nil: one of the Log's own, keyed from Key.
	Hasher *keys.Hasher
	// Key is the hash key, for a Log without a Hasher.
	Key secret.Key
	// Metrics counts admin actions (guardian_admin_actions_total).
	Metrics *metrics.Metrics
	// Normalizer normalises accounts as the engine does (nil: the
	// defaults), so that a pseudonym names the account checks counted.
	Normalizer *keys.Normalizer
	// Logger receives the lines; nil means slog.Default().
	Logger *slog.Logger
}

// Log writes the audit trail. It hears accounts enter and leave a hard
// stop as engine.Events. It is safe for concurrent use; build one with
// New.
type Log struct {
	log     *slog.Logger
	hasher  *keys.Hasher
	norm    *keys.Normalizer
	metrics *metrics.Metrics
}

// New returns a Log for cfg.
func New(cfg Config) *Log {
	l := &Log{log: cfg.Logger, hasher: cfg.Hasher, norm: cfg.Normalizer, metrics: cfg.Metrics}
	if l.hasher == nil {
		l.hasher = keys.NewHasher(cfg.Key)
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	return l
}

// Action writes the line of one admin call that changed state, or tried to,
// and counts it: action is ActionReset, ActionReload, ActionRevoke,
// ActionListAdd or ActionListDelete,
// subject the token's subject, result ResultOK or ResultError. account is
// the account the call named, in clear as the caller sent it, or "" for
// none; the line carries its pseudonym, and none when it is not a valid
// account. extra are further fields of the line (a reload's changes, a
// revoked token's jti). ctx is the call's: a logger that reads request ids
// from it (requestid.Handler) adds the call's request_id, so the line and
// the caller's own logs match; the tenant it carries (keys.TenantOf) is
// the account's and the line's.
func (l *Log) Action(ctx context.Context, action, subject, result, account string, extra ...slog.Attr) {
	l.metrics.AdminActions.WithLabelValues(action, result).Inc()
	attrs := []slog.Attr{slog.Bool("audit", true), slog.String("action", action), slog.String("subject", subject), slog.String("result", result)}
	tenant := keys.TenantOf(ctx)
	if tenant != "" {
		attrs = append(attrs, slog.String("tenant", tenant))
	}
	if account != "" {
		if s, err := l.hasher.Tenant(tenant).AccountSubject(l.norm, account); err == nil {
			attrs = append(attrs, slog.String("account", l.Pseudonym(s)))
		}
	}
	l.log.LogAttrs(ctx, slog.LevelInfo, "admin action", append(attrs, extra...)...)
}

// Reload is Action for a rules reload an admin call asked for, with what
// the reload changed (rules.Changes.Attrs: rules_added, rules_removed,
// rules_changed with the names of the changed fields, the mode changes).
// changes is nil for a reload that was refused.
func (l *Log) Reload(ctx context.Context, subject, result string, changes *rules.Changes) {
	var extra []slog.Attr
	if changes != nil {
		extra = changes.Attrs()
	}
	l.Action(ctx, ActionReload, subject, result, "", extra...)
}

// Revoke writes the line of a token revocation, or of one refused, and
// counts it, as Action does: subject is the admin token's subject, result
// ResultOK or ResultError, jti the revoked token's id as the caller sent
// it ("" for none). A jti names a token, never a person, and is logged as
// it is. ctx is the call's, for its request_id.
func (l *Log) Revoke(ctx context.Context, subject, result, jti string) {
	var extra []slog.Attr
	if jti != "" {
		extra = append(extra, slog.String("jti", jti))
	}
	l.Action(ctx, ActionRevoke, subject, result, "", extra...)
}

// HardStopStarted writes the line of an account entering a hard stop;
// account is its subject, tenant its tenant ("" for the default).
func (l *Log) HardStopStarted(tenant, account string) {
	l.hardStop("hard stop started", "hard_stop_started", tenant, account)
}

// HardStopEnded writes the line of an account leaving a hard stop; account
// is its subject, tenant its tenant ("" for the default).
func (l *Log) HardStopEnded(tenant, account string) {
	l.hardStop("hard stop ended", "hard_stop_ended", tenant, account)
}

// hardStop writes the line of a hard stop's event.
func (l *Log) hardStop(msg, event, tenant, account string) {
	attrs := []slog.Attr{slog.String("event", event)}
	if tenant != "" {
		attrs = append(attrs, slog.String("tenant", tenant))
	}
	l.log.LogAttrs(context.Background(), slog.LevelInfo, msg, append(attrs, slog.String("account", l.Pseudonym(account)))...)
}

// Pseudonym returns the pseudonym of the account whose subject is given.
func (l *Log) Pseudonym(subject string) string {
	return l.hasher.SubjectPseudonym(subject)
}
