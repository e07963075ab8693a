package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// decode reads the request body into v strictly: the body must be one JSON
// object of v's fields and nothing else. Errors are *apiError values.
func decode(c *gin.Context, v any) error {
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return newError(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body: larger than %d bytes", MaxBody))
		}
		return newError(http.StatusBadRequest, "invalid_json", "body: could not be read")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return newError(http.StatusBadRequest, "invalid_json", "body: more than one JSON value")
	}
	return nil
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
