package keys

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"
	"golang.org/x/net/idna"
)

// MaxEmailLen is the longest e-mail recipient, in bytes (the longest
// address SMTP can carry).
const MaxEmailLen = 254

// maxRecipientInput bounds a recipient before any work, separators included.
const maxRecipientInput = 4 * MaxEmailLen

// An E.164 number has at most 15 digits. A number as written may have more:
// an international prefix (00, 011, 0011) or a trunk prefix in front.
// guardian keeps numbers of 8 to 15 digits, the bounds it always had.
const (
	minPhoneDigits   = 8
	maxPhoneDigits   = 15
	maxWrittenDigits = 20
)

var (
	errRecipient      = fmt.Errorf("%w: not a phone number (8 to 15 digits) or an e-mail address", ErrInvalidRecipient)
	errPhoneNotNumber = fmt.Errorf("%w: not a possible phone number", ErrInvalidRecipient)
	errEmailLong      = fmt.Errorf("%w: e-mail address longer than %d bytes", ErrInvalidRecipient, MaxEmailLen)
	errEmailMalformed = fmt.Errorf("%w: e-mail address must be local@domain, without spaces or control characters", ErrInvalidRecipient)
	errEmailDomain    = fmt.Errorf("%w: e-mail domain is not a valid domain name", ErrInvalidRecipient)
)

// Recipient returns the normalised form of where a one-time code is sent.
// Errors never contain the value.
//
// With an '@' it is an e-mail address: exactly one '@' with a non-empty
// local part and domain, no space or control character, at most
// MaxEmailLen bytes once normalised. The local part is normalised as an
// account with the default Options (NFKC_Casefold: lower case for ASCII)
// and loses its sub-address: "bob+news" is "bob", since both reach one
// inbox. The domain loses its trailing dots and is put in IDNA ASCII form
// (UTS #46 lookup mapping), so "ＥＸＡＭＰＬＥ.com." is "example.com".
//
// Otherwise it is a phone number: ASCII digits with spaces, '-', '.', '('
// and ')' between them, and one '+' before the first digit. It is parsed
// with libphonenumber's metadata and returned in E.164 form ("+" and the
// digits). A leading '+' or 00 is an international prefix; with
// Options.DefaultRegion a number without one is dialled in that region (its
// trunk prefix and its own international prefix understood). A number
// libphonenumber finds impossible there (wrong length for its country, no
// such country code) is an error. Possible, not assigned: fictional ranges
// such as +1 555 01xx are accepted. Without a default region, a number
// with no international prefix is read as an international number written
// without its '+'; when that is not a possible number either, it is kept as
// its 8 to 15 digits, without a '+'.
func (n *Normalizer) Recipient(s string) (string, error) {
	if len(s) > maxRecipientInput {
		return "", errRecipient
	}
	if strings.IndexByte(s, '@') >= 0 {
		return email(s)
	}
	return phone(s, n.options().DefaultRegion)
}

// email normalises an e-mail recipient.
func email(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", errEmailMalformed
	}
	s = strings.TrimSpace(s)
	if len(s) > maxRecipientInput/2 {
		return "", errEmailLong
	}
	local, domain, ok := splitEmail(s)
	if !ok {
		return "", errEmailMalformed
	}
	local, err := Account(local)
	switch {
	case errors.Is(err, errAccountLong):
		return "", errEmailLong
	case err != nil:
		return "", errEmailMalformed
	}
	if plus := strings.IndexByte(local, '+'); plus > 0 {
		local = local[:plus]
	}
	domain, err = asciiDomain(domain)
	if err != nil {
		return "", err
	}
	// Normalising can bring out what the written form hid: a fullwidth
	// '＠' or a character whose compatibility form holds a space.
	if strings.ContainsFunc(local, unusable) || strings.ContainsRune(local, '@') {
		return "", errEmailMalformed
	}
	out := local + "@" + domain
	if len(out) > MaxEmailLen {
		return "", errEmailLong
	}
	return out, nil
}

// splitEmail splits s at its one '@', and reports false unless both sides
// are non-empty and free of spaces and control characters.
func splitEmail(s string) (local, domain string, ok bool) {
	at := strings.IndexByte(s, '@')
	if at <= 0 || at == len(s)-1 || strings.IndexByte(s[at+1:], '@') >= 0 || strings.ContainsFunc(s, unusable) {
		return "", "", false
	}
	return s[:at], s[at+1:], true
}

