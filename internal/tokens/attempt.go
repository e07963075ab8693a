package tokens

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"math"
	"sync"
	"time"

	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store"
)

// attemptPurpose is the secret.Key purpose of the attempt id key.
const attemptPurpose = "guardian attempt ids v1"

// AttemptTTL is how long an attempt id can be reported unless WithTTL says
// otherwise (--attempt-ttl).
const AttemptTTL = 10 * time.Minute

// attemptSkew is how far in the future an attempt id may say it was issued:
// guardian instances' clocks may differ by that much.
const attemptSkew = time.Minute

// Bounds of a sealed attempt.
const (
	// MaxRefunds is the most refunds one attempt carries.
	MaxRefunds = 32
	// MaxRefundKeyLen is the longest refund store key, in bytes.
	MaxRefundKeyLen = 128
	// MaxAttemptFieldLen is the longest Flow, Account or Device, in bytes.
	MaxAttemptFieldLen = 64
	// MaxAttemptLen is the longest attempt id, in bytes. Open refuses
	// anything longer before decoding it.
	MaxAttemptLen = 4 << 10
)

// Layout of a sealed attempt, before base64url:
//
//	version  1 byte, attemptVersion
//	id       16 bytes
//	issued   8 bytes, big-endian Unix milliseconds
//	flow, account, device: uvarint length, then the bytes
//	flags    1 byte: bit 0 Fallback, bit 1 HardStop, bit 2 Counted, the other bits zero
//	refunds  uvarint count, then per refund: uvarint key length, key bytes,
//	         1 byte kind (0 Rate, 1 Counter, 2 Guesses, 3 Familiar, then
//	         uvarint member length and member bytes), uvarint Amount in
//	         nanoseconds, and for Guesses the 8-byte big-endian guess
//	tag      16 bytes: HMAC-SHA256 of everything before it, truncated
const (
	attemptVersion = 1
	idLen          = 16
	idTextLen      = 22 // idLen bytes in unpadded base64url
	attemptTagLen  = 16
	headerLen      = 1 + idLen + 8
	minPayload     = headerLen + 3 + 1 + 1
	flagFallback   = 1
	flagHardStop   = 2
	flagCounted    = 4
	maxRawAttempt  = MaxAttemptLen / 4 * 3
)

// Attempt is what a check leaves for its report, sealed into the attempt id.
type Attempt struct {
	// ID names the attempt: 16 random bytes in unpadded base64url. Seal
	// fills it in when empty. The store uses it to accept a report once.
	ID string
	// Issued is when the check was decided; kept to the millisecond.
	Issued time.Time
	// Flow is the check's flow.
	Flow string
	// Account is the check's account subject (keys.Hasher), "" if none.
	Account string
	// Device is the device id when the check carried a valid device token,
	// "" otherwise.
	Device string
	// Fallback reports that the check spent on the local fallback store
	// rather than the primary.
	Fallback bool
	// HardStop reports that the check took an account's blocking
	// consecutive-failure count to its limit: a failure report of it puts
	// the account in a hard stop.
	HardStop bool
	// Counted reports that the check counted in the global failure rate,
	// so that a success report takes it back (package aggregate).
	Counted bool
	// Refunds are what a success report settles: GiveBack, Reset, Forget
	// (with its Guess, which a failure report confirms) and Learn
	// settlements only. Local is not sealed: Open sets it to Fallback,
	// since the store that took a check's spends is the one to settle
	// them.
	Refunds []store.Settlement
}

// The kinds of refund an attempt id carries: a Rate's give-back, a
// Counter's reset, a Guesses' guess (after its Amount) and a Familiar's
// network (followed by its member).
const (
	refundRate byte = iota
	refundCounter
	refundGuesses
	refundFamiliar
)

// Attempts seals Attempts into attempt ids and opens them again. An id is a
// compact binary record with a truncated HMAC-SHA256 tag, in unpadded
// base64url: a client can read it but not change or forge it. Whether an id
// was already reported is not known here; the store records Attempt.ID.
// An Attempts is safe for concurrent use; build one with NewAttempts.
type Attempts struct {
	pool sync.Pool // of *attemptState
	ttl  time.Duration
}

