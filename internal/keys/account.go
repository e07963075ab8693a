package keys

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// MaxAccountLen is the longest normalised account, in bytes.
const MaxAccountLen = 256

// maxAccountInput is the longest account input looked at: anything longer is
// rejected before any Unicode work, so a huge identifier is cheap to refuse.
// It leaves room for inputs that shrink under normalisation.
const maxAccountInput = 4 * MaxAccountLen

var (
	errAccountEmpty   = fmt.Errorf("%w: empty", ErrInvalidAccount)
	errAccountLong    = fmt.Errorf("%w: longer than %d bytes", ErrInvalidAccount, MaxAccountLen)
	errAccountUTF8    = fmt.Errorf("%w: not valid UTF-8", ErrInvalidAccount)
	errAccountControl = fmt.Errorf("%w: contains a control character", ErrInvalidAccount)
)

// Account returns the normalised form of an account identifier: Unicode's
// NFKC_Casefold, that is NFKC, full case folding and the default-ignorable
// code points removed (zero width space and joiners, soft hyphen, word
// joiner, byte order mark, variation selectors, bidi marks, Hangul fillers,
// tags), then surrounding Unicode space trimmed. So "ALICE", "Alice",
// fullwidth "ａｌｉｃｅ" and "ali\u200bce" are one account. With
// Options.FoldAccents, combining marks are also removed after decomposition,
// so "Amélie" is "amelie".
//
// Scripts are not merged: Cyrillic "а" and Latin "a" stay two accounts
// (see README, "One identity, one key").
//
// It rejects an account that is empty after normalising, longer than
// MaxAccountLen bytes once normalised, not valid UTF-8 or holding a control
// character. Account is idempotent: Account of a result returns it
// unchanged.
func (n *Normalizer) Account(s string) (string, error) {
	if len(s) > maxAccountInput {
		return "", errAccountLong
	}
	if out, ok := asciiAccount(s); ok {
		return checkAccount(out)
	}
	if !utf8.ValidString(s) {
		return "", errAccountUTF8
	}
	return checkAccount(foldAccount(s, n.options().FoldAccents))
}

// asciiAccount is Account's fast path: for ASCII, NFKC changes nothing,
// nothing is default-ignorable or a combining mark, and case folding is
// lower-casing A to Z. It reports false when s holds anything else. Control
// characters are left for checkAccount to refuse.
func asciiAccount(s string) (string, bool) {
	upper := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return "", false
		}
		upper = upper || ('A' <= c && c <= 'Z')
	}
	s = strings.TrimSpace(s)
	if !upper {
		return s, true
	}
	return strings.ToLower(s), true
}

// foldAccount is the full normalisation of a valid UTF-8 account. Folding
// can leave a string that is no longer NFKC, and NFKC can turn a character
// into a space, so the steps are repeated until nothing changes; in practice
// that is at most two rounds, and the bound keeps the work finite.
func foldAccount(s string, accents bool) string {
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	s = strings.TrimSpace(s)
	for range 4 {
		next := sc.round(s, accents)
		if string(next) == s {
			break
		}
		s = string(next)
	}
	return s
}

// scratch is working space for normalising an account, reused through
// scratchPool so that a round of normalisation allocates nothing.
type scratch struct {
	norm, fold, kept []byte
}

var scratchPool = sync.Pool{New: func() any {
	return &scratch{
		norm: make([]byte, 0, 2*maxAccountInput),
		fold: make([]byte, 0, 2*maxAccountInput),
		kept: make([]byte, 0, 2*maxAccountInput),
	}
}}

// round is one round of normalisation: NFKD, the default-ignorable code
// points (and with accents the combining marks) dropped, case folding,
// NFKC, and trimming. The result is only valid until the next call.
func (sc *scratch) round(s string, accents bool) []byte {
	sc.norm = norm.NFKD.AppendString(sc.norm[:0], s)
	sc.kept = appendVisible(sc.kept[:0], sc.norm, accents)
	folded := sc.caseFold(sc.kept)
	sc.norm = norm.NFKC.Append(sc.norm[:0], folded...)
	return bytes.TrimSpace(sc.norm)
}

// appendVisible appends to dst the code points of src that are not
// default-ignorable, and with accents not combining marks (Mn) either.
func appendVisible(dst, src []byte, accents bool) []byte {
	for i := 0; i < len(src); {
		if src[i] < utf8.RuneSelf {
			dst = append(dst, src[i])
			i++
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		if !defaultIgnorable(r) && !(accents && unicode.Is(unicode.Mn, r)) {
			dst = append(dst, src[i:i+size]...)
		}
		i += size
	}
	return dst
}

// defaultIgnorable reports whether r is a Default_Ignorable_Code_Point,
// derived the way Unicode's DerivedCoreProperties derives it from the
// properties Go's unicode package carries: Other_Default_Ignorable_Code_Point,
// format characters (Cf) and variation selectors, less white space, the
// prepended concatenation marks, the interlinear annotation characters
// U+FFF9 to U+FFFB and the Egyptian hieroglyph format controls U+13430 to
// U+1343F. A test holds it to Unicode's count.
func defaultIgnorable(r rune) bool {
	if !unicode.In(r, unicode.Other_Default_Ignorable_Code_Point, unicode.Cf, unicode.Variation_Selector) {
		return false
	}
	switch {
	case unicode.In(r, unicode.White_Space, unicode.Prepended_Concatenation_Mark):
		return false
	case 0xfff9 <= r && r <= 0xfffb, 0x13430 <= r && r <= 0x1343f:
		return false
	}
	return true
}

// caseFold returns b case-folded, and b itself when that changes nothing.
// A cases.Caser is not safe for concurrent use, so each call builds its
// own; the folding Caser is stateless and building it costs nothing.
func (sc *scratch) caseFold(b []byte) []byte {
	fold := cases.Fold()
	if n, err := fold.Span(b, true); err == nil && n == len(b) {
		return b
	}
	n, _, err := fold.Transform(sc.fold[:cap(sc.fold)], b, true)
	if err != nil {
		// The scratch space is too small: only for inputs that grew a lot
		// under NFKD, and that are about to be refused as too long.
		return fold.Bytes(b)
	}
	sc.fold = sc.fold[:n]
	return sc.fold
}

// checkAccount applies Account's rules to a normalised account.
func checkAccount(s string) (string, error) {
	switch {
	case s == "":
		return "", errAccountEmpty
	case len(s) > MaxAccountLen:
		return "", errAccountLong
	case hasControl(s):
		return "", errAccountControl
	}
	return s, nil
}

// hasControl reports whether s holds a C0 or C1 control character.
func hasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f {
			return true
		}
		if c >= utf8.RuneSelf {
			// Only the C1 controls U+0080 to U+009F are outside ASCII.
			for _, r := range s[i:] {
				if unicode.IsControl(r) {
					return true
				}
			}
			return false
		}
	}
	return false
}
