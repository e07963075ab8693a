package event_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/rules"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 250e6, time.UTC)

func TestParse(t *testing.T) {
	tests := []struct {
		line string
		want event.Event
	}{
		{`{"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"e1","flow":"login","account":"alice","ip":"192.0.2.1"}`,
			event.Event{Time: t0, Kind: event.Check, ID: "e1", Flow: rules.Login, Account: "alice", IP: "192.0.2.1"}},
		{`{"ts":"2026-11-29T11:00:00.25+01:00","type":"check","id":"e2","flow":"otp_send","ip":"2001:db8::1","recipient":"+15550100000","cost":3}`,
			event.Event{Time: t0, Kind: event.Check, ID: "e2", Flow: rules.OTPSend, IP: "2001:db8::1", Recipient: "+15550100000", Cost: 3}},
		{`  {"id":"e1","outcome":"success","type":"report","ts":"2026-11-29T10:00:00.250Z"}  `,
			event.Event{Time: t0, Kind: event.Report, ID: "e1", Outcome: engine.Success}},
		{`{"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"e3","flow":"login","account":null,"ip":"192.0.2.1"}`,
			event.Event{Time: t0, Kind: event.Check, ID: "e3", Flow: rules.Login, IP: "192.0.2.1"}},
		// A decision log's line: what production decided, and the request
		// id, are read along and play no part in the event.
		{`{"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"e4","flow":"login","ip":"192.0.2.1","decision":"slow","rule":"login-ip","request_id":"req-7"}`,
			event.Event{Time: t0, Kind: event.Check, ID: "e4", Flow: rules.Login, IP: "192.0.2.1", Decision: rules.Slow, Rule: "login-ip", RequestID: "req-7"}},
		{`{"ts":"2026-11-29T10:00:00.250Z","type":"report","id":"e4","outcome":"failure","request_id":"req-8"}`,
			event.Event{Time: t0, Kind: event.Report, ID: "e4", Outcome: engine.Failure, RequestID: "req-8"}},
		// A check's secret fingerprint (in a decision log, its pseudonym).
		{`{"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"e5","flow":"login","account":"alice","ip":"192.0.2.1","secret_fingerprint":"h-0123456789abcdef0123456789abcdef"}`,
			event.Event{Time: t0, Kind: event.Check, ID: "e5", Flow: rules.Login, Account: "alice", IP: "192.0.2.1", SecretFingerprint: "h-0123456789abcdef0123456789abcdef"}},
		// A tenant's check.
		{`{"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"e6","flow":"login","account":"alice","ip":"192.0.2.1","tenant":"acme"}`,
			event.Event{Time: t0, Kind: event.Check, ID: "e6", Flow: rules.Login, Account: "alice", IP: "192.0.2.1", Tenant: "acme"}},
	}
	for _, tt := range tests {
		got, err := event.Parse([]byte(tt.line))
		if err != nil {
			t.Errorf("Parse(%s): %v", tt.line, err)
			continue
		}
		if !got.Time.Equal(tt.want.Time) {
			t.Errorf("Parse(%s).Time = %v, want %v", tt.line, got.Time, tt.want.Time)
		}
		got.Time = tt.want.Time
		if got != tt.want {
			t.Errorf("Parse(%s) = %+v, want %+v", tt.line, got, tt.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	const ts = `"ts":"2026-11-29T10:00:00.250Z"`
	tests := []struct {
		line string
		want error
		// why appears in the message.
		why string
	}{
		{``, event.ErrMalformed, "not a complete JSON object"},
		{`{"ts":`, event.ErrMalformed, "not a complete JSON object"},
		{`nonsense`, event.ErrMalformed, "invalid JSON at byte"},
		{`[1,2]`, event.ErrMalformed, "want an object"},
		{`{` + ts + `,"type":"check","id":"a","flow":"login","ip":"192.0.2.1"} {}`, event.ErrMalformed, "more than one JSON value"},
		{`{` + ts + `,"type":"check","id":"a","flow":"login","ip":"192.0.2.1","device_token":"x"}`, event.ErrMalformed, `unknown field "device_token"`},
		{`{"type":"check","id":"a","flow":"login","ip":"192.0.2.1"}`, event.ErrMalformed, "ts: required"},
		{`{"ts":"2026-11-29 10:00:00","type":"check","id":"a","flow":"login","ip":"192.0.2.1"}`, event.ErrMalformed, "not an RFC 3339 timestamp"},
		{`{"ts":1764410400,"type":"check","id":"a","flow":"login","ip":"192.0.2.1"}`, event.ErrMalformed, "ts: got a JSON number"},
		{`{` + ts + `,"id":"a","flow":"login","ip":"192.0.2.1"}`, event.ErrMalformed, "type: required"},
		{`{` + ts + `,"type":"check","flow":"login","ip":"192.0.2.1"}`, event.ErrMalformed, "id: required"},
		{`{` + ts + `,"type":"check","id":"","flow":"login","ip":"192.0.2.1"}`, event.ErrMalformed, "id: required"},
		{`{` + ts + `,"type":"check","id":"a","ip":"192.0.2.1"}`, event.ErrMalformed, "flow: required"},
		{`{` + ts + `,"type":"check","id":"a","flow":"signup","ip":"192.0.2.1"}`, event.ErrMalformed, `flow: "signup" is not one of login, password_reset, otp_send, otp_verify`},
		{`{` + ts + `,"type":"check","id":"a","flow":"login","ip":"192.0.2.1","cost":0}`, event.ErrMalformed, `cost: must be between 1 and 1000`},
		{`{` + ts + `,"type":"check","id":"a","flow":"login","ip":"192.0.2.1","cost":1001}`, event.ErrMalformed, `cost: must be between 1 and 1000`},
		{`{` + ts + `,"type":"check","id":"a","flow":"login","ip":"192.0.2.1","account":""}`, event.ErrMalformed, `account: must not be empty`},
		{`{` + ts + `,"type":"check","id":"a","flow":"otp_send","ip":"192.0.2.1","recipient":""}`, event.ErrMalformed, `recipient: must not be empty`},
		{`{` + ts + `,"type":"check","id":"a","flow":"login"}`, event.ErrMalformed, "ip: required"},
		{`{` + ts + `,"type":"check","id":"a","flow":"login","ip":"192.0.2.1","cost":1.5}`, event.ErrMalformed, "cost: got a JSON number"},
		{`{` + ts + `,"type":"check","id":"a","flow":"login","ip":"192.0.2.1","outcome":"success"}`, event.ErrMalformed, "outcome: not a field of a check"},
		{`{` + ts + `,"type":"report","id":"a"}`, event.ErrMalformed, "outcome: required"},
		{`{` + ts + `,"type":"report","id":"a","outcome":"win"}`, event.ErrMalformed, `outcome: "win" is not success or failure`},
		{`{` + ts + `,"type":"report","id":"a","outcome":"failure","ip":"192.0.2.1"}`, event.ErrMalformed, "a report has only"},
		{`{` + ts + `,"type":"report","id":"a","outcome":"failure","secret_fingerprint":"h-0123456789abcdef"}`, event.ErrMalformed, "a report has only"},
		{`{` + ts + `,"type":"check","id":"a","flow":"login","ip":"192.0.2.1","secret_fingerprint":""}`, event.ErrMalformed, "secret_fingerprint: must not be empty"},
		{`{` + ts + `,"type":"check","id":"a","flow":"login","ip":"192.0.2.1","tenant":"Acme"}`, event.ErrMalformed, "tenant: \"Acme\": only a-z"},
		{`{` + ts + `,"type":"check","id":"a","flow":"login","ip":"192.0.2.1","tenant":""}`, event.ErrMalformed, "tenant: \"\": want 1 to 32"},
		{`{` + ts + `,"type":"report","id":"a","outcome":"failure","tenant":"acme"}`, event.ErrMalformed, "a report has only"},
		{`{` + ts + `,"type":"check","id":"a","flow":"login","ip":"192.0.2.1","secret_fingerprint":7}`, event.ErrMalformed, "secret_fingerprint: got a JSON number"},
		{`{` + ts + `,"type":"logout","id":"a"}`, event.ErrUnknownType, `"logout"`},
		{`{` + ts + `,"type":"CHECK","id":"a","flow":"login","ip":"192.0.2.1"}`, event.ErrUnknownType, `"CHECK"`},
	}
	for _, tt := range tests {
		_, err := event.Parse([]byte(tt.line))
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("Parse(%s) = %v, want %v saying %q", tt.line, err, tt.want, tt.why)
		}
	}
}

func TestAppendJSONIsValidJSONAndRoundTrips(t *testing.T) {
	accounts := []string{
		"alice", `quote"back\slash`, "tab\tnewline\nnul\x00", "ünïcødé ａｌｉｃｅ", "bad utf8 \xff\xfe", "line\u2028sep\u2029", "<script>&",
	}
	for _, account := range accounts {
		ev := event.Event{Time: t0, Kind: event.Check, ID: "id-" + account, Flow: rules.PasswordReset, Account: account, IP: "192.0.2.1", Recipient: "x@example.com", Cost: 7}
		line := ev.AppendJSON(nil)
		if !strings.HasSuffix(string(line), "}\n") || strings.Count(string(line), "\n") != 1 {
			t.Fatalf("AppendJSON = %q, want one line", line)
		}
		var generic map[string]any
		if err := json.Unmarshal(line, &generic); err != nil {
			t.Fatalf("AppendJSON(%q) = %s: not JSON: %v", account, line, err)
		}
		// encoding/json decodes what AppendJSON encodes to the same string,
		// invalid UTF-8 replaced as encoding/json itself would.
		want, _ := json.Marshal(account)
		var wantAccount string
		_ = json.Unmarshal(want, &wantAccount)
		got, err := event.Parse(line)
		if err != nil {
			t.Fatalf("Parse(AppendJSON(%q)): %v", account, err)
		}
		if got.Account != wantAccount || got.Recipient != ev.Recipient || got.Cost != 7 || got.Flow != ev.Flow || !got.Time.Equal(t0) {
			t.Errorf("round trip of %q = %+v", account, got)
		}
	}
}

func TestAppendJSONOmitsDefaults(t *testing.T) {
	tests := []struct {
		ev   event.Event
		want string
	}{
		{event.Event{Time: t0, Kind: event.Check, ID: "a", Flow: rules.Login, IP: "192.0.2.1", Cost: 1},
			`{"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"a","flow":"login","ip":"192.0.2.1"}`},
		{event.Event{Time: t0.In(time.FixedZone("CET", 3600)), Kind: event.Report, ID: "a", Outcome: engine.Success},
			`{"ts":"2026-11-29T10:00:00.250Z","type":"report","id":"a","outcome":"success"}`},
		{event.Event{Time: t0, Kind: event.Check, ID: "a", Flow: rules.Login, Account: "h-1", IP: "192.0.2.1", SecretFingerprint: "h-0123456789abcdef", Cost: 2},
			`{"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"a","flow":"login","account":"h-1","ip":"192.0.2.1","secret_fingerprint":"h-0123456789abcdef","cost":2}`},
		{event.Event{Time: t0, Kind: event.Check, ID: "a", Flow: rules.Login, Account: "h-1", IP: "192.0.2.1", Tenant: "acme", Decision: rules.Allow},
			`{"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"a","flow":"login","account":"h-1","ip":"192.0.2.1","tenant":"acme","decision":"allow"}`},
	}
	for _, tt := range tests {
		if got := strings.TrimSuffix(string(tt.ev.AppendJSON(nil)), "\n"); got != tt.want {
			t.Errorf("AppendJSON = %s, want %s", got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"e1","flow":"login","account":"alice","ip":"192.0.2.1"}`))
	f.Add([]byte(`{"ts":"2026-11-29T10:00:00.250Z","type":"report","id":"e1","outcome":"failure"}`))
	f.Add([]byte(`{"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"e2","flow":"login","ip":"192.0.2.1","secret_fingerprint":"h-0123456789abcdef\u2028"}`))
	f.Add([]byte(`{"ts":"2026-11-29T10:00:00Z","type":"check","id":"\u0000","flow":"otp_send","ip":"x","recipient":"\ud800","cost":-1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		ev, err := event.Parse(line)
		if err != nil {
			if !errors.Is(err, event.ErrMalformed) && !errors.Is(err, event.ErrUnknownType) {
				t.Fatalf("error %v wraps neither sentinel", err)
			}
			return
		}
		// Whatever parses writes back to a line that parses to the same
		// event (times to the millisecond, as the format keeps them).
		ev.Time = ev.Time.Truncate(time.Millisecond)
		if ev.Time.Year() < 0 || ev.Time.Year() > 9999 {
			return // RFC 3339 cannot write it
		}
		again, err := event.Parse(ev.AppendJSON(nil))
		if err != nil {
			t.Fatalf("Parse(AppendJSON(%+v)): %v", ev, err)
		}
		if ev.Cost == 1 {
			ev.Cost = 0 // the default, which AppendJSON leaves out
		}
		if !again.Time.Equal(ev.Time) {
			t.Fatalf("time %v came back as %v", ev.Time, again.Time)
		}
		again.Time = ev.Time
		if again != ev {
			t.Fatalf("%+v came back as %+v", ev, again)
		}
	})
}
