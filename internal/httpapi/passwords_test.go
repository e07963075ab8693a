package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/breached"
	"github.com/guardian-sec/guardian/internal/breached/breachedtest"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/rules"
)

// filterOf builds and loads a filter of format (plain or ntlm) holding
// passwords.
func filterOf(tb testing.TB, format breached.Format, passwords ...string) *breached.Loaded {
	tb.Helper()
	path := breachedtest.File(tb, format, passwords...)
	f, err := breached.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	return &breached.Loaded{Filter: f, Source: path, LoadedAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
}

func sha1Hex(p string) string { return breachedtest.SHA1(p) }

// notIn is a password l's filter answers false for.
func notIn(tb testing.TB, l *breached.Loaded) string { return breachedtest.NotIn(tb, l.Filter) }

func withFilter(l *breached.Loaded) func(*Config) {
	return func(cfg *Config) {
		cfg.Breached = &breached.Holder{}
		if l != nil {
			cfg.Breached.Store(l)
		}
	}
}

func TestPasswordCheck(t *testing.T) {
	c := loadContract(t)
	sha := withFilter(filterOf(t, breached.Plain, "123456", "password", "qwerty"))
	ntlm := withFilter(filterOf(t, breached.NTLM, "password"))
	outside := notIn(t, filterOf(t, breached.Plain, "123456", "password", "qwerty"))
	for _, tc := range []struct {
		name       string
		edit       func(*Config)
		body       string
		wantStatus int
		want       string // the body, or the error code
	}{
		{"breached", sha, `{"sha1":"` + sha1Hex("password") + `"}`, 200, `{"breached":true}`},
		{"breached, upper case", sha, `{"sha1":"` + strings.ToUpper(sha1Hex("qwerty")) + `"}`, 200, `{"breached":true}`},
		{"not breached", sha, `{"sha1":"` + sha1Hex(outside) + `"}`, 200, `{"breached":false}`},
		{"escaped, through encoding/json", sha, `{"sha\u0031":"` + sha1Hex("123456") + `"}`, 200, `{"breached":true}`},
		{"no filter", withFilter(nil), `{"sha1":"` + sha1Hex("password") + `"}`, 404, "not_found"},
		{"no holder", nil, `{"sha1":"` + sha1Hex("password") + `"}`, 404, "not_found"},
		{"NTLM filter", ntlm, `{"sha1":"` + sha1Hex("password") + `"}`, 404, "not_found"},
		{"bad input before no filter", withFilter(nil), `{"sha1":"abc"}`, 400, "invalid_field"},
		{"missing", sha, `{}`, 400, "missing_field"},
		{"null", sha, `{"sha1":null}`, 400, "missing_field"},
		{"short", sha, `{"sha1":"` + sha1Hex("password")[1:] + `"}`, 400, "invalid_field"},
		{"not hex", sha, `{"sha1":"` + strings.Repeat("z", 40) + `"}`, 400, "invalid_field"},
		{"the password itself", sha, `{"sha1":"password"}`, 400, "invalid_field"},
		{"a number", sha, `{"sha1":1}`, 400, "invalid_field"},
		{"unknown field", sha, `{"sha1":"` + sha1Hex("password") + `","password":"password"}`, 400, "unknown_field"},
		{"twice", sha, `{"sha1":"` + sha1Hex("password") + `","sha1":"` + sha1Hex("x") + `"}`, 400, "invalid_json"},
		{"case variant", sha, `{"SHA1":"` + sha1Hex("password") + `"}`, 400, "unknown_field"},
		{"not JSON", sha, `sha1=` + sha1Hex("password"), 400, "invalid_json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeDecider{set: rules.Default()}
			api := newTestAPI(t, fake, tc.edit)
			req, rec := api.do(http.MethodPost, "/v1/passwords/check", tc.body, api.check)
			c.checkAnswer(t, req, rec)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantStatus == 200 {
				if got := rec.Body.String(); got != tc.want {
					t.Errorf("body %s, want %s", got, tc.want)
				}
			} else if got := errorCode(rec.Body.Bytes()); got != tc.want {
				t.Errorf("code %s (%s), want %s", got, rec.Body, tc.want)
			}
			if strings.Contains(rec.Body.String(), "5baa61e4") || strings.Contains(strings.ToLower(rec.Body.String()), `"password"`) {
				t.Errorf("the answer repeats what it was sent: %s", rec.Body)
			}
			if len(fake.checks) != 0 {
				t.Errorf("the engine was asked %d checks", len(fake.checks))
			}
		})
	}
}

