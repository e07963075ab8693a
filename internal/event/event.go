// Package event is guardian's replay format: one JSON object per line, a
// check with the fields of POST /v1/check that decide it or a report naming
// its check, as the decision log writes them (package decisionlog) and
// guardian replay reads them (package replay). Event and Parse say what a
// line holds, for those who write events by hand.
package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
)

// Errors of a line that is not an event. Every error Parse returns wraps
// one of them. Their text names the replay format, as guardian replay
// prints it.
var (
	// ErrMalformed reports a line that is not one event of the replay
	// format: not a JSON object, an unknown or missing field, a bad
	// timestamp, flow or outcome, or a field of the other event type.
	ErrMalformed = errors.New("replay: malformed event")
	// ErrUnknownType reports an event whose type is neither check nor
	// report.
	ErrUnknownType = errors.New("replay: unknown event type")
)

// Kind is the type of an event.
type Kind string

// The event types.
const (
	// Check is a check, as POST /v1/check received it.
	Check Kind = "check"
	// Report is a report of the check whose ID it names.
	Report Kind = "report"
)

// TimeLayout is how the replay format writes timestamps: RFC 3339 in UTC
// with milliseconds. Any RFC 3339 timestamp is read.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Event is one line of the replay format: a check
// with the fields of POST /v1/check that decide it, or a report naming the
// ID of its check.
type Event struct {
	// Time is when the event happened; the replay's clock.
	Time time.Time
	Kind Kind
	// ID names a check; a report carries the ID of the check it reports.
	ID string

	// Flow, IP, Account, Recipient and Cost are a check's fields; an empty
	// string is an absent field and a zero Cost is the default, 1.
	Flow      rules.Flow
	Account   string
	IP        string
	Recipient string
	Cost      int64
	// SecretFingerprint is a check's secret_fingerprint, what key: secret
	// rules and repeated guesses count by. The decision log writes a
	// pseudonym of it (package decisionlog), never the fingerprint: a
	// replay counts the pseudonym as production counted the fingerprint,
	// since equal fingerprints have equal pseudonyms.
	SecretFingerprint string
	// Tenant is a check's tenant (package keys), "" for the default
	// tenant: a replay counts the check in that tenant's namespace, and
	// its report in the same.
	Tenant string

	// Outcome is a report's outcome.
	Outcome rules.Outcome

	// Decision and Rule are what production decided on a check (Rule
	// empty on allow), and RequestID the request's X-Request-Id: the
	// decision log writes them for whoever reads it; a replay reads them
	// and decides afresh.
	Decision  rules.Action
	Rule      string
	RequestID string
	// Route is the gateway route a proxied check came through (package
	// gateway); empty for a check through the API. A replay ignores it.
	Route string
}

// eventJSON is the wire form of an Event; pointers tell absent fields from
// empty ones.
type eventJSON struct {
	TS        *string `json:"ts"`
	Type      *string `json:"type"`
	ID        *string `json:"id"`
	Flow      *string `json:"flow"`
	Account   *string `json:"account"`
	IP        *string `json:"ip"`
	Recipient *string `json:"recipient"`
	Cost      *int64  `json:"cost"`
	Outcome   *string `json:"outcome"`
	// SecretFingerprint is checked by the engine, as a request's is.
	SecretFingerprint *string `json:"secret_fingerprint"`
	Tenant            *string `json:"tenant"`
	// Written by the decision log, not needed to replay: accepted and
	// kept, never checked.
	Decision  *string `json:"decision"`
	Rule      *string `json:"rule"`
	RequestID *string `json:"request_id"`
	Route     *string `json:"route"`
}

