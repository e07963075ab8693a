package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// strictMembers refuses what encoding/json resolves silently in body, one
// JSON value it has already decoded into v without error: bytes that are
// not UTF-8 and escapes of half a surrogate pair (both would become U+FFFD,
// so different bytes would read alike), a member of the top-level object
// given twice (the last would win), and a member name that matches one of
// v's fields only when case is ignored (it would set that field).
func strictMembers(body []byte, v any) error {
	if !utf8.Valid(body) {
		return newError(http.StatusBadRequest, "invalid_json", "body: not valid UTF-8")
	}
	names := fieldNames(reflect.TypeOf(v))
	var seen []string
	depth, key := 0, false
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{':
			depth++
			key = depth == 1
		case '[':
			depth++
		case '}', ']':
			depth--
		case ',':
			key = depth == 1
		case '"':
			end, ok := stringEnd(body, i)
			if !ok {
				return newError(http.StatusBadRequest, "invalid_json", "body: a \\u escape is half a surrogate pair, not a character")
			}
			if key {
				name := memberName(body[i:end])
				switch {
				case names != nil && !names[name]:
					// name matched a field when case is ignored, so it
					// is short: naming it back is safe.
					return newError(http.StatusBadRequest, "unknown_field", name+": unknown field (field names are case-sensitive)")
				case slices.Contains(seen, name):
					return newError(http.StatusBadRequest, "invalid_json", name+": given twice; each field may appear once")
				}
				seen = append(seen, name)
				key = false
			}
			i = end - 1
		}
	}
	return nil
}

// stringEnd returns the index after the closing quote of the JSON string
// that starts at body[i], and false when the string holds a \u escape of a
// surrogate that is not part of a pair.
func stringEnd(body []byte, i int) (int, bool) {
	for j := i + 1; j < len(body); j++ {
		switch body[j] {
		case '"':
			return j + 1, true
		case '\\':
			if body[j+1] != 'u' {
				j++
				continue
			}
			switch r := hex4(body[j+2:]); {
			case 0xd800 <= r && r < 0xdc00:
				if j+12 > len(body) || body[j+6] != '\\' || body[j+7] != 'u' {
					return 0, false
				}
				if lo := hex4(body[j+8:]); lo < 0xdc00 || lo > 0xdfff {
					return 0, false
				}
				j += 11
			case 0xdc00 <= r && r <= 0xdfff:
				return 0, false
			default:
				j += 5
			}
		}
	}
	return len(body), true
}

// hex4 is the value of the four hex digits at the start of b, which a
// decoded JSON string is known to have after \u.
func hex4(b []byte) rune {
	n, _ := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(n)
}

// memberName decodes the JSON string s, quotes included, that names a
// member.
func memberName(s []byte) string {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s[1 : len(s)-1])
	}
	var name string
	_ = json.Unmarshal(s, &name) // encoding/json has read it already
	return name
}

// fieldNamesOf caches fieldNames by type.
var fieldNamesOf sync.Map // reflect.Type → map[string]bool

// fieldNames returns the JSON names of the fields of the struct t points
// to, and nil when t is not a pointer to a struct.
func fieldNames(t reflect.Type) map[string]bool {
	if names, ok := fieldNamesOf.Load(t); ok {
		return names.(map[string]bool)
	}
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil
	}
	names := map[string]bool{}
	for i := range t.Elem().NumField() {
		f := t.Elem().Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); f.IsExported() && name != "-" {
			if name == "" {
				name = f.Name
			}
			names[name] = true
		}
	}
	fieldNamesOf.Store(t, names)
	return names
}