// attemptState is one HMAC with scratch space, reused through the pool.
type attemptState struct {
	mac hash.Hash
	// previous verify ids sealed under previous signing keys.
	previous []hash.Hash
	raw      []byte // the binary record
	txt      []byte // its base64url form
	sum      [sha256.Size]byte
}

// NewAttempts returns an Attempts keyed from k. Ids sealed under a previous
// signing key still open, for the grace period of a key rotation.
func NewAttempts(k secret.Key, previous ...secret.Key) *Attempts {
	key := k.Derive(attemptPurpose)
	var old [][]byte
	for _, p := range previous {
		old = append(old, p.Derive(attemptPurpose))
	}
	a := &Attempts{ttl: AttemptTTL}
	a.pool.New = func() any {
		st := &attemptState{
			mac: hmac.New(sha256.New, key),
			raw: make([]byte, 0, maxRawAttempt+attemptTagLen),
			txt: make([]byte, 0, MaxAttemptLen+4),
		}
		for _, k := range old {
			st.previous = append(st.previous, hmac.New(sha256.New, k))
		}
		return st
	}
	return a
}

// WithTTL sets how long ids opened by a can be reported, when ttl is
// positive, and returns a. Call it before a is used.
func (a *Attempts) WithTTL(ttl time.Duration) *Attempts {
	if ttl > 0 {
		a.ttl = ttl
	}
	return a
}

// TTL is how long an attempt id can be reported.
func (a *Attempts) TTL() time.Duration { return a.ttl }

// OnceTTL is how long the store must remember that an attempt was reported
// for the mark to outlive the id's validity on every instance's clock: the
// TTL, plus the skew by which the issuing instance's clock may run ahead
// (Open accepts an id that far in the future) and the same again for an
// instance whose clock runs behind, which accepts the id that much longer.
func (a *Attempts) OnceTTL() time.Duration { return a.ttl + 2*attemptSkew }

// Errors of Seal and Open, built once.
var (
	errAttemptID       = wrap(ErrInvalidAttempt, "id must be 16 bytes of base64url")
	errAttemptIssued   = wrap(ErrInvalidAttempt, "no issue time")
	errAttemptField    = wrap(ErrInvalidAttempt, "flow, account or device longer than 64 bytes")
	errAttemptRefunds  = wrap(ErrInvalidAttempt, "more than 32 refunds")
	errAttemptKey      = wrap(ErrInvalidAttempt, "refund key longer than 128 bytes")
	errAttemptAmount   = wrap(ErrInvalidAttempt, "negative refund amount")
	errAttemptKind     = wrap(ErrInvalidAttempt, "refund of an unknown kind")
	errAttemptTooLong  = wrap(ErrInvalidAttempt, "too long")
	errAttemptEncoding = wrap(ErrInvalidAttempt, "malformed")
	errAttemptTag      = wrap(ErrInvalidAttempt, "bad signature")
	errAttemptFuture   = wrap(ErrInvalidAttempt, "issued in the future")
)

// strictB64 decodes only the canonical form Seal writes.
var strictB64 = base64.RawURLEncoding.Strict()

