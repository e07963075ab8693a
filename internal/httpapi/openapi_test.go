package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/guardian-sec/guardian/internal/apitest"
	"github.com/guardian-sec/guardian/internal/audit"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/fleet"
	"github.com/guardian-sec/guardian/internal/incident"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/lists"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/revocation"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// specPath is the contract the handlers are kept in step with.
const specPath = "../../api/openapi.yaml"

// loadSpec loads api/openapi.yaml and fails tb unless it is a valid OpenAPI
// document, its examples included.
func loadSpec(tb testing.TB) *openapi3.T {
	tb.Helper()
	return apitest.Load(tb, specPath).Doc
}

// contract is api/openapi.yaml with a router over its operations, for
// checking real requests and answers against it.
type contract struct {
	*apitest.Contract
	doc *openapi3.T
}

func loadContract(tb testing.TB) *contract {
	tb.Helper()
	c := apitest.Load(tb, specPath)
	return &contract{Contract: c, doc: c.Doc}
}

// checkAnswer fails tb unless rec is an answer the contract allows to req.
func (c *contract) checkAnswer(tb testing.TB, req *http.Request, rec *httptest.ResponseRecorder) {
	tb.Helper()
	c.CheckAnswer(tb, req, rec)
}

// specRoutes lists the operations of doc as "METHOD /path".
func specRoutes(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// missing returns the elements of want that are not in have.
func missing(want, have []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(have, w) {
			out = append(out, w)
		}
	}
	return out
}

func TestSpecIsOpenAPI31(t *testing.T) {
	doc := loadSpec(t)
	if got, want := doc.OpenAPI, "3.1.0"; got != want {
		t.Errorf("openapi: got %q, want %q", got, want)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("kin-openapi does not read %s as OpenAPI 3.1", specPath)
	}
}

func TestSpecRoutesMatchHandlers(t *testing.T) {
	doc := loadSpec(t)
	// New only registers routes; none of its collaborators is called.
	code := New(Config{}).Routes()
	slices.Sort(code)
	spec := specRoutes(doc)
	if len(code) == 0 || len(spec) == 0 {
		t.Fatalf("routes: code has %d, spec has %d; want both non-empty", len(code), len(spec))
	}
	if m := missing(code, spec); len(m) > 0 {
		t.Errorf("routes the handlers serve but %s does not declare:\n\t%s", specPath, strings.Join(m, "\n\t"))
	}
	if m := missing(spec, code); len(m) > 0 {
		t.Errorf("routes %s declares but the handlers do not serve:\n\t%s", specPath, strings.Join(m, "\n\t"))
	}
}

// handlerCodes parses the package's source for every newError call and
// returns each error code with the statuses it is sent with.
func handlerCodes(tb testing.TB) map[string][]int {
	tb.Helper()
	statusByName := map[string]int{
		"StatusBadRequest":            http.StatusBadRequest,
		"StatusUnauthorized":          http.StatusUnauthorized,
		"StatusForbidden":             http.StatusForbidden,
		"StatusNotFound":              http.StatusNotFound,
		"StatusMethodNotAllowed":      http.StatusMethodNotAllowed,
		"StatusConflict":              http.StatusConflict,
		"StatusRequestEntityTooLarge": http.StatusRequestEntityTooLarge,
		"StatusInternalServerError":   http.StatusInternalServerError,
		"StatusServiceUnavailable":    http.StatusServiceUnavailable,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		tb.Fatal(err)
	}
	codes := map[string][]int{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			tb.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if id, ok := call.Fun.(*ast.Ident); !ok || id.Name != "newError" || len(call.Args) != 3 {
				return true
			}
			sel, ok := call.Args[0].(*ast.SelectorExpr)
			lit, ok2 := call.Args[1].(*ast.BasicLit)
			if !ok || !ok2 || lit.Kind != token.STRING {
				tb.Errorf("%s: newError with a status or code that is not a constant; this test cannot follow it", fset.Position(call.Pos()))
				return true
			}
			status, known := statusByName[sel.Sel.Name]
			if !known {
				tb.Errorf("%s: status http.%s: add it to handlerCodes", fset.Position(call.Pos()), sel.Sel.Name)
				return true
			}
			code, err := strconv.Unquote(lit.Value)
			if err != nil {
				tb.Fatal(err)
			}
			if !slices.Contains(codes[code], status) {
				codes[code] = append(codes[code], status)
			}
			return true
		})
	}
	if len(codes) == 0 {
		tb.Fatal("found no newError calls in the package source")
	}
	return codes
}

// narrowedCodes returns the error codes a response of the contract may
// carry: those its schema narrows Error to through allOf, or nil when the
// response is not an error.
func narrowedCodes(resp *openapi3.Response) []string {
	mt := resp.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return nil
	}
	s := mt.Schema.Value
	if len(s.AllOf) != 2 || !strings.HasSuffix(s.AllOf[0].Ref, "/Error") {
		return nil
	}
	code := s.AllOf[1].Value.Properties["error"].Value.Properties["code"].Value
	var out []string
	for _, v := range code.Enum {
		out = append(out, v.(string))
	}
	if c, ok := code.Const.(string); ok {
		out = append(out, c)
	}
	return out
}

