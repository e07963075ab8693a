package tokens

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
)

// sampleAttempt is an Attempt with every field set.
func sampleAttempt() Attempt {
	return Attempt{
		Issued:     t0,
		Rules:      "0123456789abcdef",
		Flow:       "login",
		Cost:       3,
		Spent:      1<<63 | 0b101,
		Account:    "AbCdEfGhIjKlMnOpQrStUg",
		Bucket:     "ZyXwVuTsRqPoNmLkJiHgFA",
		Pair:       "0123456789abcdefghijkg",
		Recipient:  "-_-_-_-_-_-_-_-_-_-_-A",
		Member:     "AbCdEfGhIjKlMnOp",
		Guess:      0x0102030405060708,
		IP:         netip.MustParseAddr("2001:db8::7"),
		Fallback:   true,
		HardStop:   true,
		Counted:    true,
		Challenged: true,
		Familiar:   true,
		Tenant:     "acme",
	}
}

// equalAttempts reports whether two Attempts are the same, comparing
// instants with Equal.
func equalAttempts(a, b Attempt) bool {
	same := a.Issued.Equal(b.Issued)
	a.Issued, b.Issued = time.Time{}, time.Time{}
	return same && a == b
}

// sealPayload signs an arbitrary payload the way Seal does, so tests can
// reach the parser with records Seal would never write.
func sealPayload(a *Attempts, payload []byte) string {
	st := a.state()
	defer a.pool.Put(st)
	b := st.keys[0].seal(append([]byte(nil), payload...), st.sum[:0])
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestAttemptRoundTrip(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	v4 := sampleAttempt()
	v4.IP = netip.MustParseAddr("203.0.113.7")
	tests := []struct {
		name string
		at   Attempt
	}{
		{"every field", sampleAttempt()},
		{"an IPv4 address", v4},
		{"minimal", Attempt{Issued: t0}},
		{"given id", Attempt{ID: "AAECAwQFBgcICQoLDA0ODw", Issued: t0, Flow: "otp_send"}},
		{"rules and a mask", Attempt{Issued: t0, Rules: "ffffffffffffffff", Flow: "login", Cost: 1, Spent: 1<<64 - 1}},
		{"an account alone", Attempt{Issued: t0, Flow: "login", Account: "AbCdEfGhIjKlMnOpQrStUg"}},
		{"a guess", Attempt{Issued: t0, Flow: "login", Guess: 1<<64 - 1}},
		{"hard stop alone", Attempt{Issued: t0, Flow: "login", HardStop: true}},
		{"counted, on the fallback", Attempt{Issued: t0, Flow: "login", Counted: true, Fallback: true}},
		{"the longest", Attempt{
			Issued: t0, Rules: "ffffffffffffffff", Flow: strings.Repeat("f", MaxAttemptFlowLen), Cost: 1 << 20, Spent: 1<<64 - 1,
			Account: "AbCdEfGhIjKlMnOpQrStUg", Bucket: "AbCdEfGhIjKlMnOpQrStUg", Pair: "AbCdEfGhIjKlMnOpQrStUg", Recipient: "AbCdEfGhIjKlMnOpQrStUg",
			Member: strings.Repeat("m", MaxAttemptMemberLen), Guess: 1<<64 - 1, IP: netip.MustParseAddr("ffff::ffff"),
			Tenant:   strings.Repeat("t", keys.MaxTenantLen),
			Fallback: true, HardStop: true, Counted: true, Challenged: true, Familiar: true,
		}},
		{"a tenant alone", Attempt{Issued: t0, Flow: "login", Tenant: "shop-eu-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := a.Seal(tt.at)
			if err != nil {
				t.Fatalf("Seal: %v", err)
			}
			if len(tok) > MaxAttemptLen {
				t.Errorf("token is %d characters, want at most %d", len(tok), MaxAttemptLen)
			}
			got, err := a.Open(tok, t0.Add(time.Minute))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			want := tt.at
			if want.ID == "" {
				if len(got.ID) != idTextLen {
					t.Errorf("ID = %q, want %d characters", got.ID, idTextLen)
				}
				want.ID = got.ID
			}
			if !equalAttempts(got, want) {
				t.Errorf("Open = %+v, want %+v", got, want)
			}
		})
	}
}

// TestAttemptHidesTheAddress: the address is in no id in clear, and the
// same address looks different in every id.
func TestAttemptHidesTheAddress(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	at := Attempt{Issued: t0, IP: netip.MustParseAddr("2001:db8::7")}
	raw := at.IP.As16()
	var seen [][]byte
	for range 3 {
		tok, err := a.Seal(at)
		if err != nil {
			t.Fatal(err)
		}
		b, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, raw[:]) || bytes.Contains(b, raw[:8]) {
			t.Fatalf("id %q holds the address in clear", tok)
		}
		enc := b[len(b)-attemptTagLen-addrLen : len(b)-attemptTagLen]
		for _, s := range seen {
			if bytes.Equal(s, enc) {
				t.Fatalf("two ids hide the address alike: %x", enc)
			}
		}
		seen = append(seen, slices.Clone(enc))
	}
}

