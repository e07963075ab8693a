package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	f, err := Load("testdata/caldav.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wiki, api := &f.Proxies[1].Routes[0], &f.Proxies[1].Routes[1]
	resp := func(status int, body string, hdr ...string) *http.Response {
		r := &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}
		for i := 0; i+1 < len(hdr); i += 2 {
			r.Header.Add(hdr[i], hdr[i+1])
		}
		r.Request, _ = http.NewRequest("POST", "http://wiki.example/doku.php", nil)
		return r
	}
	tests := []struct {
		name  string
		route *Route
		resp  *http.Response
		want  Outcome
	}{
		{"wrong password page", wiki, resp(403, "<div>Sorry, username or password was wrong.</div>"), Failure},
		{"other 403", wiki, resp(403, "forbidden"), Unknown},
		{"DW cookie", wiki, resp(302, "", "Set-Cookie", "DW68700bfd16c2027de7de74a5a8202a6f=abc; path=/"), Success},
		{"deleted cookie", wiki, resp(302, "", "Set-Cookie", "DWx=deleted; Max-Age=0"), Unknown},
		{"redirect home", wiki, resp(302, "", "Location", "https://wiki.example/home?x"), Success},
		{"redirect elsewhere", wiki, resp(302, "", "Location", "/login?err"), Unknown},
		{"5xx", wiki, resp(502, ""), Unknown},
		{"json without token", api, resp(200, `{"error": "bad"}`), Failure},
		{"json with token", api, resp(200, `{"token": "t"}`), Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var head []byte
			if tt.route.readsBody() {
				head = peekBody(tt.resp)
			}
			if got := tt.route.classify(tt.resp, head); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
			if tt.route.readsBody() {
				// The client still gets the whole body.
				rest, _ := io.ReadAll(tt.resp.Body)
				if string(rest) != string(head) {
					t.Errorf("body after peeking: got %q, want %q", rest, head)
				}
			}
		})
	}
}

func TestPeekKeepsALongBodyWhole(t *testing.T) {
	long := strings.Repeat("0123456789", maxBody/5)
	r := &http.Response{Body: io.NopCloser(strings.NewReader(long))}
	head := peekBody(r)
	if len(head) != maxBody {
		t.Fatalf("peeked %d bytes, want %d", len(head), maxBody)
	}
	got, _ := io.ReadAll(r.Body)
	if string(got) != long {
		t.Errorf("read back %d bytes, want %d", len(got), len(long))
	}
}
