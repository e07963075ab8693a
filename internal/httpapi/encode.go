package httpapi

import (
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/engine"
)

// The answers of /v1/check and /v1/report are written by hand, byte for
// byte what encoding/json makes of them (tests hold the two together), so
// the two calls every login makes pay for no reflection.

// jsonContentType is the Content-Type of every JSON answer, as gin writes
// it. Header values are never modified in place, so every answer shares it.
var jsonContentType = []string{"application/json; charset=utf-8"}

// answers holds answer buffers for reuse.
var answers = sync.Pool{New: func() any {
	b := make([]byte, 0, 1<<10)
	return &b
}}

// maxPooledAnswer is the largest answer buffer kept for reuse.
const maxPooledAnswer = 16 << 10

// writeAnswer writes the JSON that fill appends with status.
func writeAnswer(c *gin.Context, status int, fill func([]byte) []byte) {
	bp := answers.Get().(*[]byte)
	b := fill((*bp)[:0])
	c.Writer.Header()["Content-Type"] = jsonContentType
	c.Writer.WriteHeader(status)
	_, _ = c.Writer.Write(b) // a client gone away is not guardian's error
	if cap(b) <= maxPooledAnswer {
		*bp = b
		answers.Put(bp)
	}
}

// trustOf is d's trust, none for a Decision that names none.
func trustOf(d *engine.Decision) engine.Trust {
	if d.Trust == "" {
		return engine.TrustNone
	}
	return d.Trust
}

// appendCheck appends the answer to a check: the fields of the contract in
// the order and form encoding/json gives the checkResponse struct.
func appendCheck(b []byte, d *engine.Decision) []byte {
	b = append(b, `{"decision":`...)
	b = appendString(b, string(d.Action))
	if d.Rule != "" {
		b = append(b, `,"rule":`...)
		b = appendString(b, d.Rule)
	}
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, millis(d.RetryAfter), 10)
	if d.AttemptID != "" {
		b = append(b, `,"attempt_id":`...)
		b = appendString(b, d.AttemptID)
	}
	b = append(b, `,"degraded":`...)
	b = strconv.AppendBool(b, d.Degraded)
	b = append(b, `,"repeat_guess":`...)
	b = strconv.AppendBool(b, d.RepeatGuess)
	if d.RepeatCapped {
		b = append(b, `,"repeat_capped":true`...)
	}
	b = append(b, `,"trust":`...)
	b = appendString(b, string(trustOf(d)))
	b = append(b, `,"limits":[`...)
	for i, l := range d.Limits {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"rule":`...)
		b = appendString(b, l.Rule)
		b = append(b, `,"remaining":`...)
		b = strconv.AppendInt(b, l.Remaining, 10)
		b = append(b, `,"reset_ms":`...)
		b = strconv.AppendInt(b, millis(l.Reset), 10)
		b = append(b, '}')
	}
	b = append(b, `],"shadow":[`...)
	for i, s := range d.Shadow {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"rule":`...)
		b = appendString(b, s.Rule)
		b = append(b, `,"decision":`...)
		b = appendString(b, string(s.Action))
		b = append(b, `,"retry_after_ms":`...)
		b = strconv.AppendInt(b, millis(s.RetryAfter), 10)
		b = append(b, '}')
	}
	return append(b, `]}`...)
}

// appendReport appends the answer to a report, as encoding/json writes the
// map {"recorded": true, "device_token": …}: keys in sorted order.
func appendReport(b []byte, res *engine.ReportResult) []byte {
	b = append(b, '{')
	if res.DeviceToken != "" {
		b = append(b, `"device_token":`...)
		b = appendString(b, res.DeviceToken)
		b = append(b, ',')
	}
	return append(b, `"recorded":true}`...)
}

// hexDigits are the digits of \u escapes, lower case as encoding/json
// writes them.
const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string exactly as encoding/json writes
// it: quote and backslash escaped, control characters as \b \f \n \r \t or
// \u00XX, the HTML-sensitive <, > and & as \u003c, \u003e and \u0026, U+2028
// and U+2029 escaped, and each byte of invalid UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