// unusable reports whether r may not appear in an e-mail address.
func unusable(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }

// asciiDomain returns an e-mail domain in IDNA ASCII form, lower case,
// without trailing dots. An ASCII domain that IDNA refuses (an address
// literal, an underscore) is kept lower-cased: there is nothing to map.
func asciiDomain(d string) (string, error) {
	d = strings.TrimRight(d, ".")
	a, err := idna.Lookup.ToASCII(d)
	switch {
	case err == nil:
		d = strings.TrimRight(a, ".")
	case isASCII(d):
		d = strings.ToLower(d)
	default:
		return "", errEmailDomain
	}
	if d == "" || strings.ContainsFunc(d, unusable) || strings.ContainsRune(d, '@') {
		return "", errEmailDomain
	}
	return d, nil
}

// isASCII reports whether s is all ASCII.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// phone normalises a phone recipient, reading a number without an
// international prefix in region ("" for none).
func phone(s, region string) (string, error) {
	var buf [1 + maxWrittenDigits]byte
	digits, plus, ok := phoneDigits(s, buf[:1])
	if !ok {
		return "", errRecipient
	}
	switch {
	case plus:
		return international(digits)
	case len(digits) > 3 && digits[1] == '0' && digits[2] == '0':
		// 00, the international prefix most of the world dials.
		digits[2] = '+'
		return international(digits[2:])
	case region != "":
		return possible(string(digits[1:]), region)
	}
	// No prefix and no region: an international number without its '+',
	// or failing that its digits, as guardian always read them.
	if n := len(digits) - 1; n < minPhoneDigits || n > maxPhoneDigits {
		return "", errRecipient
	}
	if e164, err := possible(string(digits), "ZZ"); err == nil {
		return e164, nil
	}
	return string(digits[1:]), nil
}

// phoneDigits appends the digits of a written number to dst, whose first
// byte is room for a '+', and reports whether the number had a '+'. It
// reports false for any character other than digits and separators, a '+'
// after a digit or a second '+', and more than maxWrittenDigits digits.
func phoneDigits(s string, dst []byte) ([]byte, bool, bool) {
	plus := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			if len(dst) == cap(dst) {
				return nil, false, false
			}
			dst = append(dst, c)
		case c == ' ' || c == '-' || c == '.' || c == '(' || c == ')':
		case c == '+' && !plus && len(dst) == 1:
			plus = true
		default:
			return nil, false, false
		}
	}
	dst[0] = '+'
	return dst, plus, true
}

// international normalises "+" and the digits after an international
// prefix.
func international(digits []byte) (string, error) {
	if n := len(digits) - 1; n < minPhoneDigits || n > maxPhoneDigits {
		return "", errRecipient
	}
	return possible(string(digits), "ZZ")
}

// possible returns the E.164 form of number as dialled in region ("ZZ":
// from anywhere, with a '+'), when libphonenumber finds it a possible
// number: a known country code and a length that country's numbers have.
// Reading a number can strip a trunk prefix after its country code ("+44
// (0)20" is "+44 20"), and the result can start with the trunk digit again,
// so the E.164 form is read again until it stays the same: a result must
// read as itself.
func possible(number, region string) (string, error) {
	cur, err := parseE164(number, region)
	if err == nil && cur == number {
		return cur, nil // already E.164: reading it again reads the same
	}
	for range maxPhoneDigits {
		if err != nil {
			return "", err
		}
		var next string
		if next, err = parseE164(cur, "ZZ"); err == nil && next == cur {
			return cur, nil
		}
		cur = next
	}
	return "", errPhoneNotNumber
}

// parseE164 is one reading of number by libphonenumber.
func parseE164(number, region string) (string, error) {
	var pn phonenumbers.PhoneNumber
	if err := phonenumbers.ParseToNumber(number, region, &pn); err != nil {
		return "", errPhoneNotNumber
	}
	if phonenumbers.IsPossibleNumberWithReason(&pn) != phonenumbers.IS_POSSIBLE {
		return "", errPhoneNotNumber
	}
	e164 := phonenumbers.Format(&pn, phonenumbers.E164)
	if n := len(e164) - 1; n < minPhoneDigits || n > maxPhoneDigits {
		return "", errPhoneNotNumber
	}
	return e164, nil
}
