package httpapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// show renders a request's fields for comparison: nil pointers as <nil>.
func show(ps ...any) string {
	out := ""
	for _, p := range ps {
		switch v := p.(type) {
		case *string:
			if v == nil {
				out += "<nil> "
			} else {
				out += fmt.Sprintf("%q ", *v)
			}
		case *int64:
			if v == nil {
				out += "<nil> "
			} else {
				out += fmt.Sprintf("%d ", *v)
			}
		}
	}
	return out
}

func (r *checkRequest) show() string {
	s := show(r.Flow, r.Account, r.IP, r.Recipient, r.DeviceToken, r.Cost)
	if r.PasswordSHA1 != nil {
		s += "password_sha1=" + show(r.PasswordSHA1)
	}
	return s
}

func (r *passwordCheckRequest) show() string { return show(r.SHA1) }

func (r *reportRequest) show() string { return show(r.AttemptID, r.Outcome) }

func (r *accountRequest) show() string { return show(r.Account) }

func TestParseFlatReadsWhatClientsSend(t *testing.T) {
	for _, tt := range []struct {
		body string
		want string
	}{
		{`{"flow":"login","account":"alice@example.com","ip":"203.0.113.7"}`, `"login" "alice@example.com" "203.0.113.7" <nil> <nil> <nil> `},
		{" {\n\t\"flow\" : \"otp_send\" ,\r\n \"recipient\":\"+1 (555) 010-0000\", \"ip\":\"2001:db8::1\", \"cost\": 25 }\n", `"otp_send" <nil> "2001:db8::1" "+1 (555) 010-0000" <nil> 25 `},
		{`{"flow":"login","ip":"10.0.0.1","device_token":"eyJ.a-b_c","cost":-0,"account":"Ǆemal ＡＬＩＣＥ"}`, `"login" "Ǆemal ＡＬＩＣＥ" "10.0.0.1" <nil> "eyJ.a-b_c" 0 `},
		{`{}`, `<nil> <nil> <nil> <nil> <nil> <nil> `},
		{`{"account":""}`, `<nil> "" <nil> <nil> <nil> <nil> `},
	} {
		var fast, ref checkRequest
		if !parseFlat(tt.body, &fast) {
			t.Errorf("parseFlat(%q) refused it, want it read", tt.body)
			continue
		}
		if err := decodeJSON([]byte(tt.body), &ref); err != nil {
			t.Fatalf("encoding/json refuses %q: %v", tt.body, err)
		}
		if got := fast.show(); got != tt.want || got != ref.show() {
			t.Errorf("parseFlat(%q) = %s, want %s (encoding/json: %s)", tt.body, got, tt.want, ref.show())
		}
	}
}

func TestParseFlatLeavesTheRestToEncodingJSON(t *testing.T) {
	for _, body := range []string{
		``,
		` `,
		`[]`,
		`null`,
		`{`,
		`{"flow":"login"`,
		`{"flow":"login",}`,
		`{"flow" "login"}`,
		`{"flow":"login"} {}`,
		`{"flow":"login"}x`,
		`{"flow":"log\nin"}`,
		`{"flow":"log\u0069n"}`,
		`{"flow":"log\"in"}`,
		`{"fl\u006fw":"login"}`,
		`{"Flow":"login"}`,
		`{"FLOW":"login"}`,
		`{"flow":"login","flow":"otp_send"}`,
		`{"flow":null}`,
		`{"flow":true}`,
		`{"flow":1}`,
		`{"cost":"1"}`,
		`{"cost":1.0}`,
		`{"cost":1e3}`,
		`{"cost":01}`,
		`{"cost":-}`,
		`{"cost":9223372036854775808}`,
		`{"cost":{}}`,
		`{"cost":[1]}`,
		`{"unknown":"x"}`,
		`{"slots":"x"}`,
		"{\"account\":\"\xff\"}",
		"{\"account\":\"\xed\xa0\x80\"}",
		"{\"acc\xc3\xa9\":\"x\"}",
		"\xef\xbb\xbf{}",
	} {
		var r checkRequest
		if parseFlat(body, &r) {
			t.Errorf("parseFlat(%q) read it as %s, want it left to encoding/json", body, r.show())
		}
	}
}

// decodeCheck decodes body as a check request through encoding/json, and
// returns the error's text, "" for none.
func decodeCheck(body string) string {
	if err := decodeJSON([]byte(body), &checkRequest{}); err != nil {
		return err.Error()
	}
	return ""
}

func TestDecodeFallsBackWithTheSameErrors(t *testing.T) {
	// A body parseFlat refuses gets the answer encoding/json gives it, as
	// before the fast path existed.
	for _, tt := range []struct {
		body string
		want string
	}{
		{`{"flow":1}`, "invalid_field: flow: must be a string, not number"},
		{`{"cost":1.5}`, "invalid_field: cost: must be an integer, not number 1.5"},
		{`{"nope":1}`, "unknown_field: nope: unknown field"},
		{`{"flow":"login"} {}`, "invalid_json: body: more than one JSON value"},
		{``, "invalid_json: body: empty, a JSON object is required"},
	} {
		if got := decodeCheck(tt.body); got != tt.want {
			t.Errorf("decodeJSON(%q) error = %q, want %q", tt.body, got, tt.want)
		}
		if parseFlat(tt.body, &checkRequest{}) {
			t.Errorf("parseFlat(%q) read it, want it left to encoding/json", tt.body)
		}
	}
}

