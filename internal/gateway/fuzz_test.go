package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// FuzzProxyRequest sends arbitrary bodies, content types and credentials
// to a form, a JSON and a basic-auth route: never a panic, never a 5xx
// from guardian itself (the test upstream answers 207 or 401).
func FuzzProxyRequest(f *testing.F) {
	g := newTestGateway(f, "enforce", `      - name: json
        match: {path: /api}
        flow: login
        account: {json: /user/0/~1name}
        secret: {json: /pw}
        outcome:
          failure: [{status: [401], body_lacks: "x"}]
          success: [{status: [207]}]
`)
	f.Add("/login", "application/x-www-form-urlencoded", []byte("u=alice&p=right"), "")
	f.Add("/api", "application/json", []byte(`{"user": [{"/name": "a"}], "pw": 1}`), "")
	f.Add("/login", "multipart/form-data; boundary=x", []byte("--x\r\nContent-Disposition: form-data; name=\"u\"\r\n\r\nbob\r\n--x--\r\n"), "")
	f.Add("/dav/", "", []byte{}, "Basic YWxpY2U6cmlnaHQ=")
	f.Add("/dav/", "", []byte{}, "Basic %%%")
	f.Fuzz(func(t *testing.T, path, contentType string, body []byte, auth string) {
		if len(path) == 0 || path[0] != '/' {
			path = "/" + path
		}
		if !validHeaderValue(contentType) || !validHeaderValue(auth) {
			return // net/http's server answers 400 before guardian sees it
		}
		r, err := http.NewRequest("POST", "http://proxy"+path, bytes.NewReader(body))
		if err != nil {
			return
		}
		r.RemoteAddr = "203.0.113.9:1234"
		r.Header.Set("Content-Type", contentType)
		r.Header.Set("Authorization", auth)
		w := httptest.NewRecorder()
		g.gw.Handler(0).ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s %q: got %d %s", path, contentType, w.Code, w.Body)
		}
	})
}

// validHeaderValue reports whether net/http's server accepts v as a header
// value: no control character but tab.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
