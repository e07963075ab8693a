package tokens

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"github.com/guardian-sec/guardian/internal/store"
	"slices"
	"strings"
	"testing"
	"time"
)

// sampleAttempt is an Attempt with every field set.
func sampleAttempt() Attempt {
	return Attempt{
		Issued:   t0,
		Flow:     "login",
		Account:  "AbCdEfGhIjKlMnOpQrStUv",
		Device:   "ZyXwVuTsRqPoNmLkJiHgFe",
		Fallback: true,
		HardStop: true,
		Refunds: []store.Settlement{
			{Key: "guardian:v1:{AbCdEfGhIjKlMnOpQrStUv}:login-account", Action: store.GiveBack, Span: 12 * time.Second, Local: true},
			{Key: "guardian:v1:{AbCdEfGhIjKlMnOpQrStUv}:hard-stop", Action: store.Reset, Local: true},
			{Key: "guardian:v1:{0123456789abcdefghijkl}:login-ip", Action: store.GiveBack, Span: 20 * time.Second, Local: true},
		},
	}
}

// equalAttempts reports whether two Attempts are the same, comparing
// instants with Equal and treating a nil and an empty refund list alike.
func equalAttempts(a, b Attempt) bool {
	return a.ID == b.ID && a.Issued.Equal(b.Issued) && a.Flow == b.Flow && a.Account == b.Account &&
		a.Device == b.Device && a.Fallback == b.Fallback && a.HardStop == b.HardStop && slices.Equal(a.Refunds, b.Refunds)
}

