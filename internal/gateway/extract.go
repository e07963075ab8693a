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
	"sync"
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

// body is a matched request's buffered body, parsed at most once per kind,
// and the other parts of the request extractors read, each parsed once.
type body struct {
	raw         []byte
	contentType string

	user, pass string
	basicDone  bool
	query      url.Values
	queryDone  bool

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

// readBody buffers a matched request's body, at most maxBody bytes, in a
// pooled buffer, and puts it back for the upstream, which gives the buffer
// back when it closes the body; false when the body is larger.
func readBody(r *http.Request) (*body, bool) {
	b := &body{contentType: r.Header.Get("Content-Type")}
	if r.ContentLength > maxBody {
		return nil, false
	}
	if r.Body == nil || r.Body == http.NoBody {
		return b, true
	}
	bp := bodyBuffers.Get().(*[]byte)
	raw, err := readAtMost(r.Body, (*bp)[:0], maxBody+1)
	r.Body.Close()
	*bp = raw[:0]
	if len(raw) > maxBody {
		bodyBuffers.Put(bp)
		return nil, false
	}
	if err != nil || len(raw) == 0 {
		bodyBuffers.Put(bp)
		r.Body, r.ContentLength = http.NoBody, 0
		return b, true
	}
	b.raw = raw
	pb := &pooledBody{buf: bp}
	pb.rd.Reset(raw)
	r.Body, r.ContentLength = pb, int64(len(raw))
	return b, true
}

// bodyBuffers are the buffers matched bodies are read into, up to
// maxBody+1 bytes each.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// readAtMost appends what rd holds to buf, up to limit bytes in all,
// growing it as needed but never beyond limit.
func readAtMost(rd io.Reader, buf []byte, limit int) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= limit {
				return buf, nil
			}
			grown := make([]byte, len(buf), min(max(2*cap(buf), 512), limit))
			copy(grown, buf)
			buf = grown
		}
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// pooledBody is a buffered body handed upstream: closing it gives its
// buffer back to bodyBuffers, once; a read after that finds nothing.
type pooledBody struct {
	mu  sync.Mutex
	rd  bytes.Reader
	buf *[]byte
}

func (p *pooledBody) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buf == nil {
		return 0, http.ErrBodyReadAfterClose
	}
	return p.rd.Read(b)
}

func (p *pooledBody) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buf != nil {
		p.rd.Reset(nil)
		bodyBuffers.Put(p.buf)
		p.buf = nil
	}
	return nil
}

// extract returns the value x names in r, whose body is b.
func (x Extractor) extract(r *http.Request, b *body) string {
	switch x.Source {
	case BasicAuth:
		if !b.basicDone {
			b.basicDone = true
			b.user, b.pass, _ = r.BasicAuth()
		}
		if x.Name == "user" {
			return b.user
		}
		return b.pass
	case Header:
		return r.Header.Get(x.Name)
	case Query:
		if !b.queryDone {
			b.queryDone = true
			b.query = r.URL.Query()
		}
		return b.query.Get(x.Name)
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
