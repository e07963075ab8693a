package gateway

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("username", "mia@example.com")
	fw, _ := mw.CreateFormFile("avatar", "a.png")
	_, _ = fw.Write([]byte("not a field"))
	_ = mw.Close()

	tests := []struct {
		name        string
		x           Extractor
		contentType string
		body        string
		setup       func(r *http.Request)
		want        string
	}{
		{"basic user", Extractor{BasicAuth, "user"}, "", "", func(r *http.Request) { r.SetBasicAuth("ann", "pw:with:colons") }, "ann"},
		{"basic password", Extractor{BasicAuth, "password"}, "", "", func(r *http.Request) { r.SetBasicAuth("ann", "pw:with:colons") }, "pw:with:colons"},
		{"no basic auth", Extractor{BasicAuth, "user"}, "", "", nil, ""},
		{"form", Extractor{Form, "u"}, "application/x-www-form-urlencoded", "do=login&u=b%C3%A9a&p=x", nil, "béa"},
		{"form with charset", Extractor{Form, "u"}, "application/x-www-form-urlencoded; charset=UTF-8", "u=cy", nil, "cy"},
		{"form, wrong type", Extractor{Form, "u"}, "text/plain", "u=cy", nil, ""},
		{"multipart", Extractor{Form, "username"}, mw.FormDataContentType(), mp.String(), nil, "mia@example.com"},
		{"multipart file is not a field", Extractor{Form, "avatar"}, mw.FormDataContentType(), mp.String(), nil, ""},
		{"json", Extractor{JSON, "/user/email"}, "application/json", `{"user": {"email": "jo@example.com"}}`, nil, "jo@example.com"},
		{"json escaped", Extractor{JSON, "/a~1b/c~0d"}, "application/json", `{"a/b": {"c~d": "esc"}}`, nil, "esc"},
		{"json array", Extractor{JSON, "/users/1"}, "application/json", `{"users": ["x", "y"]}`, nil, "y"},
		{"json number", Extractor{JSON, "/id"}, "application/json", `{"id": 12345678901234567890}`, nil, "12345678901234567890"},
		{"json object is not a value", Extractor{JSON, "/user"}, "application/json", `{"user": {}}`, nil, ""},
		{"json leading zero index", Extractor{JSON, "/users/01"}, "application/json", `{"users": ["x", "y"]}`, nil, ""},
		{"json broken", Extractor{JSON, "/user"}, "application/json", `{"user": `, nil, ""},
		{"header", Extractor{Header, "X-User"}, "", "", func(r *http.Request) { r.Header.Set("x-user", "hd") }, "hd"},
		{"query", Extractor{Query, "login"}, "", "", func(r *http.Request) { r.URL.RawQuery = "login=qq" }, "qq"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/x", strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			if tt.setup != nil {
				tt.setup(r)
			}
			b, ok := readBody(r)
			if !ok {
				t.Fatal("body refused")
			}
			if got := tt.x.extract(r, b); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