// Seal returns the attempt id of at, giving it a random ID first if it has
// none. It refuses, with an error wrapping ErrInvalidAttempt, an Attempt
// without an issue time or beyond the bounds: MaxRefunds refunds, keys of
// MaxRefundKeyLen bytes, fields of MaxAttemptFieldLen bytes, an id of
// MaxAttemptLen bytes in all.
func (a *Attempts) Seal(at Attempt) (string, error) {
	var id [idLen]byte
	if at.ID == "" {
		_, _ = rand.Read(id[:]) // never fails: crypto/rand crashes the program instead
	} else if len(at.ID) != idTextLen {
		return "", errAttemptID
	} else if n, err := strictB64.Decode(id[:], []byte(at.ID)); err != nil || n != idLen {
		return "", errAttemptID
	}
	if at.Issued.IsZero() {
		return "", errAttemptIssued
	}
	if len(at.Flow) > MaxAttemptFieldLen || len(at.Account) > MaxAttemptFieldLen || len(at.Device) > MaxAttemptFieldLen {
		return "", errAttemptField
	}
	if len(at.Refunds) > MaxRefunds {
		return "", errAttemptRefunds
	}
	for _, r := range at.Refunds {
		if len(r.Key) > MaxRefundKeyLen {
			return "", errAttemptKey
		}
		if r.Span < 0 {
			return "", errAttemptAmount
		}
		if r.Action != store.GiveBack && r.Action != store.Reset && r.Action != store.Forget && r.Action != store.Learn {
			return "", errAttemptKind
		}
		if r.Action == store.Learn && !store.ValidMember(r.Member) {
			return "", errAttemptKind
		}
	}

	st := a.pool.Get().(*attemptState)
	defer a.pool.Put(st)
	b := append(st.raw[:0], attemptVersion)
	b = append(b, id[:]...)
	b = binary.BigEndian.AppendUint64(b, uint64(at.Issued.UnixMilli()))
	b = appendString(b, at.Flow)
	b = appendString(b, at.Account)
	b = appendString(b, at.Device)
	var flags byte
	if at.Fallback {
		flags |= flagFallback
	}
	if at.HardStop {
		flags |= flagHardStop
	}
	if at.Counted {
		flags |= flagCounted
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(len(at.Refunds)))
	for _, r := range at.Refunds {
		b = appendString(b, r.Key)
		switch r.Action {
		case store.Reset:
			b = append(b, refundCounter)
		case store.Forget:
			b = append(b, refundGuesses)
		case store.Learn:
			b = append(b, refundFamiliar)
			b = appendString(b, r.Member)
		default:
			b = append(b, refundRate)
		}
		b = binary.AppendUvarint(b, uint64(r.Span))
		if r.Action == store.Forget {
			b = binary.BigEndian.AppendUint64(b, r.Guess)
		}
	}
	if len(b) > maxRawAttempt-attemptTagLen {
		st.keep(b, nil)
		return "", errAttemptTooLong
	}
	b = st.tag(b)
	txt := strictB64.AppendEncode(st.txt[:0], b)
	st.keep(b, txt)
	return string(txt), nil
}

// Open verifies an attempt id at instant now and returns the Attempt
// sealed in it. Every error wraps ErrInvalidAttempt: the id is too long,
// not canonical base64url, forged or altered (the tag is checked, in
// constant time, before anything else is read), not exactly what Seal
// writes, or issued more than a minute after now. An id issued more than
// TTL before now gives ErrExpiredAttempt.
func (a *Attempts) Open(token string, now time.Time) (Attempt, error) {
	if len(token) > MaxAttemptLen {
		return Attempt{}, errAttemptTooLong
	}
	for i := 0; i < len(token); i++ {
		if !isB64URL(token[i]) {
			return Attempt{}, errAttemptEncoding
		}
	}
	st := a.pool.Get().(*attemptState)
	defer a.pool.Put(st)
	raw := st.raw[:strictB64.DecodedLen(len(token))]
	n, err := strictB64.Decode(raw, []byte(token))
	if err != nil || n < minPayload+attemptTagLen {
		return Attempt{}, errAttemptEncoding
	}
	raw = raw[:n]
	payload, tag := raw[:n-attemptTagLen], raw[n-attemptTagLen:]
	if !st.verify(payload, tag) {
		return Attempt{}, errAttemptTag
	}

	at, err := parseAttempt(payload, st.txt)
	if err != nil {
		return Attempt{}, err
	}
	if at.Issued.After(now.Add(attemptSkew)) {
		return Attempt{}, errAttemptFuture
	}
	if now.Sub(at.Issued) > a.ttl {
		return Attempt{}, ErrExpiredAttempt
	}
	return at, nil
}

