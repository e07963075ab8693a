package client

// Policy is what Check decides when guardian does not answer: no answer
// within the deadline, a failed connection, a 5xx, or an answer that is not
// what the contract says. The zero value is no policy, and New refuses it:
// every caller writes down which way it fails.
type Policy int

// The policies.
const (
	// FailClosed answers Slow, with Config.ClosedRetryAfter: no credential
	// is verified while guardian is down. Safe against attackers, and a full
	// login outage for users while it lasts.
	FailClosed Policy = iota + 1
	// FailOpen answers Allow: logins go on unprotected while guardian is
	// down. Every such decision is counted (Stats.FailedOpen, Hooks) so it
	// is never silent.
	FailOpen
	// Local answers from a small in-process limiter per account and per IP
	// (Config.Local): the last line of defence, stricter than guardian and
	// blind to what other instances of the auth service see, but never an
	// open door.
	Local
)

// String returns the policy's name: "fail_closed", "fail_open", "local", or
// "unset".
func (p Policy) String() string {
	switch p {
	case FailClosed:
		return "fail_closed"
	case FailOpen:
		return "fail_open"
	case Local:
		return "local"
	}
	return "unset"
}

func (p Policy) valid() bool { return p >= FailClosed && p <= Local }