func TestSpecErrorCodesMatchHandlers(t *testing.T) {
	doc := loadSpec(t)
	code := handlerCodes(t)

	var enum []string
	for _, v := range doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value.Enum {
		enum = append(enum, v.(string))
	}
	var handlers []string
	for c := range code {
		handlers = append(handlers, c)
	}
	slices.Sort(handlers)
	if m := missing(handlers, enum); len(m) > 0 {
		t.Errorf("codes the handlers send but the Error schema does not list: %v", m)
	}
	if m := missing(enum, handlers); len(m) > 0 {
		t.Errorf("codes the Error schema lists but no handler sends: %v", m)
	}

	// Every code a response documents must be sent with that response's
	// status, and every code must be documented on some response.
	documented := map[string]bool{}
	check := func(where string, status int, resp *openapi3.Response) {
		for _, c := range narrowedCodes(resp) {
			documented[c] = true
			if !slices.Contains(code[c], status) {
				t.Errorf("%s: %d lists code %s, which the handlers send with status %v", where, status, c, code[c])
			}
		}
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for s, ref := range op.Responses.Map() {
				status, err := strconv.Atoi(s)
				if err != nil {
					t.Errorf("%s %s: response %q: want a status code", method, path, s)
					continue
				}
				check(method+" "+path, status, ref.Value)
			}
		}
	}
	check("components.responses.NotFound", http.StatusNotFound, doc.Components.Responses["NotFound"].Value)
	check("components.responses.MethodNotAllowed", http.StatusMethodNotAllowed, doc.Components.Responses["MethodNotAllowed"].Value)
	for _, c := range handlers {
		if !documented[c] {
			t.Errorf("code %s is on no response of %s", c, specPath)
		}
	}
}

// example is one example value of the contract and the schema it
// illustrates.
type example struct {
	where  string
	value  any
	schema *openapi3.SchemaRef
}

// mediaExamples lists the examples of content, and reports whether it has any.
func mediaExamples(where string, content openapi3.Content) ([]example, bool) {
	var out []example
	for name, mt := range content {
		if mt.Example != nil {
			out = append(out, example{where + " " + name, mt.Example, mt.Schema})
		}
		for ex, ref := range mt.Examples {
			out = append(out, example{where + " " + name + " " + ex, ref.Value.Value, mt.Schema})
		}
	}
	return out, len(out) > 0
}

// specExamples lists every example of doc: of request bodies, responses,
// parameters, headers and component schemas. It fails tb for a request
// body or a response with content but no example.
func specExamples(tb testing.TB, doc *openapi3.T) []example {
	tb.Helper()
	var out []example
	add := func(where string, content openapi3.Content) {
		exs, ok := mediaExamples(where, content)
		if !ok && len(content) > 0 {
			tb.Errorf("%s: no example", where)
		}
		out = append(out, exs...)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			if op.RequestBody != nil {
				add(where+" request", op.RequestBody.Value.Content)
			}
			for _, p := range op.Parameters {
				if p.Value.Example != nil {
					out = append(out, example{where + " " + p.Value.Name, p.Value.Example, p.Value.Schema})
				}
			}
			for status, ref := range op.Responses.Map() {
				if ref.Ref == "" {
					add(where+" "+status, ref.Value.Content)
				}
			}
		}
	}
	for name, ref := range doc.Components.Responses {
		add("components.responses."+name, ref.Value.Content)
		for h, hr := range ref.Value.Headers {
			if hr.Value.Example != nil {
				out = append(out, example{"components.responses." + name + " " + h, hr.Value.Example, hr.Value.Schema})
			}
		}
	}
	for name, ref := range doc.Components.Headers {
		if ref.Value.Example == nil {
			tb.Errorf("components.headers.%s: no example", name)
			continue
		}
		out = append(out, example{"components.headers." + name, ref.Value.Example, ref.Value.Schema})
	}
	for name, ref := range doc.Components.Schemas {
		for i, v := range ref.Value.Examples {
			out = append(out, example{"components.schemas." + name + " " + strconv.Itoa(i), v, ref})
		}
	}
	return out
}

func TestSpecExamplesMatchTheirSchemas(t *testing.T) {
	doc := loadSpec(t)
	exs := specExamples(t, doc)
	if len(exs) == 0 {
		t.Fatal("found no examples")
	}
	for _, ex := range exs {
		if ex.schema == nil {
			t.Errorf("%s: example without a schema", ex.where)
			continue
		}
		if err := ex.schema.Value.VisitJSON(ex.value, openapi3.EnableJSONSchema2020()); err != nil {
			t.Errorf("%s: example does not match its schema: %v", ex.where, err)
		}
	}
}

