package server

import "github.com/guardian-sec/guardian/internal/engine"

// events tells every one of its listeners of the engine's hard stops, in
// order: the audit trail, the incident view, the webhooks.
type events []engine.Events

var _ engine.Events = events(nil)

// HardStopStarted tells every listener.
func (ev events) HardStopStarted(tenant, account string) {
	for _, e := range ev {
		e.HardStopStarted(tenant, account)
	}
}

// HardStopEnded tells every listener.
func (ev events) HardStopEnded(tenant, account string) {
	for _, e := range ev {
		e.HardStopEnded(tenant, account)
	}
}