func TestDecodeIsStrict(t *testing.T) {
	for _, tt := range []struct {
		body string
		want string
	}{
		{`{"flow":"login","flow":"otp_send"}`, "invalid_json: flow: given twice; each field may appear once"},
		{`{"flow":"login","ip":"10.0.0.1","fl\u006fw":"otp_send"}`, "invalid_json: flow: given twice; each field may appear once"},
		{`{"cost":1,"cost":1000}`, "invalid_json: cost: given twice; each field may appear once"},
		{`{"FLOW":"login"}`, "unknown_field: FLOW: unknown field (field names are case-sensitive)"},
		{`{"flow":"login","Flow":"x"}`, "unknown_field: Flow: unknown field (field names are case-sensitive)"},
		{"{\"device_to\u212aen\":\"x\"}", "unknown_field: device_to\u212aen: unknown field (field names are case-sensitive)"},
		{`{"Account":null}`, "unknown_field: Account: unknown field (field names are case-sensitive)"},
		{"{\"account\":\"ali\xffce\"}", "invalid_json: body: not valid UTF-8"},
		{"{\"account\":\"ali\xed\xa0\x80ce\"}", "invalid_json: body: not valid UTF-8"},
		{`{"account":"\ud800"}`, "invalid_json: body: a \\u escape is half a surrogate pair, not a character"},
		{`{"account":"x\udc00"}`, "invalid_json: body: a \\u escape is half a surrogate pair, not a character"},
		{`{"account":"\ud83d\u0041"}`, "invalid_json: body: a \\u escape is half a surrogate pair, not a character"},
		{`{"account":"\ud83d"}`, "invalid_json: body: a \\u escape is half a surrogate pair, not a character"},
		{`{"acc\ud800ount":"x"}`, "unknown_field: acc\ufffdount: unknown field"},
		{`{"account":"\ud83d\ude00"}`, ""},
		{`{"account":"a\\ud800"}`, ""},
		{`{"account":"\u00e9\"\\\/"}`, ""},
		{`{"fl\u006fw":"login"}`, ""},
		{`null`, ""},
	} {
		if got := decodeCheck(tt.body); got != tt.want {
			t.Errorf("decodeJSON(%q) error = %q, want %q", tt.body, got, tt.want)
		}
	}
	for _, body := range []string{`{"outcome":"success","Outcome":"failure"}`, `{"attempt_id":"a","attempt_id":"b"}`} {
		if err := decodeJSON([]byte(body), &reportRequest{}); err == nil {
			t.Errorf("report body %s accepted", body)
		}
	}
	if err := decodeJSON([]byte(`{"account":"a","ACCOUNT":"b"}`), &accountRequest{}); err == nil {
		t.Errorf("reset body with a case variant accepted")
	}
}

// fuzzFlat holds parseFlat to encoding/json: whatever it reads, encoding/json
// reads the same way, without error.
func fuzzFlat[T any, P interface {
	*T
	flatTarget
	show() string
}](t *testing.T, body string) {
	var fast, ref T
	if !parseFlat(body, P(&fast)) {
		return
	}
	if err := decodeJSON([]byte(body), P(&ref)); err != nil {
		t.Fatalf("parseFlat read %q as %s; encoding/json refuses it: %v", body, P(&fast).show(), err)
	}
	if got, want := P(&fast).show(), P(&ref).show(); got != want {
		t.Fatalf("parseFlat read %q as %s; encoding/json as %s", body, got, want)
	}
}

func FuzzParseFlat(f *testing.F) {
	for _, s := range []string{
		`{"flow":"login","account":"alice@example.com","ip":"203.0.113.7","cost":3}`,
		`{"attempt_id":"AQID","outcome":"success"}`,
		`{"account":"bob"}`,
		`{"flow":"login","ip":"203.0.113.7","password_sha1":"5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8"}`,
		`{"sha1":"5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8"}`,
		` {"cost":-0 , "device_token":"x"} `,
		`{"flow":"a","flow":"b"}`,
		`{"Outcome":"failure"}`,
		`{"flow":"a","fl\u006fw":"b"}`,
		`{"account":"\ud83d\ude00","cost":{"a":[1,{"b":"\ud800"}]}}`,
		"{\"account\":\"\xff\"}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fuzzFlat[checkRequest](t, body)
		fuzzFlat[reportRequest](t, body)
		fuzzFlat[accountRequest](t, body)
		fuzzFlat[passwordCheckRequest](t, body)
		fuzzStrict(t, body)
	})
}

// fuzzStrict holds decodeJSON to its strictness: a body it accepts is UTF-8,
// and its top-level members, as encoding/json's tokenizer reads them, are
// distinct fields of the request named exactly.
func fuzzStrict(t *testing.T, body string) {
	if decodeJSON([]byte(body), &checkRequest{}) != nil {
		return
	}
	if !utf8.ValidString(body) {
		t.Fatalf("decodeJSON accepted %q, which is not UTF-8", body)
	}
	names := fieldNames(reflect.TypeFor[*checkRequest]())
	dec := json.NewDecoder(strings.NewReader(body))
	seen := map[string]bool{}
	depth, key := 0, false
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		switch v := tok.(type) {
		case json.Delim:
			if v == '{' || v == '[' {
				depth++
				key = depth == 1 && v == '{'
			} else {
				depth--
				key = depth == 1
			}
			continue
		case string:
			if key {
				if !names[v] || seen[v] {
					t.Fatalf("decodeJSON accepted %q with member %q unknown or repeated", body, v)
				}
				seen[v] = true
				key = false
				continue
			}
		}
		key = depth == 1
	}
}
