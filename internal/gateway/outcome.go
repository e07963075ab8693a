package gateway

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
)

// Outcome is how an upstream's answer to a checked request went.
type Outcome string

// The outcomes: Unknown matched neither list (a 5xx, no answer) and is left
// unreported, so it counts as a failure until the attempt expires.
const (
	Success Outcome = "success"
	Failure Outcome = "failure"
	Unknown Outcome = "unknown"
)

// readsBody reports whether any outcome of r looks at the answer's body.
func (r *Route) readsBody() bool {
	for _, list := range [][]Matcher{r.Failure, r.Success} {
		for i := range list {
			if list[i].readsBody() {
				return true
			}
		}
	}
	return false
}

// classify reads resp by r's outcome lists, Failure first. head is the
// first bytes of the body (at most maxBody), read only when some item
// looks at it.
func (r *Route) classify(resp *http.Response, head []byte) Outcome {
	switch {
	case matchesAny(r.Failure, resp, head):
		return Failure
	case matchesAny(r.Success, resp, head):
		return Success
	}
	return Unknown
}

func matchesAny(list []Matcher, resp *http.Response, head []byte) bool {
	for i := range list {
		if list[i].matches(resp, head) {
			return true
		}
	}
	return false
}

// matches reports whether every condition of m holds of resp.
func (m *Matcher) matches(resp *http.Response, head []byte) bool {
	if len(m.Status) > 0 && !slices.Contains(m.Status, resp.StatusCode) {
		return false
	}
	if m.LocationPrefix != "" && !locationHas(resp, m.LocationPrefix) {
		return false
	}
	if m.SetCookie != "" && !setsCookie(resp, m.SetCookie) {
		return false
	}
	if m.HasBodyContains && !bytes.Contains(head, []byte(m.BodyContains)) {
		return false
	}
	if m.HasBodyLacks && bytes.Contains(head, []byte(m.BodyLacks)) {
		return false
	}
	return true
}

// locationHas reports whether resp's Location starts with prefix, as
// written or as a path once its scheme and host are dropped.
func locationHas(resp *http.Response, prefix string) bool {
	loc := resp.Header.Get("Location")
	if strings.HasPrefix(loc, prefix) {
		return true
	}
	u, err := resp.Location()
	return err == nil && strings.HasPrefix(u.RequestURI(), prefix)
}

// setsCookie reports whether resp sets a cookie named name (or, when name
// ends with *, one whose name starts with the rest) to a value, not to
// nothing as a logout does.
func setsCookie(resp *http.Response, name string) bool {
	prefix, wild := strings.CutSuffix(name, "*")
	for _, c := range resp.Cookies() {
		hit := c.Name == name || (wild && strings.HasPrefix(c.Name, prefix))
		if hit && c.Value != "" && c.Value != "deleted" && c.MaxAge >= 0 {
			return true
		}
	}
	return false
}

// peekBody reads up to maxBody bytes of resp's body and puts them back in
// front of the rest, so the client gets the body whole, streamed.
func peekBody(resp *http.Response) []byte {
	if resp.Body == nil || resp.Body == http.NoBody {
		return nil
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	rest := resp.Body
	resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(head), errReader{err}, rest), Closer: rest}
	return head
}

type readCloser struct {
	io.Reader
	io.Closer
}

// errReader hands on a read error peekBody met, after what it had read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}
