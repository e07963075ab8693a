package httpapi

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/breached"
)

// Breached-password lookups: POST /v1/passwords/check, and password_sha1 on
// a check. Neither the hash nor the answer is logged, kept or counted: the
// hash goes from the body to the filter and the answer to the response,
// and nowhere else (not to the engine, so not to the store, the decision
// log or the audit trail).

// passwordCheckRequest is the body of /v1/passwords/check.
type passwordCheckRequest struct {
	SHA1 *string `json:"sha1"`

	slot string // what SHA1 points at when parseFlat read the body
}

func (r *passwordCheckRequest) set(key, val string, str bool) bool {
	if key == "sha1" {
		return setString(&r.SHA1, &r.slot, val, str)
	}
	return false
}

func (r *passwordCheckRequest) reset() { *r = passwordCheckRequest{} }

// errNoFilter and errNTLMFilter answer a lookup guardian cannot make: no
// filter is loaded, or the one loaded holds NTLM hashes.
var (
	errNoFilter   = newError(http.StatusNotFound, "not_found", "no breached-password filter is loaded (guardian serve --breached FILE)")
	errNTLMFilter = newError(http.StatusNotFound, "not_found", "the breached-password filter holds NTLM hashes, in which a SHA-1 cannot be looked up; build one with --format sha1 or plain")
)

// sha1Of decodes the SHA-1 hex of field, refusing anything else without
// repeating it (it is a hash of a password).
func sha1Of(s, field string) ([20]byte, error) {
	sum, ok := breached.ParseSHA1(s)
	if !ok {
		return sum, newError(http.StatusBadRequest, "invalid_field", field+": must be the SHA-1 of the password, 40 hex digits")
	}
	return sum, nil
}

// lookup looks sum up in the filter in use.
func (a *API) lookup(sum [20]byte) (bool, error) {
	l := a.cfg.Breached.Load()
	if l == nil {
		return false, errNoFilter
	}
	in, err := l.Filter.ContainsSHA1(sum)
	if errors.Is(err, breached.ErrWrongHash) {
		return false, errNTLMFilter
	}
	return in, err
}

func (a *API) checkPassword(c *gin.Context) {
	var body passwordCheckRequest
	if err := decode(c, &body); err != nil {
		a.abort(c, err)
		return
	}
	s, err := required(body.SHA1, "sha1")
	if err != nil {
		a.abort(c, err)
		return
	}
	sum, err := sha1Of(s, "sha1")
	if err != nil {
		a.abort(c, err)
		return
	}
	in, err := a.lookup(sum)
	if err != nil {
		a.abort(c, err)
		return
	}
	writeAnswer(c, http.StatusOK, func(b []byte) []byte {
		return append(strconv.AppendBool(append(b, `{"breached":`...), in), '}')
	})
}

// breachedAnswer is what a check's password_sha1 adds to its answer.
type breachedAnswer struct {
	// asked is true when the answer has "breached": the check carried
	// password_sha1 and a SHA-1 filter is loaded.
	asked, in bool
}

// breachedOf validates a check's password_sha1 (nil when absent) and looks
// it up. Without a filter that can answer it, the answer has no
// "breached": the check is decided as usual.
func (a *API) breachedOf(p *string) (breachedAnswer, error) {
	if p == nil {
		return breachedAnswer{}, nil
	}
	sum, err := sha1Of(*p, "password_sha1")
	if err != nil {
		return breachedAnswer{}, err
	}
	in, err := a.lookup(sum)
	if err != nil {
		return breachedAnswer{}, nil
	}
	return breachedAnswer{asked: true, in: in}, nil
}

// appendBreached adds "breached" to the JSON object that b ends with, when
// br was asked.
func appendBreached(b []byte, br breachedAnswer) []byte {
	if !br.asked {
		return b
	}
	b = append(b[:len(b)-1], `,"breached":`...)
	return append(strconv.AppendBool(b, br.in), '}')
}

// breachedJSON is the filter in use, as GET /v1/rules shows it.
type breachedJSON struct {
	Source   string    `json:"source"`
	Format   string    `json:"format"`
	Digest   string    `json:"digest"`
	Entries  uint64    `json:"entries"`
	MinCount uint64    `json:"min_count"`
	BuiltAt  time.Time `json:"built_at"`
	LoadedAt time.Time `json:"loaded_at"`
	Bytes    int64     `json:"bytes"`
	Checksum string    `json:"sha256"`
}

// breachedBody is the filter in use for GET /v1/rules, nil when none is.
func (a *API) breachedBody() *breachedJSON {
	l := a.cfg.Breached.Load()
	if l == nil {
		return nil
	}
	i := l.Filter.Info()
	return &breachedJSON{
		Source: l.Source, Format: string(i.Format), Digest: string(i.Format.Hash()), Entries: i.Entries, MinCount: i.MinCount,
		BuiltAt: i.BuiltAt, LoadedAt: l.LoadedAt.UTC().Truncate(time.Second), Bytes: i.Bytes, Checksum: i.Checksum,
	}
}
