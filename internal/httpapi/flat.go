package httpapi

import (
	"strconv"
	"unicode/utf8"
)

// flatTarget is a request body type that parseFlat can fill: a struct of
// optional string and integer fields.
type flatTarget interface {
	// set stores the member key with value val, a string when str is true
	// and an integer literal otherwise. It reports false for anything
	// encoding/json would not store the same way: an unknown key (or one
	// that matches only ignoring case), a value of the wrong type, an
	// integer out of range, or a key already set.
	set(key, val string, str bool) bool
	// reset zeroes the target, for the encoding/json path after a partial
	// fast one.
	reset()
}

// parseFlat reads s as one JSON object, optionally surrounded by
// whitespace, whose keys are printable ASCII without escapes and whose
// values are strings without escapes or control characters (valid UTF-8)
// or integers, and hands each member to t. Values are substrings of s. It
// reports false, leaving t partly filled, for any other input, valid JSON
// or not: escapes, null, booleans, nested values, fractions and exponents,
// duplicate or unknown keys and every syntax error are left to encoding/json.
// For every input it accepts, encoding/json stores the same values and
// reports no error.
func parseFlat(s string, t flatTarget) bool {
	i := skipSpace(s, 0)
	if i == len(s) || s[i] != '{' {
		return false
	}
	i = skipSpace(s, i+1)
	if i < len(s) && s[i] == '}' {
		return skipSpace(s, i+1) == len(s)
	}
	for {
		key, next, ok := plainString(s, i, false)
		if !ok {
			return false
		}
		i = skipSpace(s, next)
		if i == len(s) || s[i] != ':' {
			return false
		}
		i = skipSpace(s, i+1)
		if i == len(s) {
			return false
		}
		var val string
		str := s[i] == '"'
		if str {
			val, i, ok = plainString(s, i, true)
		} else {
			val, i, ok = integer(s, i)
		}
		if !ok || !t.set(key, val, str) {
			return false
		}
		i = skipSpace(s, i)
		if i == len(s) {
			return false
		}
		switch s[i] {
		case ',':
			i = skipSpace(s, i+1)
		case '}':
			return skipSpace(s, i+1) == len(s)
		default:
			return false
		}
	}
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// plainString reads the string starting at s[i] (a quote) and returns its
// contents and the index after its closing quote. It refuses escapes and
// control characters, and bytes outside printable ASCII unless utf8 is true,
// in which case they must be valid UTF-8.
func plainString(s string, i int, utf bool) (string, int, bool) {
	if i == len(s) || s[i] != '"' {
		return "", i, false
	}
	start := i + 1
	ascii := true
	for j := start; j < len(s); j++ {
		switch c := s[j]; {
		case c == '"':
			v := s[start:j]
			if !ascii && !utf8.ValidString(v) {
				return "", i, false
			}
			return v, j + 1, true
		case c == '\\' || c < 0x20 || c == 0x7f && !utf:
			return "", i, false
		case c >= utf8.RuneSelf:
			if !utf {
				return "", i, false
			}
			ascii = false
		}
	}
	return "", i, false
}

// integer reads the JSON integer starting at s[i]: an optional minus, then 0
// or a digit 1-9 and more digits, not followed by a fraction or an exponent.
func integer(s string, i int) (string, int, bool) {
	start := i
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i == len(s):
		return "", start, false
	case s[i] == '0':
		i++
	case s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return "", start, false
	}
	if i < len(s) && (s[i] == '.' || s[i] == 'e' || s[i] == 'E' || s[i] >= '0' && s[i] <= '9') {
		return "", start, false
	}
	return s[start:i], i, true
}

// setString stores val in *slot and points *p at it, when the member is a
// string not seen before. Slots live in the request struct, so a member
// costs no allocation of its own.
func setString(p **string, slot *string, val string, str bool) bool {
	if !str || *p != nil {
		return false
	}
	*slot = val
	*p = slot
	return true
}

// setInt stores the integer literal val in *slot and points *p at it, when
// it fits an int64 and was not seen before.
func setInt(p **int64, slot *int64, val string, str bool) bool {
	if str || *p != nil {
		return false
	}
	n, err := strconv.ParseInt(val, 10, 64)
	if err != nil {
		return false
	}
	*slot = n
	*p = slot
	return true
}

func (r *checkRequest) set(key, val string, str bool) bool {
	switch key {
	case "flow":
		return setString(&r.Flow, &r.slots[0], val, str)
	case "account":
		return setString(&r.Account, &r.slots[1], val, str)
	case "ip":
		return setString(&r.IP, &r.slots[2], val, str)
	case "recipient":
		return setString(&r.Recipient, &r.slots[3], val, str)
	case "device_token":
		return setString(&r.DeviceToken, &r.slots[4], val, str)
	case "secret_fingerprint":
		return setString(&r.SecretFingerprint, &r.slots[5], val, str)
	case "password_sha1":
		return setString(&r.PasswordSHA1, &r.slots[6], val, str)
	case "cost":
		return setInt(&r.Cost, &r.cost, val, str)
	}
	return false
}

func (r *checkRequest) reset() { *r = checkRequest{} }

func (r *reportRequest) set(key, val string, str bool) bool {
	switch key {
	case "attempt_id":
		return setString(&r.AttemptID, &r.slots[0], val, str)
	case "outcome":
		return setString(&r.Outcome, &r.slots[1], val, str)
	}
	return false
}

func (r *reportRequest) reset() { *r = reportRequest{} }

func (r *accountRequest) set(key, val string, str bool) bool {
	if key == "account" {
		return setString(&r.Account, &r.slot, val, str)
	}
	return false
}

func (r *accountRequest) reset() { *r = accountRequest{} }
