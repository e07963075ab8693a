package client

import "time"

// Call names a client method, for metrics labels.
type Call string

// The calls.
const (
	// CallCheck is Client.Check.
	CallCheck Call = "check"
	// CallReport is Client.Report.
	CallReport Call = "report"
	// CallStatus is Client.AccountStatus.
	CallStatus Call = "status"
	// CallReset is Client.ResetAccount.
	CallReset Call = "reset"
)

// Hooks are the client's metrics: functions the caller wires to its own
// registry (a Prometheus counter, a StatsD call). The client keeps no global
// registry. A nil function is not called. Hooks are called on the calling
// goroutine, so they must be quick and safe for concurrent use. Nothing
// passed to them identifies a user, an account or an address.
type Hooks struct {
	// Checked is called once per Check that returned a decision, with the
	// time the call took. d.Unavailable marks decisions the Policy made:
	// count d.Unavailable && d.Action == Allow to see how often the client
	// failed open.
	Checked func(d Decision, elapsed time.Duration)
	// Reported is called once per Report with an attempt id, with the
	// error it returned (nil on success).
	Reported func(o Outcome, err error, elapsed time.Duration)
	// Unavailable is called each time guardian did not answer a call.
	Unavailable func(c Call, r Reason)
	// Retried is called when a call is sent a second time because the
	// first never reached guardian.
	Retried func(c Call)
	// Unauthorized is called each time guardian refused the service token
	// (status 401 or 403), whatever Config.OnUnauthorized then decides: an
	// expired or rotated-out token is an outage of every login, so alert
	// on the first.
	Unauthorized func(c Call, status int)
}

// Stats are a Client's counts since New, for callers that wire no Hooks.
type Stats struct {
	// Checks is how many Check calls returned a decision.
	Checks uint64
	// Unavailable is how many of them the Policy decided.
	Unavailable uint64
	// FailedOpen is how many of those were allowed: with FailOpen, every
	// one; with Local, those its limiter admitted.
	FailedOpen uint64
}