func TestCheckWithPasswordSHA1(t *testing.T) {
	c := loadContract(t)
	l := filterOf(t, breached.Plain, "password")
	outside := notIn(t, l)
	allow := engine.Decision{Action: rules.Allow, AttemptID: "AQID", Limits: []engine.Limit{{Rule: "login-account", Remaining: 4, Reset: time.Minute}}}
	slow := engine.Decision{Action: rules.Slow, Rule: "login-account", RetryAfter: 41 * time.Second}
	check := func(extra string) string {
		return `{"flow":"login","account":"alice@example.com","ip":"203.0.113.7"` + extra + `}`
	}
	for _, tc := range []struct {
		name         string
		edit         func(*Config)
		decision     engine.Decision
		body         string
		wantStatus   int
		wantBreached any // true, false, nil for absent, or an error code
	}{
		{"breached", withFilter(l), allow, check(`,"password_sha1":"` + sha1Hex("password") + `"`), 200, true},
		{"not breached", withFilter(l), allow, check(`,"password_sha1":"` + strings.ToUpper(sha1Hex(outside)) + `"`), 200, false},
		{"slowed, still answered", withFilter(l), slow, check(`,"password_sha1":"` + sha1Hex("password") + `"`), 429, true},
		{"not asked", withFilter(l), allow, check(""), 200, nil},
		{"null is not asked", withFilter(l), allow, check(`,"password_sha1":null`), 200, nil},
		{"no filter", withFilter(nil), allow, check(`,"password_sha1":"` + sha1Hex("password") + `"`), 200, nil},
		{"NTLM filter", withFilter(filterOf(t, breached.NTLM, "password")), allow, check(`,"password_sha1":"` + sha1Hex("password") + `"`), 200, nil},
		{"invalid", withFilter(l), allow, check(`,"password_sha1":"password"`), 400, "invalid_field"},
		{"invalid without a filter", withFilter(nil), allow, check(`,"password_sha1":""`), 400, "invalid_field"},
		{"a number", withFilter(l), allow, check(`,"password_sha1":5`), 400, "invalid_field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := &fakeDecider{set: rules.Default(), decision: tc.decision}
			api := newTestAPI(t, fake, tc.edit)
			req, rec := api.do(http.MethodPost, "/v1/check", tc.body, api.check)
			c.checkAnswer(t, req, rec)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if code, ok := tc.wantBreached.(string); ok {
				if got := errorCode(rec.Body.Bytes()); got != code || len(fake.checks) != 0 {
					t.Errorf("code %s, %d checks decided; want %s before any", got, len(fake.checks), code)
				}
				return
			}
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("%s: %v", rec.Body, err)
			}
			got, present := body["breached"]
			if tc.wantBreached == nil && present || tc.wantBreached != nil && got != tc.wantBreached {
				t.Errorf("breached %v (present %v), want %v: %s", got, present, tc.wantBreached, rec.Body)
			}
			// The rest of the answer is the check's own, as without it.
			delete(body, "breached")
			var wantBody map[string]any
			if err := json.Unmarshal(appendCheck(nil, &tc.decision), &wantBody); err != nil {
				t.Fatal(err)
			}
			if g, w := mustJSON(t, body), mustJSON(t, wantBody); g != w {
				t.Errorf("answer %s, want %s and breached", g, w)
			}
			if len(fake.checks) != 1 {
				t.Fatalf("%d checks decided, want 1", len(fake.checks))
			}
		})
	}
}

func mustJSON(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestAppendBreachedMatchesEncodingJSON(t *testing.T) {
	d := engine.Decision{Action: rules.Allow, AttemptID: "a"}
	for _, in := range []bool{true, false} {
		got := appendBreached(appendCheck(nil, &d), breachedAnswer{asked: true, in: in})
		r := struct {
			refCheck
			Breached bool `json:"breached"`
		}{refCheck{Decision: "allow", AttemptID: "a", Trust: "none", Limits: []refLimit{}, Shadow: []refShadow{}}, in}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("got %s\nwant %s", got, want)
		}
	}
	if got, want := string(appendBreached(appendCheck(nil, &d), breachedAnswer{})), string(appendCheck(nil, &d)); got != want {
		t.Errorf("not asked: %s, want %s", got, want)
	}
}

func TestRulesShowTheFilter(t *testing.T) {
	c := loadContract(t)
	l := filterOf(t, breached.Plain, "123456", "password")
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want *breachedJSON
	}{
		{"loaded", withFilter(l), &breachedJSON{
			Source: l.Source, Format: "plain", Digest: "sha1", Entries: 2, MinCount: 0,
			BuiltAt: breachedtest.BuiltAt, LoadedAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC),
			Bytes: l.Filter.Info().Bytes, Checksum: l.Filter.Info().Checksum,
		}},
		{"none", withFilter(nil), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newTestAPI(t, &fakeDecider{set: rules.Default()}, tc.edit)
			for _, call := range []struct{ method, path string }{{http.MethodGet, "/v1/rules"}, {http.MethodPost, "/v1/rules/reload"}} {
				req, rec := api.do(call.method, call.path, "", api.admin)
				c.checkAnswer(t, req, rec)
				var body struct {
					Breached *breachedJSON `json:"breached"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
					t.Fatal(err)
				}
				if g, w := mustJSON(t, body.Breached), mustJSON(t, tc.want); g != w {
					t.Errorf("%s %s: breached %s, want %s", call.method, call.path, g, w)
				}
			}
		})
	}
}
