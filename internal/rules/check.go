package rules

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// What a check and its report name, as every wire format reads them (the
// HTTP API, the replay format) and the engine decides them: a flow of
// Flows, a cost of 1 to MaxCost, an Outcome.

// Errors of CheckFlow and CheckCost; the HTTP API answers them unknown_flow
// and invalid_field.
var (
	// ErrUnknownFlow reports a flow guardian does not know.
	ErrUnknownFlow = errors.New("rules: unknown flow")
	// ErrInvalidCost reports a cost out of range.
	ErrInvalidCost = errors.New("rules: invalid cost")
)

// MaxCost is the largest cost one check may spend.
const MaxCost = 1000

// flowNames lists the flows for an error message.
var flowNames = func() string {
	names := make([]string, len(Flows))
	for i, f := range Flows {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}()

// CheckFlow reports whether f is a flow guardian knows (Flows), with an
// error wrapping ErrUnknownFlow that lists them when it is not. The wire
// formats ask it as soon as they read a flow, so that an unknown flow is
// the first thing said of a request.
func CheckFlow(f Flow) error {
	if _, ok := ParseFlow(string(f)); !ok {
		return fmt.Errorf("%w: flow: %s is not one of %s", ErrUnknownFlow, echo(string(f)), flowNames)
	}
	return nil
}

// echo quotes a client's value for an error message, shortened: a typo is
// worth echoing, a megabyte of it is not.
func echo(s string) string {
	const n = 64
	if len(s) > n {
		s = s[:n] + "…"
	}
	return strconv.Quote(s)
}

// CheckCost reports whether n is a cost a check may name: 1 to MaxCost, with
// an error wrapping ErrInvalidCost when it is not. A wire format with an
// explicit cost holds it to this; only an absent cost is the default, 1.
func CheckCost(n int64) error {
	if n < 1 || n > MaxCost {
		return fmt.Errorf("%w: cost: must be between 1 and %d", ErrInvalidCost, MaxCost)
	}
	return nil
}

// Outcome is how a checked attempt went, as its report says: what count:
// failures and failure_rate rules count.
type Outcome string

// The outcomes of a report.
const (
	Success Outcome = "success"
	Failure Outcome = "failure"
)
