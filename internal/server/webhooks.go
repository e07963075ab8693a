package server

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/guardian-sec/guardian/internal/incident"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/webhook"
)

// newHooks builds the instance's webhook notifier from Config.WebhookURLs
// and Config.WebhookSecretFile, not started; none without URLs. claim
// dedupes fleet-wide events (nil: each instance sends its own).
func (s *Server) newHooks(claim webhook.Claimer) error {
	if len(s.cfg.WebhookURLs) == 0 {
		if s.cfg.WebhookSecretFile != "" {
			return fmt.Errorf("server: --webhook-secret-file without --webhook-url")
		}
		return nil
	}
	for _, u := range s.cfg.WebhookURLs {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("server: --webhook-url %q: want an http or https URL", u)
		}
	}
	if s.cfg.WebhookSecretFile == "" {
		return fmt.Errorf("server: --webhook-url needs --webhook-secret-file")
	}
	b, err := os.ReadFile(s.cfg.WebhookSecretFile)
	if err != nil {
		return fmt.Errorf("server: --webhook-secret-file: %w", err)
	}
	key, err := webhook.ParseSecret(string(b))
	if err != nil {
		return fmt.Errorf("server: --webhook-secret-file: %w", err)
	}
	s.hooks = webhook.New(webhook.Config{URLs: s.cfg.WebhookURLs, Key: key, Claim: claim, Registerer: s.registry, Now: s.cfg.Now, Logger: s.log})
	return nil
}

// notify sends ev to the webhooks, if any, with this instance's id; it
// never blocks.
func (s *Server) notify(ev webhook.Event) {
	if s.hooks == nil {
		return
	}
	if ev.Data == nil {
		ev.Data = map[string]string{}
	}
	ev.Data["instance"] = s.fleet.ID()
	s.hooks.Notify(ev)
}

// ListChanged sends list_changed to the webhooks: list is "deny" or
// "allow", action "added" or "deleted", id the entry's id and name the
// network, or the account's pseudonym (keys.Hasher.Pseudonym), never an
// account in clear. Call it on the instance where the change was made:
// the event is sent once, by it. It never blocks. Every change the admin
// API makes goes through it (listChanged).
func (s *Server) ListChanged(list, action, id, name string) {
	s.listEvent(list, action, id, name, "")
}

// listEvent is ListChanged for an entry of tenant ("" for the default).
func (s *Server) listEvent(list, action, id, name, tenant string) {
	d := map[string]string{"list": list, "action": action, "id": id, "name": name}
	if tenant != "" {
		d["tenant"] = tenant
	}
	s.notify(webhook.Event{Type: webhook.ListChanged, Data: d})
}

// hookEvents hears the engine's hard stops for the webhooks, naming the
// account by its pseudonym.
type hookEvents struct{ s *Server }

// HardStopStarted sends hard_stop_started.
func (h hookEvents) HardStopStarted(tenant, account string) {
	h.s.notify(webhook.Event{Type: webhook.HardStopStarted, Data: accountData(tenant, h.s.hasher.SubjectPseudonym(account))})
}

// HardStopEnded sends hard_stop_ended.
func (h hookEvents) HardStopEnded(tenant, account string) {
	h.s.notify(webhook.Event{Type: webhook.HardStopEnded, Data: accountData(tenant, h.s.hasher.SubjectPseudonym(account))})
}

// accountData is the data of an account's event: its pseudonym, and its
// tenant unless it is the default one.
func accountData(tenant, pseudonym string) map[string]string {
	d := map[string]string{"account": pseudonym}
	if tenant != "" {
		d["tenant"] = tenant
	}
	return d
}

// accountReset sends account_reset for the account an admin call reset,
// named by its pseudonym in the call's tenant.
func (s *Server) accountReset(ctx context.Context, account string) {
	tenant := keys.TenantOf(ctx)
	p, err := s.hasher.Tenant(tenant).PseudonymOf(s.cfg.Normalizer, keys.PseudonymAccount, account)
	if err != nil {
		return
	}
	s.notify(webhook.Event{Type: webhook.AccountReset, Data: accountData(tenant, p)})
}

// globalChanged sends global_challenge_started or _ended. Every instance
// sees the change: the first to claim it sends it.
func (s *Server) globalChanged(c incident.Change) {
	ev := webhook.Event{Type: webhook.GlobalChallengeEnded, Data: map[string]string{"rule": c.Rule}, Dedupe: c.Rule}
	if c.InForce {
		ev.Type = webhook.GlobalChallengeStarted
	}
	s.notify(ev)
}

// fallbackChanged sends fallback_started or _ended, this instance's.
func (s *Server) fallbackChanged(active bool) {
	ev := webhook.Event{Type: webhook.FallbackEnded}
	if active {
		ev.Type = webhook.FallbackStarted
	}
	s.notify(ev)
}

// rulesReloaded sends rules_reloaded for set, once for the fleet.
func (s *Server) rulesReloaded(set *rules.Set, by string) {
	s.notify(webhook.Event{Type: webhook.RulesReloaded, Dedupe: set.Hash(),
		Data: map[string]string{"hash": set.Hash(), "rule_count": fmt.Sprint(len(set.Rules)), "by": by, "at": set.LoadedAt.UTC().Format(time.RFC3339)}})
}
