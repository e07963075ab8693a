package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"
)

// decode reads the request body into v strictly: the body must be one JSON
// object of v's fields and nothing else. Errors are *apiError values.
//
// A body that is a flat object of plain members, the shape every client
// sends, is read by parseFlat without reflection; anything else, valid or
// not, goes through encoding/json, which decides what the body means and
// which error it gets, and then strictMembers, which refuses what
// encoding/json would resolve silently: a member given twice, a name that
// differs from a field's only by case, bytes that are not UTF-8. Both paths
// read the same bodies the same way (a fuzz test holds them to it), so the
// fast path changes no answer.
func decode(c *gin.Context, v any) error {
	bp := bodies.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledBody {
			bodies.Put(bp)
		}
	}()
	body, err := readBody(c.Request.Body, (*bp)[:0])
	*bp = body
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return newError(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body: larger than %d bytes", MaxBody))
		}
		return newError(http.StatusBadRequest, "invalid_json", "body: could not be read")
	}
	if t, ok := v.(flatTarget); ok {
		if parseFlat(string(body), t) {
			return nil
		}
		t.reset()
	}
	return decodeJSON(body, v)
}

// decodeJSON is decode's encoding/json path.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return newError(http.StatusBadRequest, "invalid_json", "body: more than one JSON value")
	}
	return strictMembers(body, v)
}

// maxPooledBody is the largest body buffer decode keeps for reuse; the rare
// larger body gets a buffer of its own.
const maxPooledBody = 4 << 10

// bodies holds request body buffers for reuse.
var bodies = sync.Pool{New: func() any {
	b := make([]byte, 0, 1<<10)
	return &b
}}

// readBody appends all of r to b.
func readBody(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// decodeError maps an encoding/json error to the contract's codes.
func decodeError(err error) *apiError {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return newError(http.StatusBadRequest, "invalid_json", "body: must be a JSON object")
		}
		return newError(http.StatusBadRequest, "invalid_field", fmt.Sprintf("%s: must be %s, not %s", typeErr.Field, jsonType(typeErr.Type.Kind().String()), typeErr.Value))
	case errors.As(err, &syntaxErr):
		return newError(http.StatusBadRequest, "invalid_json", fmt.Sprintf("body: malformed JSON at byte %d", syntaxErr.Offset))
	case errors.Is(err, io.EOF):
		return newError(http.StatusBadRequest, "invalid_json", "body: empty, a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return newError(http.StatusBadRequest, "invalid_json", "body: truncated JSON")
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return newError(http.StatusBadRequest, "unknown_field", strings.Trim(name, `"`)+": unknown field")
	}
	return newError(http.StatusBadRequest, "invalid_json", "body: not valid JSON")
}

// jsonType names a Go kind as a JSON type for error messages.
func jsonType(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "an integer"
	case kind == "string":
		return "a string"
	case kind == "bool":
		return "a boolean"
	}
	return "a " + kind
}

// required returns *p, or a missing_field error naming field when p is nil.
func required(p *string, field string) (string, error) {
	if p == nil {
		return "", newError(http.StatusBadRequest, "missing_field", field+": required")
	}
	return *p, nil
}

// optional returns *p, or "" when p is nil. A field that is present must not
// be empty: an empty identifier would silently disable the rules keyed by it.
func optional(p *string, field string) (string, error) {
	if p == nil {
		return "", nil
	}
	if strings.TrimSpace(*p) == "" {
		return "", newError(http.StatusBadRequest, "invalid_field", field+": must not be empty")
	}
	return *p, nil
}
