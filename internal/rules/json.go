package rules

import "encoding/json"

// ruleJSON is a Rule as GET /v1/rules shows it: the rules-file field names,
// durations in the rules-file syntax, and only the fields of its type and key.
type ruleJSON struct {
	Name         string       `json:"name"`
	Flows        []Flow       `json:"flows"`
	Key          Key          `json:"key"`
	Type         Type         `json:"type"`
	Mode         Mode         `json:"mode"`
	Action       Action       `json:"action"`
	OnStoreError OnStoreError `json:"on_store_error"`
	Limit        int64        `json:"limit"`
	Count        Count        `json:"count,omitempty"`
	Per          string       `json:"per,omitempty"`
	Burst        int64        `json:"burst,omitempty"`
	Hold         string       `json:"hold,omitempty"`
	Hysteresis   string       `json:"hysteresis,omitempty"`
	IPv4Prefix   int          `json:"ipv4_prefix,omitempty"`
	IPv6Prefix   int          `json:"ipv6_prefix,omitempty"`
	Of           Key          `json:"of,omitempty"`
}

// MarshalJSON renders the rule with the field names of the rules file, as
// GET /v1/rules shows it: count, per and burst for rate rules, per and
// hysteresis for failure_rate, hold for consecutive_failures, the prefixes
// for key ip, of, count and per for distinct. Durations are in the rules-file syntax (FormatDuration), so the
// output reads like the file the rule came from.
func (r Rule) MarshalJSON() ([]byte, error) {
	out := ruleJSON{
		Name:         r.Name,
		Flows:        r.Flows,
		Key:          r.Key,
		Type:         r.Type,
		Mode:         r.Mode,
		Action:       r.Action,
		OnStoreError: r.OnStoreError,
		Limit:        r.Limit,
	}
	if out.Flows == nil {
		out.Flows = []Flow{}
	}
	switch r.Type {
	case Rate:
		out.Count = r.Count
		out.Per = FormatDuration(r.Per)
		out.Burst = r.Burst
	case ConsecutiveFailures:
		out.Hold = FormatDuration(r.Hold)
	case FailureRate:
		out.Per = FormatDuration(r.Per)
		out.Hysteresis = FormatDuration(r.Hysteresis)
	case Distinct:
		out.Count = r.Count
		out.Per = FormatDuration(r.Per)
		out.Of = r.Of
	}
	if r.Key == KeyIP {
		out.IPv4Prefix = r.IPv4Prefix
		out.IPv6Prefix = r.IPv6Prefix
	}
	return json.Marshal(out)
}