// parseAttempt reads a payload whose tag was verified, refusing anything
// Seal would not have written. The strings of the Attempt share one
// allocation, made in scratch space.
func parseAttempt(p, scratch []byte) (Attempt, error) {
	if p[0] != attemptVersion {
		return Attempt{}, errAttemptEncoding
	}
	text := strictB64.AppendEncode(scratch[:0], p[1:1+idLen])
	all := string(append(text, p[headerLen:]...))
	at := Attempt{
		ID:     all[:idTextLen],
		Issued: time.UnixMilli(int64(binary.BigEndian.Uint64(p[1+idLen : headerLen]))),
	}
	r := reader{b: p[headerLen:], s: all[idTextLen:]}
	at.Flow = r.string(MaxAttemptFieldLen)
	at.Account = r.string(MaxAttemptFieldLen)
	at.Device = r.string(MaxAttemptFieldLen)
	flags := r.byte()
	if flags&^(flagFallback|flagHardStop|flagCounted) != 0 {
		r.bad = true
	}
	at.Fallback, at.HardStop, at.Counted = flags&flagFallback != 0, flags&flagHardStop != 0, flags&flagCounted != 0
	count := r.uvarint(MaxRefunds)
	if !r.bad && count > 0 {
		at.Refunds = make([]store.Settlement, count)
		for i := range at.Refunds {
			f := &at.Refunds[i]
			f.Key = r.string(MaxRefundKeyLen)
			f.Local = at.Fallback
			switch r.byte() {
			case refundRate:
				f.Action = store.GiveBack
			case refundCounter:
				f.Action = store.Reset
			case refundGuesses:
				f.Action = store.Forget
			case refundFamiliar:
				f.Action = store.Learn
				f.Member = r.string(store.MaxMemberLen)
				r.bad = r.bad || !store.ValidMember(f.Member)
			default:
				r.bad = true
			}
			f.Span = time.Duration(r.uvarint(math.MaxInt64))
			if f.Action == store.Forget {
				f.Guess = r.uint64()
			}
		}
	}
	if r.bad || len(r.b) != 0 {
		return Attempt{}, errAttemptEncoding
	}
	return at, nil
}

// reader reads the fields of a payload. The first problem sets bad, and
// every later read returns a zero value.
type reader struct {
	b   []byte
	s   string // the same bytes as b, for strings without a copy
	bad bool
}

// skip moves past n bytes.
func (r *reader) skip(n int) {
	r.b, r.s = r.b[n:], r.s[n:]
}

func (r *reader) byte() byte {
	if r.bad || len(r.b) == 0 {
		r.bad = true
		return 0
	}
	c := r.b[0]
	r.skip(1)
	return c
}

// uint64 reads 8 bytes, big-endian.
func (r *reader) uint64() uint64 {
	if r.bad || len(r.b) < 8 {
		r.bad = true
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.skip(8)
	return v
}

// uvarint reads a minimally encoded uvarint of at most limit.
func (r *reader) uvarint(limit uint64) uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 || v > limit || n != uvarintLen(v) {
		r.bad = true
		return 0
	}
	r.skip(n)
	return v
}

// string reads a length-prefixed string of at most limit bytes.
func (r *reader) string(limit int) string {
	n := int(r.uvarint(uint64(limit)))
	if r.bad || len(r.b) < n {
		r.bad = true
		return ""
	}
	s := r.s[:n]
	r.skip(n)
	return s
}

// uvarintLen is the length of v's minimal uvarint encoding.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// appendString appends s to b, prefixed by its length.
func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// isB64URL reports whether c is in the base64url alphabet.
func isB64URL(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

// tag appends the truncated HMAC of b to b.
func (st *attemptState) tag(b []byte) []byte {
	st.mac.Reset()
	st.mac.Write(b)
	return append(b, st.mac.Sum(st.sum[:0])[:attemptTagLen]...)
}

// verify reports whether tag is the truncated HMAC of payload under the
// current key or a previous one.
func (st *attemptState) verify(payload, tag []byte) bool {
	if st.matches(st.mac, payload, tag) {
		return true
	}
	for _, mac := range st.previous {
		if st.matches(mac, payload, tag) {
			return true
		}
	}
	return false
}

// matches compares tag with the truncated HMAC of payload under mac, in
// constant time.
func (st *attemptState) matches(mac hash.Hash, payload, tag []byte) bool {
	mac.Reset()
	mac.Write(payload)
	return hmac.Equal(mac.Sum(st.sum[:0])[:attemptTagLen], tag)
}

// keep holds on to grown scratch buffers for the next use.
func (st *attemptState) keep(raw, txt []byte) {
	if cap(raw) > cap(st.raw) {
		st.raw = raw[:0]
	}
	if cap(txt) > cap(st.txt) {
		st.txt = txt[:0]
	}
}