// TestSpecSchemasRefuse checks that the schemas are as strict as the
// handlers: values the code refuses or never sends do not validate.
func TestSpecSchemasRefuse(t *testing.T) {
	doc := loadSpec(t)
	schema := func(name string) *openapi3.Schema { return doc.Components.Schemas[name].Value }
	const rate = `"name": "r", "flows": ["login"], "key": "account", "type": "rate", "mode": "enforce", "action": "slow", "on_store_error": "local", "limit": 1`
	tests := []struct {
		name   string
		schema string
		body   string
	}{
		{"check unknown field", "CheckRequest", `{"flow": "login", "ip": "203.0.113.7", "acount": "a"}`},
		{"check no flow", "CheckRequest", `{"ip": "203.0.113.7"}`},
		{"check no ip", "CheckRequest", `{"flow": "login"}`},
		{"check unknown flow", "CheckRequest", `{"flow": "signup", "ip": "203.0.113.7"}`},
		{"check cost 0", "CheckRequest", `{"flow": "login", "ip": "203.0.113.7", "cost": 0}`},
		{"check cost 1001", "CheckRequest", `{"flow": "login", "ip": "203.0.113.7", "cost": 1001}`},
		{"check cost fraction", "CheckRequest", `{"flow": "login", "ip": "203.0.113.7", "cost": 1.5}`},
		{"check empty account", "CheckRequest", `{"flow": "login", "ip": "203.0.113.7", "account": ""}`},
		{"check blank recipient", "CheckRequest", `{"flow": "otp_send", "ip": "203.0.113.7", "recipient": "  "}`},
		{"report unknown outcome", "ReportRequest", `{"attempt_id": "a", "outcome": "maybe"}`},
		{"report no attempt", "ReportRequest", `{"outcome": "failure"}`},
		{"reset unknown field", "ResetRequest", `{"account": "a", "force": true}`},
		{"allow with a rule", "CheckResponse", `{"decision": "allow", "rule": "r", "retry_after_ms": 0, "attempt_id": "a", "degraded": false, "trust": "none", "limits": [], "shadow": []}`},
		{"allow without attempt", "CheckResponse", `{"decision": "allow", "retry_after_ms": 0, "degraded": false, "trust": "none", "limits": [], "shadow": []}`},
		{"slow with attempt", "CheckResponse", `{"decision": "slow", "rule": "r", "retry_after_ms": 1000, "attempt_id": "a", "degraded": false, "trust": "none", "limits": [], "shadow": []}`},
		{"slow without wait", "CheckResponse", `{"decision": "slow", "rule": "r", "retry_after_ms": 0, "degraded": false, "trust": "none", "limits": [], "shadow": []}`},
		{"block with wait", "CheckResponse", `{"decision": "block", "rule": "r", "retry_after_ms": 1000, "degraded": false, "trust": "none", "limits": [], "shadow": []}`},
		{"check answer without shadow", "CheckResponse", `{"decision": "block", "rule": "r", "retry_after_ms": 0, "degraded": false, "trust": "none", "limits": []}`},
		{"rate rule without burst", "Rule", `{` + rate + `, "count": "attempts", "per": "1m"}`},
		{"rate rule with hold", "Rule", `{` + rate + `, "count": "attempts", "per": "1m", "burst": 1, "hold": "90d"}`},
		{"rate rule with a prefix for key account", "Rule", `{` + rate + `, "count": "attempts", "per": "1m", "burst": 1, "ipv4_prefix": 24}`},
		{"rate rule per in Go syntax", "Rule", `{` + rate + `, "count": "attempts", "per": "1m0s0.5ms", "burst": 1}`},
		{"consecutive rule with per", "Rule", `{"name": "r", "flows": ["login"], "key": "account", "type": "consecutive_failures", "mode": "enforce", "action": "block", "on_store_error": "local", "limit": 100, "hold": "90d", "per": "1m"}`},
		{"failure_rate rule without hysteresis", "Rule", `{"name": "r", "flows": ["login"], "key": "global", "type": "failure_rate", "mode": "enforce", "action": "challenge", "on_store_error": "local", "limit": 100, "per": "1m"}`},
		{"ip rule without prefixes", "Rule", `{"name": "r", "flows": ["login"], "key": "ip", "type": "rate", "mode": "enforce", "action": "slow", "on_store_error": "local", "limit": 1, "count": "failures", "per": "1m", "burst": 1}`},
		{"shadow key in clear", "ShadowRuleReport", `{"rule": "r", "evaluated": 1, "would_slow": 1, "would_block": 0, "would_challenge": 0, "top_keys": [{"key": "alice@example.com", "hits": 1}]}`},
		{"eleven top keys", "ShadowRuleReport", `{"rule": "r", "evaluated": 11, "would_slow": 11, "would_block": 0, "would_challenge": 0, "top_keys": [` + strings.Repeat(`{"key": "global", "hits": 1},`, 10) + `{"key": "global", "hits": 1}]}`},
		{"error with an unknown code", "Error", `{"error": {"code": "bad_request", "message": "m"}}`},
		{"error with extra field", "Error", `{"error": {"code": "internal", "message": "m", "detail": "d"}}`},
		{"status without limits", "AccountStatus", `{"consecutive_failures": 0, "blocked": false, "next_allowed_ms": 0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v any
			if err := json.Unmarshal([]byte(tt.body), &v); err != nil {
				t.Fatal(err)
			}
			s := schema(tt.schema)
			if s == nil {
				t.Fatalf("no schema %s", tt.schema)
			}
			if err := s.VisitJSON(v, openapi3.EnableJSONSchema2020()); err == nil {
				t.Errorf("%s accepts %s, want it refused", tt.schema, tt.body)
			}
		})
	}
}

// fakeDecider answers with canned results and records what it was asked.
type fakeDecider struct {
	decision engine.Decision
	report   engine.ReportResult
	status   engine.AccountStatus
	// err, when set, is what every call but Rules returns.
	err error
	set *rules.Set

	checks []engine.CheckRequest
}

var _ Decider = (*fakeDecider)(nil)

func (f *fakeDecider) Check(_ context.Context, req engine.CheckRequest) (engine.Decision, error) {
	f.checks = append(f.checks, req)
	return f.decision, f.err
}

func (f *fakeDecider) Report(context.Context, string, engine.Outcome) (engine.ReportResult, error) {
	return f.report, f.err
}

func (f *fakeDecider) Status(context.Context, string) (engine.AccountStatus, error) {
	return f.status, f.err
}

func (f *fakeDecider) Reset(context.Context, string) error { return f.err }

func (f *fakeDecider) Rules() *rules.Set { return f.set }

// testAPI is an API over a fakeDecider, with tokens of both scopes.
type testAPI struct {
	*API
	admin, check string
}

// newTestAPI builds an API over fake; edit, when not nil, adjusts the
// configuration first.
func newTestAPI(tb testing.TB, fake *fakeDecider, edit func(*Config)) *testAPI {
	tb.Helper()
	revoked := revocation.New(revocation.Config{})
	svc := tokens.NewService(secret.Generate()).WithRevocations(revoked)
	cfg := Config{
		Engine:       fake,
		Tokens:       svc,
		Revocations:  revoked,
		Lists:        lists.New(lists.Config{Store: memstore.New(memstore.Config{}), Rules: fake.Rules, Hasher: keys.NewHasher(secret.Generate())}),
		Shadow:       shadow.NewFleet(shadow.FleetConfig{Book: shadow.NewBook()}),
		Fleet:        fleet.New(fleet.Config{Rules: fake.Rules}),
		Audit:        audit.New(audit.Config{Key: secret.Generate(), Metrics: metrics.New(prometheus.NewRegistry())}),
		Reload:       func(context.Context, string) (*rules.Set, error) { return fake.set, nil },
		StoreHealthy: func() bool { return true },
		Gatherer:     prometheus.NewRegistry(),
		Incident:     incident.NewFleet(incident.FleetConfig{Book: incident.NewBook(incident.BookConfig{}), Instance: "a", Name: keys.NewHasher(secret.Generate()).SubjectPseudonym}),
		Pseudonyms: func(_ context.Context, kind, value string) (string, error) {
			return keys.NewHasher(secret.Generate()).PseudonymOf(nil, kind, value)
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	issue := func(s tokens.Scope) string {
		tok, err := svc.Issue(s, "test", time.Hour, time.Now())
		if err != nil {
			tb.Fatal(err)
		}
		return tok
	}
	return &testAPI{API: New(cfg), admin: issue(tokens.ScopeAdmin), check: issue(tokens.ScopeCheck)}
}

// do sends one request with the given bearer token ("" for none).
func (a *testAPI) do(method, target, body, bearer string) (*http.Request, *httptest.ResponseRecorder) {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	return req, rec
}

// failingRevoker refuses every revocation with err.
type failingRevoker struct{ err error }

func (f failingRevoker) Revoke(context.Context, string, time.Time) error { return f.err }

// errorCode returns the code of an error body, or "".
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

// scopesOf returns the scopes an operation's security accepts; nil means
// no token is needed.
func scopesOf(doc *openapi3.T, op *openapi3.Operation) []string {
	sec := doc.Security
	if op.Security != nil {
		sec = *op.Security
	}
	var out []string
	for _, req := range sec {
		out = append(out, req["bearerAuth"]...)
	}
	return out
}

// TestSpecSecurityMatchesHandlers calls every operation without a token
// and with a token of each scope, and checks that the handlers let in
// exactly what the operation's security declares.
func TestSpecSecurityMatchesHandlers(t *testing.T) {
	c := loadContract(t)
	fake := &fakeDecider{set: rules.Default(), decision: engine.Decision{Action: rules.Allow, AttemptID: "a"}}
	api := newTestAPI(t, fake, nil)
	tokenOf := map[string]string{"": "", "check": api.check, "admin": api.admin}
	for _, route := range specRoutes(c.doc) {
		method, path, _ := strings.Cut(route, " ")
		op := c.doc.Paths.Value(path).GetOperation(method)
		scopes := scopesOf(c.doc, op)
		for _, scope := range []string{"", "check", "admin"} {
			name := route + " scope " + scope
			if scope == "" {
				name = route + " without token"
			}
			t.Run(name, func(t *testing.T) {
				req, rec := api.do(method, path, "", tokenOf[scope])
				c.checkAnswer(t, req, rec)
				var want string
				switch {
				case scopes == nil:
				case scope == "":
					want = "unauthorized"
				case !slices.Contains(scopes, scope):
					want = "forbidden"
				}
				got := errorCode(rec.Body.Bytes())
				denied := got == "unauthorized" || got == "forbidden"
				if want != "" && got != want || want == "" && denied {
					t.Errorf("got %d %s, want code %q (spec scopes %v)", rec.Code, rec.Body.Bytes(), want, scopes)
				}
			})
		}
	}
}

// TestHandlerAnswersMatchSpec runs requests through the handlers over a
// fake engine, covering the answers a real engine gives only in rare
// states, and checks each against the contract.
func TestHandlerAnswersMatchSpec(t *testing.T) {
	c := loadContract(t)
	subject := keys.NewHasher(secret.Generate()).Pseudonym(keys.PseudonymNetwork, "203.0.113.0/24")
	custom, err := rules.Parse("rules.yaml", []byte(`version: 1
rules:
  - name: ip-rate
    flows: [login, otp_verify]
    key: ip
    type: rate
    limit: 10
    per: 1m30s
    ipv6_prefix: 56
    on_store_error: closed
  - name: pair-hard-stop
    flows: [login]
    key: account+ip
    type: consecutive_failures
    limit: 20
    action: slow
    hold: 1d12h
    mode: shadow
  - name: global-failures
    flows: [login, password_reset]
    key: global
    type: failure_rate
    limit: 50
    per: 1m
    hysteresis: 0s
    on_store_error: open
`), time.Date(2026, 11, 29, 10, 0, 0, 500, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	limits := []engine.Limit{{Rule: "login-account", Remaining: 0, Reset: 40*time.Second + time.Microsecond}}
	quota := &engine.Quota{Rule: "login-account", Burst: 5, Window: 5 * time.Minute, Remaining: 0, Reset: 40*time.Second + time.Microsecond}

	tests := []struct {
		name   string
		fake   fakeDecider
		edit   func(*Config)
		method string
		path   string
		body   string
		admin  bool
		// wantStatus and wantCode are the status and, for an error, code.
		wantStatus int
		wantCode   string
		// wantHeaders are headers whose value must be exactly this ("" for
		// absent).
		wantHeaders map[string]string
	}{
		{
			name: "check allow with headers",
			fake: fakeDecider{decision: engine.Decision{Action: rules.Allow, AttemptID: "a", Limits: []engine.Limit{{Rule: "login-account", Remaining: 4, Reset: 12*time.Second + time.Millisecond}},
				Quota: &engine.Quota{Rule: "login-account", Burst: 5, Window: 5 * time.Minute, Remaining: 4, Reset: 12*time.Second + time.Millisecond}}},
			method: "POST", path: "/v1/check", body: `{"flow": "login", "account": "alice@example.com", "ip": "203.0.113.7"}`,
			wantStatus: 200,
			wantHeaders: map[string]string{
				"RateLimit-Policy": `"login-account";q=5;w=300`,
				"RateLimit":        `"login-account";r=4;t=13`,
				"Retry-After":      "",
			},
		},
		{
			name:   "check allow without a rate rule",
			fake:   fakeDecider{decision: engine.Decision{Action: rules.Allow, AttemptID: "a"}},
			method: "POST", path: "/v1/check", body: `{"flow": "otp_verify", "ip": "2001:db8::1"}`,
			wantStatus:  200,
			wantHeaders: map[string]string{"RateLimit-Policy": "", "RateLimit": ""},
		},
		{
			name:   "check challenge",
			fake:   fakeDecider{decision: engine.Decision{Action: rules.Challenge, Rule: "login-global-failures", AttemptID: "a"}},
			method: "POST", path: "/v1/check", body: `{"flow": "login", "account": "alice@example.com", "ip": "203.0.113.7"}`,
			wantStatus: 200,
		},
		{
			name: "check slow",
			fake: fakeDecider{decision: engine.Decision{Action: rules.Slow, Rule: "login-account", RetryAfter: 40*time.Second + time.Microsecond, Limits: limits, Quota: quota,
				Shadow: []engine.ShadowTrip{{Rule: "login-ip-strict", Action: rules.Block}, {Rule: "login-ip-slow", Action: rules.Slow, RetryAfter: time.Second}}}},
			method: "POST", path: "/v1/check", body: `{"flow": "login", "account": "alice@example.com", "ip": "203.0.113.7"}`,
			wantStatus: 429,
			wantHeaders: map[string]string{
				"Retry-After":      "41",
				"RateLimit-Policy": `"login-account";q=5;w=300`,
				"RateLimit":        `"login-account";r=0;t=41`,
			},
		},
		{
			name:   "check slow by a closed rule while degraded",
			fake:   fakeDecider{decision: engine.Decision{Action: rules.Slow, Rule: "otp-send-recipient", RetryAfter: time.Second, Degraded: true}},
			method: "POST", path: "/v1/check", body: `{"flow": "otp_send", "ip": "203.0.113.7", "recipient": "+15550100000"}`,
			wantStatus:  429,
			wantHeaders: map[string]string{"Retry-After": "1"},
		},
		{
			name:   "check block",
			fake:   fakeDecider{decision: engine.Decision{Action: rules.Block, Rule: "login-hard-stop", Limits: limits, Quota: quota}},
			method: "POST", path: "/v1/check", body: `{"flow": "login", "account": "alice@example.com", "ip": "203.0.113.7"}`,
			wantStatus:  429,
			wantHeaders: map[string]string{"Retry-After": ""},
		},
		{
			name:   "check refused by the engine",
			fake:   fakeDecider{err: keys.ErrInvalidRecipient},
			method: "POST", path: "/v1/check", body: `{"flow": "otp_send", "ip": "203.0.113.7", "recipient": "12"}`,
			wantStatus: 400, wantCode: "invalid_recipient",
		},
		{
			name:   "check fault",
			fake:   fakeDecider{err: errors.New("disk on fire")},
			method: "POST", path: "/v1/check", body: `{"flow": "login", "ip": "203.0.113.7"}`,
			wantStatus: 500, wantCode: "internal",
		},
		{
			name:   "check body too large",
			method: "POST", path: "/v1/check", body: `{"flow": "login", "ip": "` + strings.Repeat("1", MaxBody) + `"}`,
			wantStatus: 413, wantCode: "body_too_large",
		},
		{
			name:   "report success",
			fake:   fakeDecider{report: engine.ReportResult{DeviceToken: "d.e.f"}},
			method: "POST", path: "/v1/report", body: `{"attempt_id": "a", "outcome": "success"}`,
			wantStatus: 200,
		},
		{
			name:   "report failure",
			method: "POST", path: "/v1/report", body: `{"attempt_id": "a", "outcome": "failure"}`,
			wantStatus: 200,
		},
		{
			name:   "report twice",
			fake:   fakeDecider{err: engine.ErrAlreadyReported},
			method: "POST", path: "/v1/report", body: `{"attempt_id": "a", "outcome": "failure"}`,
			wantStatus: 409, wantCode: "already_reported",
		},
		{
			name:   "report expired",
			fake:   fakeDecider{err: tokens.ErrExpiredAttempt},
			method: "POST", path: "/v1/report", body: `{"attempt_id": "a", "outcome": "failure"}`,
			wantStatus: 400, wantCode: "invalid_attempt",
		},
		{
			name:   "report outcome of the wrong type",
			method: "POST", path: "/v1/report", body: `{"attempt_id": "a", "outcome": true}`,
			wantStatus: 400, wantCode: "invalid_field",
		},
		{
			name:   "rules of every type",
			fake:   fakeDecider{set: custom},
			method: "GET", path: "/v1/rules", admin: true,
			wantStatus: 200,
		},
		{
			name:   "reload",
			fake:   fakeDecider{set: custom},
			method: "POST", path: "/v1/rules/reload", admin: true,
			wantStatus: 200,
		},
		{
			name: "reload refused",
			edit: func(cfg *Config) {
				cfg.Reload = func(context.Context, string) (*rules.Set, error) {
					return nil, rules.Errors{{File: "rules.yaml", Line: 3, Msg: "key: required"}, {File: "rules.yaml", Line: 9, Msg: "per: required for type rate"}}
				}
			},
			method: "POST", path: "/v1/rules/reload", admin: true,
			wantStatus: 400, wantCode: "invalid_rules",
		},
		{
			name: "shadow with top keys",
			edit: func(cfg *Config) {
				set, err := rules.Parse("rules.yaml", []byte(`version: 1
rules:
  - {name: ip-strict, flows: [login], key: ip, type: rate, limit: 1, per: 1m, mode: shadow}
  - {name: global-strict, flows: [login], key: global, type: failure_rate, limit: 1, per: 1m, mode: shadow}
  - {name: quiet, flows: [login], key: ip, type: rate, limit: 100, per: 1m, mode: shadow}
`), time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
				if err != nil {
					t.Fatal(err)
				}
				b := shadow.NewBook()
				b.Track(set)
				b.Record("ip-strict", rules.Block, subject)
				b.Record("ip-strict", rules.Block, subject)
				b.Record("ip-strict", "", subject)
				b.Record("global-strict", rules.Challenge, "global")
				b.Record("quiet", "", subject)
				cfg.Shadow = shadow.NewFleet(shadow.FleetConfig{Book: b})
			},
			method: "GET", path: "/v1/shadow", admin: true,
			wantStatus: 200,
		},
		{
			name: "incident in an attack",
			edit: func(cfg *Config) {
				b := incident.NewBook(incident.BookConfig{})
				b.Decided(rules.Allow, "")
				b.Decided(rules.Slow, "login-ip")
				b.Tripped("login-ip", rules.Slow, subject)
				b.HardStopStarted("", subject)
				b.Global("login-global", true)
				cfg.Incident = incident.NewFleet(incident.FleetConfig{Book: b, Instance: "a", Name: keys.NewHasher(secret.Generate()).SubjectPseudonym})
			},
			method: "GET", path: "/v1/incident", admin: true,
			wantStatus: 200,
		},
		{
			name:   "fleet alone",
			method: "GET", path: "/v1/fleet", admin: true,
			wantStatus: 200,
		},
		{
			name:   "shadow without shadow rules",
			method: "GET", path: "/v1/shadow", admin: true,
			wantStatus: 200,
		},
		{
			name: "status",
			fake: fakeDecider{status: engine.AccountStatus{ConsecutiveFailures: 100, Blocked: true, NextAllowed: 1500 * time.Microsecond,
				Limits: []engine.Limit{{Rule: "login-hard-stop", Remaining: 0, Reset: 90 * 24 * time.Hour}}}},
			method: "GET", path: "/v1/accounts/status?account=alice@example.com", admin: true,
			wantStatus: 200,
		},
		{
			name:   "status without account",
			method: "GET", path: "/v1/accounts/status", admin: true,
			wantStatus: 400, wantCode: "missing_field",
		},
		{
			name:   "status in the body",
			fake:   fakeDecider{status: engine.AccountStatus{ConsecutiveFailures: 3}},
			method: "POST", path: "/v1/accounts/status", body: `{"account": "alice@example.com"}`, admin: true,
			wantStatus: 200,
		},
		{
			name:   "status in the body without account",
			method: "POST", path: "/v1/accounts/status", body: `{}`, admin: true,
			wantStatus: 400, wantCode: "missing_field",
		},
		{
			name:   "pseudonym of an account",
			method: "POST", path: "/v1/pseudonyms", body: `{"account": "Alice@example.com"}`, admin: true,
			wantStatus: 200,
		},
		{
			name:   "pseudonym of a network",
			method: "POST", path: "/v1/pseudonyms", body: `{"network": "198.51.100.7/24"}`, admin: true,
			wantStatus: 200,
		},
		{
			name:   "pseudonym of nothing",
			method: "POST", path: "/v1/pseudonyms", body: `{}`, admin: true,
			wantStatus: 400, wantCode: "missing_field",
		},
		{
			name:   "pseudonym of two identifiers",
			method: "POST", path: "/v1/pseudonyms", body: `{"account": "a", "network": "192.0.2.1"}`, admin: true,
			wantStatus: 400, wantCode: "invalid_field",
		},
		{
			name:   "pseudonym of a bad network",
			method: "POST", path: "/v1/pseudonyms", body: `{"network": "192.0.2.0/40"}`, admin: true,
			wantStatus: 400, wantCode: "invalid_field",
		},
		{
			name:   "pseudonym of a bad recipient",
			method: "POST", path: "/v1/pseudonyms", body: `{"recipient": "12"}`, admin: true,
			wantStatus: 400, wantCode: "invalid_recipient",
		},
		{
			name:   "reset",
			method: "POST", path: "/v1/accounts/reset", body: `{"account": "alice@example.com"}`, admin: true,
			wantStatus: 200,
		},
		{
			name:   "reset with an account of the wrong type",
			method: "POST", path: "/v1/accounts/reset", body: `{"account": 7}`, admin: true,
			wantStatus: 400, wantCode: "invalid_field",
		},
		{
			name:   "reset while the store fails",
			fake:   fakeDecider{err: fmt.Errorf("engine: store: %w", store.ErrUnavailable)},
			method: "POST", path: "/v1/accounts/reset", body: `{"account": "alice@example.com"}`, admin: true,
			wantStatus: 503, wantCode: "store_unavailable",
		},
		{
			name:   "revoke",
			method: "POST", path: "/v1/tokens/revoke", body: `{"jti": "3q2L0W8zv5dY1sKcQm9xTA"}`, admin: true,
			wantStatus: 200,
		},
		{
			name:   "revoke with the token's expiry",
			method: "POST", path: "/v1/tokens/revoke", body: `{"jti": "3q2L0W8zv5dY1sKcQm9xTA", "expires_at": "` + time.Now().Add(time.Hour).UTC().Format(time.RFC3339) + `"}`, admin: true,
			wantStatus: 200,
		},
		{
			name:   "revoke without a jti",
			method: "POST", path: "/v1/tokens/revoke", body: `{}`, admin: true,
			wantStatus: 400, wantCode: "missing_field",
		},
		{
			name:   "revoke a jti of other characters",
			method: "POST", path: "/v1/tokens/revoke", body: `{"jti": "a b"}`, admin: true,
			wantStatus: 400, wantCode: "invalid_field",
		},
		{
			name:   "revoke with an expiry passed",
			method: "POST", path: "/v1/tokens/revoke", body: `{"jti": "abc", "expires_at": "2020-01-01T00:00:00Z"}`, admin: true,
			wantStatus: 400, wantCode: "invalid_field",
		},
		{
			name:   "revoke with an expiry not RFC 3339",
			method: "POST", path: "/v1/tokens/revoke", body: `{"jti": "abc", "expires_at": "tomorrow"}`, admin: true,
			wantStatus: 400, wantCode: "invalid_field",
		},
		{
			name:   "revoke with too many in force",
			edit:   func(cfg *Config) { cfg.Revocations = failingRevoker{revocation.ErrFull} },
			method: "POST", path: "/v1/tokens/revoke", body: `{"jti": "abc"}`, admin: true,
			wantStatus: 409, wantCode: "too_many_revocations",
		},
		{
			name:   "revoke while the store fails",
			edit:   func(cfg *Config) { cfg.Revocations = failingRevoker{fmt.Errorf("%w: down", revocation.ErrNotShared)} },
			method: "POST", path: "/v1/tokens/revoke", body: `{"jti": "abc"}`, admin: true,
			wantStatus: 503, wantCode: "store_unavailable",
		},
		{
			name:   "readyz",
			method: "GET", path: "/readyz",
			wantStatus: 200,
		},
		{
			name:   "readyz degraded",
			edit:   func(cfg *Config) { cfg.StoreHealthy = func() bool { return false } },
			method: "GET", path: "/readyz",
			wantStatus: 200,
		},
		{
			name:   "readyz before rules are loaded",
			edit:   func(cfg *Config) { cfg.Engine = &fakeDecider{} },
			method: "GET", path: "/readyz",
			wantStatus: 503,
		},
		{
			name:   "healthz",
			method: "GET", path: "/healthz",
			wantStatus: 200,
		},
		{
			name:   "metrics",
			method: "GET", path: "/metrics",
			wantStatus: 200,
		},
		{
			name:   "unknown path",
			method: "POST", path: "/v1/checks", body: `{}`,
			wantStatus: 404, wantCode: "not_found",
		},
		{
			name:   "wrong method",
			method: "DELETE", path: "/v1/rules", admin: true,
			wantStatus: 405, wantCode: "method_not_allowed",
			wantHeaders: map[string]string{"Allow": "GET"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := tt.fake
			if fake.set == nil {
				fake.set = rules.Default()
			}
			api := newTestAPI(t, &fake, tt.edit)
			bearer := api.check
			if tt.admin {
				bearer = api.admin
			}
			req, rec := api.do(tt.method, tt.path, tt.body, bearer)
			if rec.Code != tt.wantStatus {
				t.Errorf("status: got %d, want %d (body %s)", rec.Code, tt.wantStatus, rec.Body.Bytes())
			}
			if got := errorCode(rec.Body.Bytes()); got != tt.wantCode {
				t.Errorf("code: got %q, want %q", got, tt.wantCode)
			}
			for h, want := range tt.wantHeaders {
				if got := rec.Header().Get(h); got != want {
					t.Errorf("%s: got %q, want %q", h, got, want)
				}
			}
			c.checkAnswer(t, req, rec)
		})
	}
}

// TestSpecJudgesRequestsLikeHandlers sends request bodies to the handlers
// and to the contract's request validation: the contract must accept what
// the handlers accept and refuse what they refuse for its shape.
func TestSpecJudgesRequestsLikeHandlers(t *testing.T) {
	c := loadContract(t)
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		// wantCode is the handlers' error code, "" when they accept it.
		wantCode string
	}{
		{"check minimal", "POST", "/v1/check", `{"flow": "login", "ip": "203.0.113.7"}`, ""},
		{"check every field", "POST", "/v1/check", `{"flow": "otp_send", "account": "a", "ip": "::1", "recipient": "+15550100000", "device_token": "x", "cost": 1000}`, ""},
		{"check empty device token", "POST", "/v1/check", `{"flow": "login", "ip": "203.0.113.7", "device_token": ""}`, ""},
		{"check unknown field", "POST", "/v1/check", `{"flow": "login", "ip": "203.0.113.7", "acount": "a"}`, "unknown_field"},
		{"check no flow", "POST", "/v1/check", `{"ip": "203.0.113.7"}`, "missing_field"},
		{"check no ip", "POST", "/v1/check", `{"flow": "login"}`, "missing_field"},
		{"check unknown flow", "POST", "/v1/check", `{"flow": "signup", "ip": "203.0.113.7"}`, "unknown_flow"},
		{"check flow of the wrong type", "POST", "/v1/check", `{"flow": 1, "ip": "203.0.113.7"}`, "invalid_field"},
		{"check cost 0", "POST", "/v1/check", `{"flow": "login", "ip": "203.0.113.7", "cost": 0}`, "invalid_field"},
		{"check cost 1001", "POST", "/v1/check", `{"flow": "login", "ip": "203.0.113.7", "cost": 1001}`, "invalid_field"},
		{"check cost as a string", "POST", "/v1/check", `{"flow": "login", "ip": "203.0.113.7", "cost": "1"}`, "invalid_field"},
		{"check empty account", "POST", "/v1/check", `{"flow": "login", "ip": "203.0.113.7", "account": ""}`, "invalid_field"},
		{"check blank recipient", "POST", "/v1/check", `{"flow": "otp_send", "ip": "203.0.113.7", "recipient": " "}`, "invalid_field"},
		{"check array", "POST", "/v1/check", `[]`, "invalid_json"},
		{"report", "POST", "/v1/report", `{"attempt_id": "a", "outcome": "success"}`, ""},
		{"report unknown outcome", "POST", "/v1/report", `{"attempt_id": "a", "outcome": "maybe"}`, "invalid_field"},
		{"report no outcome", "POST", "/v1/report", `{"attempt_id": "a"}`, "missing_field"},
		{"report unknown field", "POST", "/v1/report", `{"attempt_id": "a", "outcome": "success", "why": "x"}`, "unknown_field"},
		{"reset", "POST", "/v1/accounts/reset", `{"account": "a"}`, ""},
		{"reset no account", "POST", "/v1/accounts/reset", `{}`, "missing_field"},
		{"reset unknown field", "POST", "/v1/accounts/reset", `{"account": "a", "all": true}`, "unknown_field"},
		{"status", "GET", "/v1/accounts/status?account=a", "", ""},
		{"status no account", "GET", "/v1/accounts/status", "", "missing_field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeDecider{set: rules.Default(), decision: engine.Decision{Action: rules.Allow, AttemptID: "a"}}
			api := newTestAPI(t, fake, nil)
			req, rec := api.do(tt.method, tt.path, tt.body, api.admin)
			if got := errorCode(rec.Body.Bytes()); got != tt.wantCode {
				t.Fatalf("handlers: got %d %s, want code %q", rec.Code, rec.Body.Bytes(), tt.wantCode)
			}
			c.checkAnswer(t, req, rec)
			err := c.RequestErr(t, tt.method, tt.path, []byte(tt.body))
			if got, want := err == nil, tt.wantCode == ""; got != want {
				t.Errorf("contract accepts: got %v, want %v (%v)", got, want, err)
			}
		})
	}
}
