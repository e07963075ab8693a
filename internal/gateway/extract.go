package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// maxBody is how much of a matched request's body, and of an answer's body
// an outcome reads, guardian buffers (contract 8.3).
const maxBody = 64 << 10

// errNoPointer is a JSON pointer that does not parse.
var errNoPointer = errors.New("a JSON pointer (RFC 6901) is empty or starts with /, like /user/email")

// splitPointer splits an RFC 6901 pointer into its unescaped reference
// tokens. The empty pointer (the whole document) is refused: an account is
// a string inside an object.
func splitPointer(ptr string) ([]string, error) {
	if !strings.HasPrefix(ptr, "/") {
		return nil, errNoPointer
	}
	toks := strings.Split(ptr[1:], "/")
	for i, t := range toks {
		// ~1 before ~0, as RFC 6901 §4 says: "~01" is "~1", not "/".
		for j := 0; j < len(t); j++ {
			if t[j] == '~' && (j+1 == len(t) || (t[j+1] != '0' && t[j+1] != '1')) {
				return nil, errors.New("~ must be followed by 0 or 1 (RFC 6901)")
			}
		}
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks, nil
}

// pointerValue returns the string ptr names in the JSON document doc:
// objects by member name, arrays by index. A number or boolean there is
// read as its text; anything else, or nothing, is not found.
func pointerValue(doc any, toks []string) (string, bool) {
	for _, t := range toks {
		switch v := doc.(type) {
		case map[string]any:
			next, ok := v[t]
			if !ok {
				return "", false
			}
			doc = next
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(v) || (len(t) > 1 && t[0] == '0') {
				return "", false
			}
			doc = v[i]
		default:
			return "", false
		}
	}
	switch v := doc.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// body is a matched request's buffered body, parsed at most once per kind.
type body struct {
	raw         []byte
	contentType string

	form     url.Values
	formDone bool
	doc      any
	docDone  bool
}

// formValues parses the body as a URL-encoded or multipart form.
func (b *body) formValues() url.Values {
	if b.formDone {
		return b.form
	}
	b.formDone = true
	mt, params, err := mime.ParseMediaType(b.contentType)
	if err != nil {
		return nil
	}
	switch mt {
	case "application/x-www-form-urlencoded":
		b.form, _ = url.ParseQuery(string(b.raw))
	case "multipart/form-data":
		if params["boundary"] == "" {
			return nil
		}
		r := multipart.NewReader(bytes.NewReader(b.raw), params["boundary"])
		b.form = url.Values{}
		for {
			part, err := r.NextPart()
			if err != nil {
				break
			}
			if part.FileName() != "" || part.FormName() == "" {
				continue
			}
			v, err := io.ReadAll(io.LimitReader(part, maxBody))
			if err != nil {
				break
			}
			b.form.Add(part.FormName(), string(v))
		}
	}
	return b.form
}

// json parses the body as one JSON document.
func (b *body) json() any {
	if b.docDone {
		return b.doc
	}
	b.docDone = true
	dec := json.NewDecoder(bytes.NewReader(b.raw))
	dec.UseNumber()
	var doc any
	if dec.Decode(&doc) == nil {
		b.doc = doc
	}
	return b.doc
}

// extract returns the value x names in r, whose body is b.
func (x Extractor) extract(r *http.Request, b *body) string {
	switch x.Source {
	case BasicAuth:
		user, pass, ok := r.BasicAuth()
		if !ok {
			return ""
		}
		if x.Name == "user" {
			return user
		}
		return pass
	case Header:
		return r.Header.Get(x.Name)
	case Query:
		return r.URL.Query().Get(x.Name)
	case Form:
		return b.formValues().Get(x.Name)
	case JSON:
		toks, err := splitPointer(x.Name)
		if err != nil {
			return ""
		}
		v, _ := pointerValue(b.json(), toks)
		return v
	}
	return ""
}