// sealPayload signs an arbitrary payload the way Seal does, so tests can
// reach the parser with records Seal would never write.
func sealPayload(a *Attempts, payload []byte) string {
	st := a.pool.Get().(*attemptState)
	defer a.pool.Put(st)
	b := st.tag(append([]byte(nil), payload...))
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestAttemptRoundTrip(t *testing.T) {
	a := NewAttempts(testKey(t, 1))
	tests := []struct {
		name string
		at   Attempt
	}{
		{"every field", sampleAttempt()},
		{"minimal", Attempt{Issued: t0}},
		{"given id", Attempt{ID: "AAECAwQFBgcICQoLDA0ODw", Issued: t0, Flow: "otp_send"}},
		{"counter only", Attempt{Issued: t0, Flow: "login", Refunds: []store.Settlement{{Key: "k", Action: store.Reset}}}},
		{"guesses", Attempt{Issued: t0, Flow: "login", Refunds: []store.Settlement{{Key: "g", Action: store.Forget, Guess: 1<<64 - 1, Span: 24 * time.Hour}}}},
		{"hard stop alone", Attempt{Issued: t0, Flow: "login", HardStop: true}},
		{"counted", Attempt{Issued: t0, Flow: "login", Counted: true}},
		{"counted, on the fallback", Attempt{Issued: t0, Flow: "login", Counted: true, Fallback: true}},
		{"counted, a hard stop", Attempt{Issued: t0, Flow: "login", Counted: true, HardStop: true}},
		{"a familiar network", Attempt{Issued: t0, Flow: "login", Refunds: []store.Settlement{
			{Key: "k", Action: store.Reset},
			{Key: "f", Action: store.Learn, Member: "AbCdEfGhIjKlMnOp", Span: 90 * 24 * time.Hour},
		}}},
		{"counted, a guess and a familiar network", Attempt{Issued: t0, Flow: "login", Counted: true, HardStop: true, Refunds: []store.Settlement{
			{Key: "g", Action: store.Forget, Guess: 0x0102030405060708, Span: 24 * time.Hour},
			{Key: "f", Action: store.Learn, Member: "AbCdEfGhIjKlMnOp", Span: 90 * 24 * time.Hour},
			{Key: "k", Action: store.Reset},
		}}},
		{"bounds", Attempt{
			Issued: t0, Flow: strings.Repeat("f", MaxAttemptFieldLen), Account: strings.Repeat("a", MaxAttemptFieldLen),
			Device:  strings.Repeat("d", MaxAttemptFieldLen),
			Refunds: slices.Repeat([]store.Settlement{{Key: strings.Repeat("k", MaxRefundKeyLen), Action: store.GiveBack, Span: 1<<63 - 1}}, 20),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := a.Seal(tt.at)
			if err != nil {
				t.Fatalf("Seal error = %v", err)
			}
			if len(tok) > MaxAttemptLen {
				t.Errorf("token is %d bytes, want at most %d", len(tok), MaxAttemptLen)
			}
			got, err := a.Open(tok, t0.Add(time.Minute))
			if err != nil {
				t.Fatalf("Open error = %v", err)
			}
			want := tt.at
			if want.ID == "" {
				if len(got.ID) != 22 {
					t.Errorf("Seal gave id %q, want 22 characters", got.ID)
				}
				want.ID = got.ID
			}
			if !equalAttempts(got, want) {
				t.Errorf("Open = %+v, want %+v", got, want)
			}
		})
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
		{"truncated to the tag", tok[:minPayload]},
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
	empty3 := []byte{0, 0, 0}
	tests := []struct {
		name    string
		payload []byte
		wantOK  bool
	}{
		{"well formed", record(empty3, []byte{0}, []byte{0}), true},
		{"well formed with a refund", record(empty3, []byte{1}, []byte{1, 1, 'k', 1, 0}), true},
		{"trailing byte", record(empty3, []byte{0}, []byte{0}, []byte{0}), false},
		{"unknown version", append([]byte{2}, record(empty3, []byte{0}, []byte{0})[1:]...), false},
		{"kind byte 2 (guesses) with its guess", record(empty3, []byte{0}, []byte{1, 1, 'k', 2, 0, 0, 0, 0, 0, 0, 0, 0, 7}), true},
		{"kind byte 2 (guesses) without its guess", record(empty3, []byte{0}, []byte{1, 1, 'k', 2, 0}), false},
		{"hard stop and fallback flags", record(empty3, []byte{3}, []byte{0}), true},
		{"all three flags", record(empty3, []byte{7}, []byte{0}), true},
		{"unknown flag", record(empty3, []byte{8}, []byte{0}), false},
		{"kind byte 3 (familiar) with its member", record(empty3, []byte{0}, []byte{1, 1, 'k', 3, 1, 'm', 0}), true},
		{"kind byte 3 (familiar) without a member", record(empty3, []byte{0}, []byte{1, 1, 'k', 3, 0, 0}), false},
		{"kind byte 4", record(empty3, []byte{0}, []byte{1, 1, 'k', 4, 0}), false},
		{"overlong uvarint", record(empty3, []byte{0}, []byte{0x80, 0x00}), false},
		{"33 refunds", record(empty3, []byte{0}, []byte{33}), false},
		{"field of 65 bytes", record([]byte{65}, []byte(strings.Repeat("f", 65)), []byte{0, 0, 0, 0}), false},
		{"key of 129 bytes", record(empty3, []byte{0}, []byte{1, 0x81, 0x01}, []byte(strings.Repeat("k", 129)), []byte{0, 0}), false},
		{"amount past int64", record(empty3, []byte{0}, []byte{1, 1, 'k', 0}, binary.AppendUvarint(nil, 1<<63)), false},
		{"field runs past the end", record([]byte{5, 'a'}), false},
		{"missing flags", record(empty3), false},
		{"missing refund count", record(empty3, []byte{0}), false},
		{"missing refund", record(empty3, []byte{0}, []byte{1}), false},
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
	refunds := func(n, keyLen int) []store.Settlement {
		return slices.Repeat([]store.Settlement{{Key: strings.Repeat("k", keyLen), Action: store.GiveBack}}, n)
	}
	tests := []struct {
		name string
		at   Attempt
	}{
		{"no issue time", Attempt{}},
		{"id not base64url", Attempt{ID: "not an id at all!!!!!!", Issued: t0}},
		{"id too short", Attempt{ID: "AAEC", Issued: t0}},
		{"id too long", Attempt{ID: strings.Repeat("A", 1<<10), Issued: t0}},
		{"id not canonical", Attempt{ID: "AAECAwQFBgcICQoLDA0ODx", Issued: t0}},
		{"flow too long", Attempt{Issued: t0, Flow: strings.Repeat("f", MaxAttemptFieldLen+1)}},
		{"account too long", Attempt{Issued: t0, Account: strings.Repeat("a", MaxAttemptFieldLen+1)}},
		{"device too long", Attempt{Issued: t0, Device: strings.Repeat("d", MaxAttemptFieldLen+1)}},
		{"33 refunds", Attempt{Issued: t0, Refunds: refunds(MaxRefunds+1, 1)}},
		{"refund key too long", Attempt{Issued: t0, Refunds: refunds(1, MaxRefundKeyLen+1)}},
		{"negative amount", Attempt{Issued: t0, Refunds: []store.Settlement{{Key: "k", Action: store.GiveBack, Span: -time.Second}}}},
		{"unknown kind", Attempt{Issued: t0, Refunds: []store.Settlement{{Key: "k"}}}},
		{"familiar without a member", Attempt{Issued: t0, Refunds: []store.Settlement{{Key: "k", Action: store.Learn}}}},
		{"over 4 KiB in all", Attempt{Issued: t0, Refunds: refunds(MaxRefunds, MaxRefundKeyLen)}},
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
