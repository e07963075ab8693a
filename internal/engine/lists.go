package engine

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"github.com/guardian-sec/guardian/internal/lists"
	"github.com/guardian-sec/guardian/internal/rules"
)

// Lists says what the deny and allow lists make of a check from ip of the
// normalised account in the tenant ctx carries (package lists):
// *lists.List implements it. A check asks it once, before its plan is
// built, from memory.
type Lists interface {
	Match(ctx context.Context, ip netip.Addr, account string, now time.Time) lists.Match
}

var _ Lists = (*lists.List)(nil)

// listed returns what the engine's lists say of a check with identifiers
// ids in the tenant of ctx at now, and whether a deny entry blocks it.
func (e *Engine) listed(ctx context.Context, ids *Identifiers, now time.Time) (lists.Match, bool) {
	if e.lists == nil {
		return lists.Match{}, false
	}
	m := e.lists.Match(ctx, ids.IP, ids.Account, now)
	return m, m.Denied
}

// denied is the decision of a check of flow a deny entry blocks for retry:
// block, by the rule rules.DenyListRule, decided before any rule is
// evaluated, so that nothing is spent and no attempt id is issued.
func (e *Engine) denied(flow rules.Flow, retry time.Duration, start time.Time) Decision {
	e.metrics.ListMatches.WithLabelValues(lists.Deny, rules.DenyListRule).Inc()
	e.metrics.Decisions.WithLabelValues(string(flow), string(rules.Block)).Inc()
	e.metrics.CheckDuration.WithLabelValues(string(flow)).Observe(time.Since(start).Seconds())
	return Decision{Action: rules.Block, Rule: rules.DenyListRule, RetryAfter: retry}
}

// skips reports whether an allow list entry exempts the check from r. A
// rule an allow list may not exempt from (rules.Exemptable) is never
// skipped, even when a reload changed what the entry's name stands for.
func (s *subjects) skips(r *rules.Rule) bool {
	return len(s.skip) > 0 && slices.Contains(s.skip, r.Name) && rules.Exemptable(r)
}
