package httpapi

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
)

// The reference encoding of a check answer: what encoding/json makes of
// these structs is what appendCheck must write.
type refLimit struct {
	Rule      string `json:"rule"`
	Remaining int64  `json:"remaining"`
	ResetMS   int64  `json:"reset_ms"`
}

type refShadow struct {
	Rule         string `json:"rule"`
	Decision     string `json:"decision"`
	RetryAfterMS int64  `json:"retry_after_ms"`
}

type refCheck struct {
	Decision     string      `json:"decision"`
	Rule         string      `json:"rule,omitempty"`
	RetryAfterMS int64       `json:"retry_after_ms"`
	AttemptID    string      `json:"attempt_id,omitempty"`
	Degraded     bool        `json:"degraded"`
	RepeatGuess  bool        `json:"repeat_guess"`
	Trust        string      `json:"trust"`
	Limits       []refLimit  `json:"limits"`
	Shadow       []refShadow `json:"shadow"`
}

// refCheckJSON is d encoded by encoding/json.
func refCheckJSON(tb testing.TB, d *engine.Decision) string {
	tb.Helper()
	r := refCheck{
		Decision:     string(d.Action),
		Rule:         d.Rule,
		RetryAfterMS: millis(d.RetryAfter),
		AttemptID:    d.AttemptID,
		Degraded:     d.Degraded,
		RepeatGuess:  d.RepeatGuess,
		Trust:        string(trustOf(d)),
		Limits:       make([]refLimit, len(d.Limits)),
		Shadow:       make([]refShadow, len(d.Shadow)),
	}
	for i, l := range d.Limits {
		r.Limits[i] = refLimit{Rule: l.Rule, Remaining: l.Remaining, ResetMS: millis(l.Reset)}
	}
	for i, s := range d.Shadow {
		r.Shadow[i] = refShadow{Rule: s.Rule, Decision: string(s.Action), RetryAfterMS: millis(s.RetryAfter)}
	}
	b, err := json.Marshal(r)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestAppendCheckMatchesEncodingJSON(t *testing.T) {
	for _, d := range []engine.Decision{
		{Action: rules.Allow},
		{Action: rules.Allow, AttemptID: "AQID_-x", RepeatGuess: true, Limits: []engine.Limit{{Rule: "login-account", Remaining: 4, Reset: 12*time.Second + time.Microsecond}}},
		{
			Action: rules.Slow, Rule: "login-account", RetryAfter: 41 * time.Second, Degraded: true,
			Limits: []engine.Limit{{Rule: "login-account", Reset: 41 * time.Second}, {Rule: "login-ip", Remaining: 29, Reset: -time.Second}},
			Shadow: []engine.ShadowTrip{{Rule: "strict", Action: rules.Block}, {Rule: "other", Action: rules.Slow, RetryAfter: 1500 * time.Microsecond}},
		},
		{Action: rules.Block, Rule: "login-hard-stop", Limits: []engine.Limit{{Rule: "login-hard-stop", Remaining: -3, Reset: 90 * 24 * time.Hour}}},
		{Action: rules.Challenge, Rule: "global", AttemptID: "a"},
		// Names guardian's rules never have, to hold the escaping to
		// encoding/json's.
		{Action: "x\"y\\z", Rule: "<a href='&'>\u2028\u2029\x00\x1f\x7f\b\f\n\r\t", AttemptID: "caf\xc3\xa9 \xff\xfe\xed\xa0\x80 \U0001F600"},
	} {
		got, want := string(appendCheck(nil, &d)), refCheckJSON(t, &d)
		if got != want {
			t.Errorf("appendCheck(%+v)\n got %s\nwant %s", d, got, want)
		}
	}
}

func TestAppendReportMatchesEncodingJSON(t *testing.T) {
	for _, res := range []engine.ReportResult{{}, {DeviceToken: "eyJ.x_y-z"}, {DeviceToken: "<&>"}} {
		m := map[string]any{"recorded": true}
		if res.DeviceToken != "" {
			m["device_token"] = res.DeviceToken
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(appendReport(nil, &res)); got != string(want) {
			t.Errorf("appendReport(%+v) = %s, want %s", res, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "login-account", `"\`, "<>&", "\u2028\u2029", "\x00\x7f\xff", "caf\xc3\xa9", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendString(nil, s); string(got) != string(want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func FuzzAppendCheck(f *testing.F) {
	f.Add("allow", "", "", int64(0), int64(0), false, int64(4), "login-account")
	f.Add("slow", "login-account", "id", int64(41_000_000_000), int64(12_000_000_001), true, int64(-1), "<x>")
	f.Fuzz(func(t *testing.T, action, rule, attempt string, retry, reset int64, degraded bool, remaining int64, limitRule string) {
		d := engine.Decision{
			Action: rules.Action(action), Rule: rule, AttemptID: attempt, RetryAfter: time.Duration(retry), Degraded: degraded,
			Limits: []engine.Limit{{Rule: limitRule, Remaining: remaining, Reset: time.Duration(reset)}},
			Shadow: []engine.ShadowTrip{{Rule: rule, Action: rules.Action(action), RetryAfter: time.Duration(reset)}},
		}
		if got, want := string(appendCheck(nil, &d)), refCheckJSON(t, &d); got != want {
			t.Fatalf("appendCheck\n got %s\nwant %s", got, want)
		}
	})
}
