// Package apitest checks guardian's HTTP answers against its contract,
// api/openapi.yaml, for the tests of the packages that serve them.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// The console's files are text the contract describes as strings: decode
// them as it decodes text/plain.
func init() {
	plain := openapi3filter.RegisteredBodyDecoder("text/plain")
	for _, ct := range []string{"text/html", "text/javascript", "text/css", "image/svg+xml"} {
		openapi3filter.RegisterBodyDecoder(ct, plain)
	}
}

// Contract is api/openapi.yaml with a router over its operations.
type Contract struct {
	// Doc is the loaded, validated document.
	Doc    *openapi3.T
	path   string
	router routers.Router
}

// Load loads the contract at path (relative to the calling test's package)
// and fails tb unless it is a valid OpenAPI document, its examples included.
func Load(tb testing.TB, path string) *Contract {
	tb.Helper()
	doc, err := openapi3.NewLoader().LoadFromFile(path)
	if err != nil {
		tb.Fatalf("load %s: %v", path, err)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableMultiError()); err != nil {
		tb.Fatalf("%s is not valid OpenAPI: %v", path, err)
	}
	// Requests in tests go to no particular host: route on the path alone.
	routed := *doc
	routed.Servers = nil
	r, err := legacy.NewRouter(&routed)
	if err != nil {
		tb.Fatalf("route %s: %v", path, err)
	}
	return &Contract{Doc: doc, path: path, router: r}
}

// CheckAnswer fails tb unless rec is an answer the contract allows to req:
// for an operation it lists, one of the operation's statuses with headers
// and a body matching it; for a path or a method it does not list, its
// NotFound or MethodNotAllowed response.
func (c *Contract) CheckAnswer(tb testing.TB, req *http.Request, rec *httptest.ResponseRecorder) {
	tb.Helper()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		c.checkUnrouted(tb, req, rec, err)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 rec.Code,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		tb.Errorf("%s %s: answer %d %s does not match %s: %v", req.Method, req.URL.Path, rec.Code, rec.Body.Bytes(), c.path, err)
	}
}

// RequestErr is the contract's verdict on a request: nil when it accepts
// the body and parameters, the reason otherwise.
func (c *Contract) RequestErr(tb testing.TB, method, target string, body []byte) error {
	tb.Helper()
	req := httptest.NewRequest(method, target, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		tb.Fatalf("%s %s: route: %v", method, target, err)
	}
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route:      route,
		Options:    &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
}

// checkUnrouted checks the answer to a request the contract has no
// operation for against the shared response for that case.
func (c *Contract) checkUnrouted(tb testing.TB, req *http.Request, rec *httptest.ResponseRecorder, routeErr error) {
	tb.Helper()
	var name string
	var status int
	switch routeErr.Error() {
	case routers.ErrPathNotFound.Error():
		name, status = "NotFound", http.StatusNotFound
	case routers.ErrMethodNotAllowed.Error():
		name, status = "MethodNotAllowed", http.StatusMethodNotAllowed
	default:
		tb.Fatalf("%s %s: route: %v", req.Method, req.URL.Path, routeErr)
	}
	if rec.Code != status {
		tb.Errorf("%s %s: status %d, want %d (components.responses.%s)", req.Method, req.URL.Path, rec.Code, status, name)
	}
	resp := c.Doc.Components.Responses[name].Value
	for h, ref := range resp.Headers {
		if ref.Value.Required && rec.Header().Get(h) == "" {
			tb.Errorf("%s %s: no %s header, which components.responses.%s requires", req.Method, req.URL.Path, h, name)
		}
	}
	mt := resp.Content.Get(rec.Header().Get("Content-Type"))
	if mt == nil {
		tb.Fatalf("%s %s: Content-Type %q is not one of components.responses.%s", req.Method, req.URL.Path, rec.Header().Get("Content-Type"), name)
	}
	var body any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		tb.Fatalf("%s %s: body %q: %v", req.Method, req.URL.Path, rec.Body.Bytes(), err)
	}
	if err := mt.Schema.Value.VisitJSON(body, openapi3.EnableJSONSchema2020()); err != nil {
		tb.Errorf("%s %s: body %s does not match components.responses.%s: %v", req.Method, req.URL.Path, rec.Body.Bytes(), name, err)
	}
}
