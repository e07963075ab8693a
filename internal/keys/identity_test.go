package keys

import (
	"errors"
	"testing"
	"unicode"
)

// mustNormalizer returns a Normalizer with o, failing the test on an error.
func mustNormalizer(tb testing.TB, o Options) *Normalizer {
	tb.Helper()
	n, err := NewNormalizer(o)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// sameKey asserts that every variant normalises to want with norm.
func sameKey(t *testing.T, norm func(string) (string, error), want string, variants ...string) {
	t.Helper()
	for _, v := range variants {
		got, err := norm(v)
		if err != nil {
			t.Errorf("%+q: error %v, want %q", v, err, want)
			continue
		}
		if got != want {
			t.Errorf("%+q = %+q, want %+q", v, got, want)
		}
	}
}

// apart asserts that no two of the inputs normalise alike with norm.
func apart(t *testing.T, norm func(string) (string, error), inputs ...string) {
	t.Helper()
	seen := map[string]string{}
	for _, in := range inputs {
		got, err := norm(in)
		if err != nil {
			t.Fatalf("%+q: %v", in, err)
		}
		if first, dup := seen[got]; dup {
			t.Errorf("%+q and %+q both normalise to %+q, want them apart", first, in, got)
		}
		seen[got] = in
	}
}

func TestAccountDropsInvisibleCharacters(t *testing.T) {
	sameKey(t, Account, "alice@example.com",
		"alice@example.com",
		"ali\u200bce@example.com",       // zero width space
		"ali\u200dce@example.com",       // zero width joiner
		"ali\u200cce@example.com",       // zero width non-joiner
		"ali\u00adce@example.com",       // soft hyphen
		"ali\u2060ce@example.com",       // word joiner
		"\ufeffalice@example.com",       // byte order mark
		"alice\ufe0f@example.com",       // variation selector 16
		"ali\U000e0100ce@example.com",   // variation selector 17
		"\u200ealice@example.com\u200f", // left-to-right and right-to-left marks
		"ali\u202ece@example.com",       // right-to-left override
		"ali\u2066ce\u2069@example.com", // bidi isolates
		"ali\u034fce@example.com",       // combining grapheme joiner
		"ali\u3164ce@example.com",       // Hangul filler
		"alice\U000e0041@example.com",   // tag latin capital letter a
		"ALI\u200bCE@EXAMPLE.COM",
		" \u200b alice@example.com \u2060 ",
	)
}

func TestAccountKeepsWhatIsNotIgnorable(t *testing.T) {
	apart(t, Account,
		"alice",
		"аlice",  // Cyrillic а: a confusable, deliberately another account
		"alіce",  // Cyrillic і
		"alice.", // punctuation counts
		"al ice", // an inner space counts
		"amélie",
		"amelie", // accents count by default
		"i\u0307stanbul",
		"ıstanbul",
		"istanbul",
		"\u0600x", // a prepended concatenation mark is not ignorable
	)
}

func TestAccountFoldAccents(t *testing.T) {
	n := mustNormalizer(t, Options{FoldAccents: true})
	sameKey(t, n.Account, "amelie", "amelie", "Amélie", "AME\u0301LIE", "ame\u0300\u0302lie", "ame\u200b\u0301lie")
	sameKey(t, n.Account, "istanbul", "İstanbul", "istanbul", "ISTANBUL")
	sameKey(t, n.Account, "strasse", "Straße", "STRASSE")
	// Letters that are not a base letter and a mark stay themselves.
	apart(t, n.Account, "ø", "o", "ł", "l", "ı", "i", "аlice", "alice")
}

func TestDefaultIgnorableMatchesUnicode(t *testing.T) {
	for _, r := range []rune{0x00ad, 0x034f, 0x061c, 0x115f, 0x180b, 0x180e, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f,
		0x202a, 0x202e, 0x2060, 0x2064, 0x2066, 0x2069, 0x206f, 0x3164, 0xfe00, 0xfe0f, 0xfeff, 0xffa0,
		0x1bca0, 0x1d173, 0xe0000, 0xe0001, 0xe007f, 0xe0100, 0xe01ef, 0xe0fff} {
		if !defaultIgnorable(r) {
			t.Errorf("U+%04X is Default_Ignorable_Code_Point; defaultIgnorable says no", r)
		}
	}
	for _, r := range []rune{'a', ' ', 0x00a0, 0x0301, 0x0600, 0x06dd, 0x110bd, 0xfff9, 0xfffb, 0x13430, 0x1343f, 0x2028, 0x3000} {
		if defaultIgnorable(r) {
			t.Errorf("U+%04X is not Default_Ignorable_Code_Point; defaultIgnorable says it is", r)
		}
	}
	// DerivedCoreProperties.txt of Unicode 15.0.0, the version of Go's
	// tables: "Total code points: 4174".
	if unicode.Version == "15.0.0" {
		n := 0
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if defaultIgnorable(r) {
				n++
			}
		}
		if n != 4174 {
			t.Errorf("%d code points are default-ignorable, Unicode 15.0.0 has 4174", n)
		}
	}
}