func TestAttemptSealGivesFreshIDs(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	seen := map[string]bool{}
	for range 100 {
		tok, err := a.Seal(Attempt{Issued: t0})
		if err != nil {
			t.Fatal(err)
		}
		at, err := a.Open(tok, t0)
		if err != nil {
			t.Fatal(err)
		}
		if seen[at.ID] {
			t.Fatalf("id %q given twice", at.ID)
		}
		seen[at.ID] = true
	}
}

func TestAttemptKeepsMilliseconds(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	issued := t0.Add(1234567891 * time.Nanosecond)
	tok, err := a.Seal(Attempt{Issued: issued})
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.Open(tok, t0)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(1234 * time.Millisecond); !got.Issued.Equal(want) {
		t.Errorf("Issued = %v, want %v", got.Issued, want)
	}
}

func TestAttemptExpiry(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	tok, err := a.Seal(Attempt{Issued: t0, Flow: "login"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		now     time.Time
		wantErr error
	}{
		{"fresh", t0, nil},
		{"9m59s later", t0.Add(9*time.Minute + 59*time.Second), nil},
		{"exactly AttemptTTL later", t0.Add(AttemptTTL), nil},
		{"10m01s later", t0.Add(10*time.Minute + time.Second), ErrExpiredAttempt},
		{"a day later", t0.Add(24 * time.Hour), ErrExpiredAttempt},
		{"issued 1m ahead of now", t0.Add(-time.Minute), nil},
		{"issued 1m01s ahead of now", t0.Add(-time.Minute - time.Second), ErrInvalidAttempt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Open(tok, tt.now)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Open error = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, ErrInvalidAttempt) {
				t.Fatalf("Open error = %v, want %v (and ErrInvalidAttempt)", err, tt.wantErr)
			}
			if tt.wantErr == ErrInvalidAttempt && errors.Is(err, ErrExpiredAttempt) {
				t.Errorf("Open error = %v, want an invalid id, not an expired one", err)
			}
		})
	}
}