// Parse reads one line of the replay format. It checks the format, the
// flow and a given cost (rules.CheckFlow, rules.CheckCost); whether a
// check's ip, account, recipient or secret_fingerprint are valid is for
// the engine to say (engine.CheckRequest.Validate). Errors wrap
// ErrMalformed or ErrUnknownType.
func Parse(line []byte) (Event, error) {
	var w eventJSON
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrMalformed, jsonReason(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Event{}, fmt.Errorf("%w: more than one JSON value on the line", ErrMalformed)
	}
	var ev Event
	if w.TS == nil {
		return ev, fmt.Errorf("%w: ts: required", ErrMalformed)
	}
	t, err := time.Parse(time.RFC3339Nano, *w.TS)
	if err != nil {
		return ev, fmt.Errorf("%w: ts: %s is not an RFC 3339 timestamp", ErrMalformed, quote(*w.TS))
	}
	ev.Time = t
	if w.Type == nil {
		return ev, fmt.Errorf("%w: type: required", ErrMalformed)
	}
	if w.ID == nil || *w.ID == "" {
		return ev, fmt.Errorf("%w: id: required", ErrMalformed)
	}
	ev.ID = *w.ID
	if w.Decision != nil {
		ev.Decision = rules.Action(*w.Decision)
	}
	if w.Rule != nil {
		ev.Rule = *w.Rule
	}
	if w.RequestID != nil {
		ev.RequestID = *w.RequestID
	}
	if w.Route != nil {
		ev.Route = *w.Route
	}
	switch Kind(*w.Type) {
	case Check:
		ev.Kind = Check
		if w.Outcome != nil {
			return ev, fmt.Errorf("%w: outcome: not a field of a check", ErrMalformed)
		}
		if w.Flow == nil {
			return ev, fmt.Errorf("%w: flow: required", ErrMalformed)
		}
		ev.Flow = rules.Flow(*w.Flow)
		if err := rules.CheckFlow(ev.Flow); err != nil {
			return ev, fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		if w.IP == nil {
			return ev, fmt.Errorf("%w: ip: required", ErrMalformed)
		}
		ev.IP = *w.IP
		// As in a request to guardian, a field given holds a value: an
		// empty account or recipient, a cost of 0, is not an absent one.
		if w.Account != nil {
			if *w.Account == "" {
				return ev, fmt.Errorf("%w: account: must not be empty", ErrMalformed)
			}
			ev.Account = *w.Account
		}
		if w.Recipient != nil {
			if *w.Recipient == "" {
				return ev, fmt.Errorf("%w: recipient: must not be empty", ErrMalformed)
			}
			ev.Recipient = *w.Recipient
		}
		if w.SecretFingerprint != nil {
			if *w.SecretFingerprint == "" {
				return ev, fmt.Errorf("%w: secret_fingerprint: must not be empty", ErrMalformed)
			}
			ev.SecretFingerprint = *w.SecretFingerprint
		}
		if w.Cost != nil {
			if err := rules.CheckCost(*w.Cost); err != nil {
				return ev, fmt.Errorf("%w: %v", ErrMalformed, err)
			}
			ev.Cost = *w.Cost
		}
		if w.Tenant != nil {
			if err := keys.CheckTenant(*w.Tenant); err != nil {
				return ev, fmt.Errorf("%w: tenant: %v", ErrMalformed, detailOf(err))
			}
			ev.Tenant = *w.Tenant
		}
	case Report:
		ev.Kind = Report
		if w.Flow != nil || w.Account != nil || w.IP != nil || w.Recipient != nil || w.Cost != nil || w.SecretFingerprint != nil || w.Tenant != nil {
			return ev, fmt.Errorf("%w: a report has only ts, type, id and outcome", ErrMalformed)
		}
		if w.Outcome == nil {
			return ev, fmt.Errorf("%w: outcome: required", ErrMalformed)
		}
		switch o := rules.Outcome(*w.Outcome); o {
		case rules.Success, rules.Failure:
			ev.Outcome = o
		default:
			return ev, fmt.Errorf("%w: outcome: %s is not success or failure", ErrMalformed, quote(*w.Outcome))
		}
	default:
		return ev, fmt.Errorf("%w: %s", ErrUnknownType, quote(*w.Type))
	}
	return ev, nil
}

// detailOf is a keys error's message without its package's prefix.
func detailOf(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// jsonReason shortens a decoding error to what helps find the problem.
func jsonReason(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "not a complete JSON object"
	case errors.As(err, &syn):
		return "invalid JSON at byte " + strconv.FormatInt(syn.Offset, 10) + ": " + syn.Error()
	case errors.As(err, &typ):
		if typ.Field != "" {
			return typ.Field + ": got a JSON " + typ.Value + ", want a " + typ.Type.String()
		}
		return "got a JSON " + typ.Value + ", want an object"
	}
	// Unknown fields and the rest: encoding/json's message is precise.
	return err.Error()
}

// quote quotes s for an error message, shortened: a line of garbage is
// worth pointing at, not echoing whole.
func quote(s string) string {
	const n = 64
	if len(s) > n {
		return strconv.Quote(s[:n]) + "…"
	}
	return strconv.Quote(s)
}

// AppendJSON appends ev as one line of the replay format, newline
// included: ts (TimeLayout, UTC), type and id, then a check's flow,
// account, ip, recipient, secret_fingerprint, cost and tenant (each only
// when set; cost only when not 1), decision, rule and route (each only when
// set), or a report's outcome, and last request_id when set.
func (ev *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"ts":"`...)
	b = ev.Time.UTC().AppendFormat(b, TimeLayout)
	b = append(b, `","type":`...)
	b = appendString(b, string(ev.Kind))
	b = append(b, `,"id":`...)
	b = appendString(b, ev.ID)
	switch ev.Kind {
	case Check:
		b = append(b, `,"flow":`...)
		b = appendString(b, string(ev.Flow))
		if ev.Account != "" {
			b = append(b, `,"account":`...)
			b = appendString(b, ev.Account)
		}
		b = append(b, `,"ip":`...)
		b = appendString(b, ev.IP)
		if ev.Recipient != "" {
			b = append(b, `,"recipient":`...)
			b = appendString(b, ev.Recipient)
		}
		if ev.SecretFingerprint != "" {
			b = append(b, `,"secret_fingerprint":`...)
			b = appendString(b, ev.SecretFingerprint)
		}
		if ev.Cost != 0 && ev.Cost != 1 {
			b = append(b, `,"cost":`...)
			b = strconv.AppendInt(b, ev.Cost, 10)
		}
		if ev.Tenant != "" {
			b = append(b, `,"tenant":`...)
			b = appendString(b, ev.Tenant)
		}
		if ev.Decision != "" {
			b = append(b, `,"decision":`...)
			b = appendString(b, string(ev.Decision))
		}
		if ev.Rule != "" {
			b = append(b, `,"rule":`...)
			b = appendString(b, ev.Rule)
		}
		if ev.Route != "" {
			b = append(b, `,"route":`...)
			b = appendString(b, ev.Route)
		}
	case Report:
		b = append(b, `,"outcome":`...)
		b = appendString(b, string(ev.Outcome))
	}
	if ev.RequestID != "" {
		b = append(b, `,"request_id":`...)
		b = appendString(b, ev.RequestID)
	}
	return append(b, "}\n"...)
}

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json writes it.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			// Valid JSON, but not valid JavaScript: escaped as
			// encoding/json does.
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