func TestPhoneFormatsAreOneRecipient(t *testing.T) {
	london := []string{"+44 20 7946 0958", "0044 20 7946 0958", "+44 (0)20 7946 0958", "+442079460958", "+44-20-7946-0958", "(+44) 20 7946 0958"}
	sameKey(t, Recipient, "+442079460958", london...)
	gb := mustNormalizer(t, Options{DefaultRegion: "GB"})
	sameKey(t, gb.Recipient, "+442079460958", append(london, "020 7946 0958", "(020) 7946 0958", "02079460958")...)
	us := mustNormalizer(t, Options{DefaultRegion: "us"})
	sameKey(t, us.Recipient, "+442079460958", "011 44 20 7946 0958", "+44 20 7946 0958")
	sameKey(t, us.Recipient, "+15550100000", "(555) 010-0000", "1 555 010 0000", "+1 555 010 0000", "555.010.0000")

	// Without a region, a number with no international prefix is its
	// digits: 020 7946 0958 could be London or anywhere else.
	apart(t, Recipient, "+44 20 7946 0958", "020 7946 0958")
	apart(t, gb.Recipient, "+44 20 7946 0958", "+44 20 7946 0959", "+1 555 010 0000", "+33 1 23 45 67 89")
}

func TestPhoneImpossibleInRegion(t *testing.T) {
	gb := mustNormalizer(t, Options{DefaultRegion: "GB"})
	for _, in := range []string{"7946 0958", "020 7946 09581", "0 1", "1 555 010 0000", "000000000"} {
		if got, err := gb.Recipient(in); !errors.Is(err, ErrInvalidRecipient) {
			t.Errorf("GB %q = %q, %v; want ErrInvalidRecipient", in, got, err)
		}
	}
	_, err := gb.Recipient("7946 0958")
	if got, want := err.Error(), "keys: invalid recipient: not a possible phone number"; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
}

func TestNewNormalizerRegion(t *testing.T) {
	for _, ok := range []string{"", "GB", "gb", "Us", "FR", "JP"} {
		if _, err := NewNormalizer(Options{DefaultRegion: ok}); err != nil {
			t.Errorf("region %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"UK", "G", "GBR", "ZZ", "001", "XX", "g1", "ＧＢ"} {
		_, err := NewNormalizer(Options{DefaultRegion: bad})
		if !errors.Is(err, ErrInvalidRegion) {
			t.Errorf("region %q: error %v, want ErrInvalidRegion", bad, err)
		}
	}
}

func TestEmailVariantsAreOneRecipient(t *testing.T) {
	sameKey(t, Recipient, "bob@example.com",
		"bob@example.com",
		"Bob@Example.COM",
		"bob@example.com.",
		"bob@example.com..",
		"bob@ｅｘａｍｐｌｅ.com",
		"bob@ＥＸＡＭＰＬＥ．ＣＯＭ",
		"bob@example\u3002com",
		"bob+otp@example.com",
		"bob+1@example.com",
		"BOB+Tag+More@example.com.",
		"ｂｏｂ@example.com",
		"bo\u200bb@example.com",
		"bob\uff0bx@example.com",
	)
	sameKey(t, Recipient, "bob@xn--exmple-cua.com", "bob@exämple.com", "bob@EXÄMPLE.com.", "bob@xn--exmple-cua.com", "bob@exa\u0308mple.com")
	apart(t, Recipient, "bob@example.com", "bob@example.org", "b.ob@example.com", "bob-1@example.com", "bob@еxample.com")
}