func TestAttemptTamperingAnyByte(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	tok, err := a.Seal(sampleAttempt())
	if err != nil {
		t.Fatal(err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	for i := range len(tok) {
		for _, c := range []byte{alphabet[(strings.IndexByte(alphabet, tok[i])+1)%64], alphabet[(strings.IndexByte(alphabet, tok[i])+32)%64], '=', '\n', '+'} {
			bad := tok[:i] + string(c) + tok[i+1:]
			if _, err := a.Open(bad, t0); !errors.Is(err, ErrInvalidAttempt) {
				t.Fatalf("byte %d changed to %q: Open error = %v, want ErrInvalidAttempt", i, c, err)
			}
		}
	}
}

func TestAttemptOpenRejectsMalformed(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	tok, err := a.Seal(sampleAttempt())
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewAttempts(testKey(t, 2)).Seal(sampleAttempt())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		token string
	}{
		{"empty", ""},
		{"garbage", "!!!!"},
		{"short", "abc"},
		{"padding", tok + "=="},
		{"newline inside", tok[:10] + "\n" + tok[10:]},
		{"standard base64", strings.NewReplacer("-", "+", "_", "/").Replace(tok) + "+/"},
		{"truncated by one", tok[:len(tok)-1]},
		{"truncated to the tag", tok[:(headerLen+attemptTagLen)*4/3]},
		{"one more character", tok + "A"},
		{"sealed by another key", other},
		{"huge", strings.Repeat("A", 1<<20)},
		{"just over the limit", strings.Repeat("A", MaxAttemptLen+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := a.Open(tt.token, t0); !errors.Is(err, ErrInvalidAttempt) || errors.Is(err, ErrExpiredAttempt) {
				t.Errorf("Open error = %v, want ErrInvalidAttempt", err)
			}
		})
	}
	for n := range len(tok) {
		if _, err := a.Open(tok[:n], t0); !errors.Is(err, ErrInvalidAttempt) {
			t.Fatalf("Open(first %d bytes) error = %v, want ErrInvalidAttempt", n, err)
		}
	}
}

func TestAttemptOpenHugeIsCheap(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	huge := strings.Repeat("A", 1<<20)
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := a.Open(huge, t0); !errors.Is(err, ErrInvalidAttempt) {
			t.Fatalf("Open(1 MB) error = %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("rejecting a 1 MB id allocated %v times, want 0", allocs)
	}
}

func TestAttemptOpenIsStrict(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	// header is a valid version, id and issue time.
	header := append([]byte{attemptVersion}, make([]byte, idLen)...)
	header = binary.BigEndian.AppendUint64(header, uint64(t0.UnixMilli()))
	record := func(parts ...[]byte) []byte {
		return slices.Concat(append([][]byte{header}, parts...)...)
	}
	uv := func(v uint64) []byte { return binary.AppendUvarint(nil, v) }
	flow := []byte{5, 'l', 'o', 'g', 'i', 'n'}
	subject := bytes.Repeat([]byte{7}, subjectLen)
	tests := []struct {
		name    string
		payload []byte
		wantOK  bool
	}{
		{"well formed", record(flow, uv(1), uv(0), uv(0)), true},
		{"no flow", record([]byte{0}, uv(0), uv(0), uv(0)), true},
		{"with the rules hash", record(flow, uv(1), uv(3), uv(flagRules), make([]byte, rulesHashLen)), true},
		{"rules flag without the hash", record(flow, uv(1), uv(3), uv(flagRules)), false},
		{"an account", record(flow, uv(1), uv(0), uv(flagAccount), subject), true},
		{"a short account", record(flow, uv(1), uv(0), uv(flagAccount), subject[:15]), false},
		{"every flag", record(flow, uv(1), uv(0), uv(flagFallback|flagHardStop|flagCounted|flagChallenged|flagFamiliar)), true},
		{"unknown flag", record(flow, uv(1), uv(0), uv(flagsKnown+1)), false},
		{"a member", record(flow, uv(1), uv(0), uv(flagMember), []byte{2, 'a', 'b'}), true},
		{"an empty member", record(flow, uv(1), uv(0), uv(flagMember), []byte{0}), false},
		{"a member not base64url", record(flow, uv(1), uv(0), uv(flagMember), []byte{2, 'a', ':'}), false},
		{"a member of 25 bytes", record(flow, uv(1), uv(0), uv(flagMember), []byte{25}, bytes.Repeat([]byte{'a'}, 25)), false},
		{"a guess", record(flow, uv(1), uv(0), uv(flagGuess), []byte{0, 0, 0, 0, 0, 0, 0, 9}), true},
		{"a zero guess", record(flow, uv(1), uv(0), uv(flagGuess), make([]byte, guessLen)), false},
		{"a guess cut short", record(flow, uv(1), uv(0), uv(flagGuess), []byte{1}), false},
		{"an address", record(flow, uv(1), uv(0), uv(flagAddr), make([]byte, addrLen)), true},
		{"IPv4 without an address", record(flow, uv(1), uv(0), uv(flagIPv4)), false},
		{"trailing byte", record(flow, uv(1), uv(0), uv(0), []byte{0}), false},
		{"unknown version", append([]byte{attemptVersion + 1}, record(flow, uv(1), uv(0), uv(0))[1:]...), false},
		{"overlong uvarint", record(flow, []byte{0x81, 0x00}, uv(0), uv(0)), false},
		{"cost past a million", record(flow, uv(1<<20+1), uv(0), uv(0)), false},
		{"flow of 33 bytes", record([]byte{33}, bytes.Repeat([]byte{'f'}, 33), uv(1), uv(0), uv(0)), false},
		{"flow runs past the end", record([]byte{5, 'a'}), false},
		{"missing fields", record(flow, uv(1), uv(0)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.Open(sealPayload(a, tt.payload), t0)
			if tt.wantOK && err != nil {
				t.Fatalf("Open error = %v, want nil", err)
			}
			if !tt.wantOK && !errors.Is(err, ErrInvalidAttempt) {
				t.Fatalf("Open error = %v, want ErrInvalidAttempt", err)
			}
		})
	}
}

func TestAttemptSealRejects(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	tests := []struct {
		name string
		at   Attempt
	}{
		{"no issue time", Attempt{}},
		{"id not base64url", Attempt{ID: "not an id at all!!!!!!", Issued: t0}},
		{"id too short", Attempt{ID: "AAEC", Issued: t0}},
		{"id too long", Attempt{ID: strings.Repeat("A", 1<<10), Issued: t0}},
		{"id not canonical", Attempt{ID: "AAECAwQFBgcICQoLDA0ODx", Issued: t0}},
		{"rules hash too short", Attempt{Issued: t0, Rules: "0123"}},
		{"rules hash in capitals", Attempt{Issued: t0, Rules: "0123456789ABCDEF"}},
		{"rules hash not hex", Attempt{Issued: t0, Rules: "0123456789abcdeg"}},
		{"flow too long", Attempt{Issued: t0, Flow: strings.Repeat("f", MaxAttemptFlowLen+1)}},
		{"negative cost", Attempt{Issued: t0, Cost: -1}},
		{"cost past a million", Attempt{Issued: t0, Cost: 1<<20 + 1}},
		{"account too long", Attempt{Issued: t0, Account: strings.Repeat("a", 23)}},
		{"bucket too short", Attempt{Issued: t0, Bucket: "abc"}},
		{"pair not base64url", Attempt{Issued: t0, Pair: strings.Repeat("!", 22)}},
		{"recipient not canonical", Attempt{Issued: t0, Recipient: "AbCdEfGhIjKlMnOpQrStUv"}},
		{"member too long", Attempt{Issued: t0, Member: strings.Repeat("m", MaxAttemptMemberLen+1)}},
		{"member not base64url", Attempt{Issued: t0, Member: "a:b"}},
		{"tenant not a name", Attempt{Issued: t0, Tenant: "Acme"}},
		{"tenant too long", Attempt{Issued: t0, Tenant: strings.Repeat("t", keys.MaxTenantLen+1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := a.Seal(tt.at)
			if !errors.Is(err, ErrInvalidAttempt) {
				t.Fatalf("Seal = %q, %v; want ErrInvalidAttempt", tok, err)
			}
		})
	}
}

// TestAttemptOpensTheLayoutBefore: an id of the layout before this one,
// store keys and all, opens to its header alone, with no rules and nothing
// spent, so that a fleet being upgraded settles nothing of it rather than
// refusing an honest report.
func TestAttemptOpensTheLayoutBefore(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	legacy := append([]byte{legacyVersion}, bytes.Repeat([]byte{9}, idLen)...)
	legacy = binary.BigEndian.AppendUint64(legacy, uint64(t0.UnixMilli()))
	legacy = appendString(legacy, "login")
	legacy = appendString(legacy, "AbCdEfGhIjKlMnOpQrStUg")
	legacy = appendString(legacy, "ZyXwVuTsRqPoNmLkJiHgFe")
	legacy = append(legacy, legacyFlagHardStop|legacyFlagCounted)
	// Twenty refunds of long store keys, as the layout carried them.
	legacy = append(legacy, 20)
	for range 20 {
		legacy = appendString(legacy, "guardian:v3:{AbCdEfGhIjKlMnOpQrStUg}:"+strings.Repeat("r", 63))
		legacy = append(legacy, 0, 0x80, 0x01)
	}
	tok := sealPayload(a, legacy)
	if len(tok) <= MaxAttemptLen {
		t.Fatalf("the legacy id is %d characters; this test wants one longer than %d", len(tok), MaxAttemptLen)
	}
	got, err := a.Open(tok, t0)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	want := Attempt{ID: strictB64.EncodeToString(bytes.Repeat([]byte{9}, idLen)), Issued: t0, Flow: "login", Account: "AbCdEfGhIjKlMnOpQrStUg", HardStop: true, Counted: true}
	if !equalAttempts(got, want) {
		t.Fatalf("Open = %+v, want %+v", got, want)
	}
	for name, bad := range map[string][]byte{
		"cut in its header": legacy[:legacyHeaderLen+3],
		"unknown flag":      append(slices.Clone(legacy[:legacyHeaderLen+6+22+22+2]), 8),
	} {
		if _, err := a.Open(sealPayload(a, bad), t0); !errors.Is(err, ErrInvalidAttempt) {
			t.Errorf("%s: Open error = %v, want ErrInvalidAttempt", name, err)
		}
	}
	// Ids of this layout are never that long.
	long := sealPayload(a, append([]byte{attemptVersion}, legacy[1:]...))
	if _, err := a.Open(long, t0); !errors.Is(err, ErrInvalidAttempt) {
		t.Errorf("a long id of this layout: Open error = %v, want ErrInvalidAttempt", err)
	}
}
