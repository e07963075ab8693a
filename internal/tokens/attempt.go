package tokens

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"net/netip"
	"sync"
	"time"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/secret"
)

// Purposes of the secret.Key derivations of attempt ids: the tag, and the
// pad that hides the client address.
const (
	attemptPurpose  = "guardian attempt ids v1"
	addressPurpose  = "guardian attempt addresses v1"
	attemptVersion  = 2
	attemptSkew     = time.Minute
	idLen           = 16
	idTextLen       = 22 // idLen bytes in unpadded base64url
	attemptTagLen   = 16
	rulesHashLen    = 8 // a rules.Set.Hash, 16 hex digits
	subjectLen      = 16
	guessLen        = 8
	addrLen         = 16
	headerLen       = 1 + idLen + 8
	uvarintMaxLen   = binary.MaxVarintLen64
	maxRawAttempt   = headerLen + 1 + MaxAttemptFlowLen + 3*uvarintMaxLen + rulesHashLen + 4*subjectLen + 1 + MaxAttemptMemberLen + guessLen + addrLen + 1 + keys.MaxTenantLen + attemptTagLen
	maxAttemptCost  = 1 << 20
	attemptDecodeTo = maxLegacyLen/4*3 + 3
	// legacyVersion is the layout of attempt ids before this one, which
	// carried store keys and were up to maxLegacyLen characters: Open
	// still takes them, so that a fleet being upgraded settles its
	// reports (see Open), and Seal never writes them.
	legacyVersion      = 1
	maxLegacyLen       = 4 << 10
	maxLegacyFieldLen  = 64
	legacyFlagsKnown   = 7
	legacyHeaderLen    = 1 + idLen + 8
	minLegacyPayload   = legacyHeaderLen + 3 + 1 + 1
	legacyFlagFallback = 1
	legacyFlagHardStop = 2
	legacyFlagCounted  = 4
)

// AttemptTTL is how long an attempt id can be reported unless WithTTL says
// otherwise (--attempt-ttl).
const AttemptTTL = 10 * time.Minute

// Bounds of a sealed attempt.
const (
	// MaxAttemptFlowLen is the longest Flow, in bytes.
	MaxAttemptFlowLen = 32
	// MaxAttemptMemberLen is the longest Member, in bytes.
	MaxAttemptMemberLen = 24
	// MaxAttemptLen is the longest attempt id, in characters. An id holds
	// a mask of the check's spent entries and at most four subjects,
	// whatever the rules, so every id fits: Open refuses anything longer
	// before decoding it.
	MaxAttemptLen = 512
)

// Every attempt Seal accepts fits in MaxAttemptLen characters: this fails to
// compile otherwise.
const _ = uint(MaxAttemptLen - (maxRawAttempt*8+5)/6)

// Layout of a sealed attempt, before base64url:
//
//	version  1 byte, attemptVersion
//	id       16 bytes
//	issued   8 bytes, big-endian Unix milliseconds
//	flow     uvarint length, then the bytes
//	cost     uvarint
//	spent    uvarint, the mask
//	fields   uvarint, the flags below
//	then, each when its flag is set, in this order: the rules hash (8
//	bytes), account, bucket, pair and recipient (16 bytes each, the
//	subject decoded), member (uvarint
//	length, then the bytes), guess (8 bytes, big-endian), address (16
//	bytes, the IPv6 form XOR a pad: HMAC-SHA256 of the id under a key of
//	its own, truncated), tenant (uvarint length, then the name)
//	tag      16 bytes: HMAC-SHA256 of everything before it, truncated
const (
	flagFallback = 1 << iota
	flagHardStop
	flagCounted
	flagChallenged
	flagFamiliar
	flagRules
	flagAccount
	flagBucket
	flagPair
	flagRecipient
	flagMember
	flagGuess
	flagAddr
	flagIPv4
	flagTenant
	flagsKnown = flagTenant<<1 - 1
)

// Attempt is what a check leaves for its report, sealed into the attempt
// id: enough to rebuild what the report settles (package plan), never a
// store key, so that its size does not grow with the rules.
type Attempt struct {
	// ID names the attempt: 16 random bytes in unpadded base64url. Seal
	// fills it in when empty. The store uses it to accept a report once.
	ID string
	// Issued is when the check was decided; kept to the millisecond.
	Issued time.Time
	// Rules is the hash of the rule set that decided the check
	// (rules.Set.Hash): 16 lowercase hex digits, "" for none.
	Rules string
	// Flow is the check's flow.
	Flow string
	// Cost is what the check spent on rate rules.
	Cost int64
	// Spent is the mask of the entries of the check's plan that spent
	// (plan.Plan.Spent).
	Spent uint64
	// Account is the check's account subject, "" without an account;
	// Bucket the subject of its trusted device's bucket, "" when
	// untrusted; Pair and Recipient the subjects of its account+ip pair
	// and of its recipient, "" unless a spent entry is keyed by them. Each
	// is a subject: keys.SubjectLen characters of base64url.
	Account, Bucket, Pair, Recipient string
	// Member is the check's network as its account's familiar list holds
	// it, "" for none: at most MaxAttemptMemberLen characters of
	// base64url.
	Member string
	// Guess is the check's guess (keys.Guesser.Guess), 0 for none.
	Guess uint64
	// IP is the client address, the zero Addr unless a spent entry is
	// keyed by it. Unlike the rest it is no keyed hash, so the id holds it
	// encrypted.
	IP netip.Addr
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
	// Tenant is the tenant of the check's service token, "" for the
	// default tenant: only a report of that tenant settles it (package
	// engine).
	Tenant string
	// Challenged reports that the end user passed a challenge; Familiar
	// that the check's network was on its account's familiar list, so
	// that its account rules counted in the network's buckets.
	Challenged, Familiar bool
}

// Attempts seals Attempts into attempt ids and opens them again. An id is a
// compact binary record with a truncated HMAC-SHA256 tag, in unpadded
// base64url: a client can read its subjects (keyed hashes) but not the
// address, and can neither change nor forge it. Whether an id was already
// reported is not known here; the store records Attempt.ID. An Attempts is
// safe for concurrent use; build one with NewAttempts.
type Attempts struct {
	pool sync.Pool // of *attemptState
	ttl  time.Duration
	// keys are the signing keys in force; tag and pad their derivations
	// for the tag and the address pad.
	keys     *Keys
	tag, pad *purposeKeys
}

// attemptState is the HMACs of the keys in force, with scratch space,
// reused through the pool.
type attemptState struct {
	// keys are the tag and pad of every key of from, the signing key's
	// first; Attempts.state keeps them the keys in force.
	from *keyList
	keys []attemptKey
	raw  []byte // the binary record
	txt  []byte // its base64url form
	id   [idLen]byte
	sum  [sha256.Size]byte
}

// attemptKey is one signing key's tag and address pad.
type attemptKey struct {
	tag, pad hash.Hash
}

// NewAttempts returns an Attempts keyed from k. Ids sealed under a previous
// signing key still open, for the grace period of a key rotation. It is
// NewKeys(k, previous...).Attempts().
func NewAttempts(k secret.Key, previous ...secret.Key) *Attempts {
	return NewKeys(k, previous...).Attempts()
}

// newAttempts returns an Attempts sealing with the signing key of keys and
// opening what any key of keys sealed, following keys as they change. An id
// names no key: Open tries each key in force, the signing key's first.
func newAttempts(keys *Keys) *Attempts {
	a := &Attempts{ttl: AttemptTTL, keys: keys, tag: newPurposeKeys(attemptPurpose, keys), pad: newPurposeKeys(addressPurpose, keys)}
	a.pool.New = func() any {
		return &attemptState{
			raw: make([]byte, 0, attemptDecodeTo),
			txt: make([]byte, 0, MaxAttemptLen),
		}
	}
	return a
}

// state returns a pooled state keyed with the keys in force, rekeying it
// when they changed since its last use; put it back with a.pool.Put.
func (a *Attempts) state() *attemptState {
	st := a.pool.Get().(*attemptState)
	l := a.keys.cur.Load()
	if st.from == l {
		return st
	}
	tag, pad := a.tag.loadFrom(l), a.pad.loadFrom(l)
	st.from, st.keys = l, st.keys[:0]
	for i := range tag.verify {
		st.keys = append(st.keys, attemptKey{tag: hmac.New(sha256.New, tag.verify[i]), pad: hmac.New(sha256.New, pad.verify[i])})
	}
	return st
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
	errAttemptRules    = wrap(ErrInvalidAttempt, "rules hash must be 16 lowercase hex digits")
	errAttemptField    = wrap(ErrInvalidAttempt, "a flow longer than 32 bytes, or a cost out of range")
	errAttemptSubject  = wrap(ErrInvalidAttempt, "a subject must be 22 characters of base64url")
	errAttemptMember   = wrap(ErrInvalidAttempt, "a member must be at most 24 characters of base64url")
	errAttemptTenant   = wrap(ErrInvalidAttempt, "a tenant must be a tenant name")
	errAttemptTooLong  = wrap(ErrInvalidAttempt, "too long")
	errAttemptEncoding = wrap(ErrInvalidAttempt, "malformed")
	errAttemptTag      = wrap(ErrInvalidAttempt, "bad signature")
	errAttemptFuture   = wrap(ErrInvalidAttempt, "issued in the future")
)

// strictB64 decodes only the canonical form Seal writes.
var strictB64 = base64.RawURLEncoding.Strict()

// Seal returns the attempt id of at, giving it a random ID first if it has
// none. It refuses, with an error wrapping ErrInvalidAttempt, an Attempt
// without an issue time, with a rules hash that is not one, a flow longer
// than MaxAttemptFlowLen, a cost that is negative or above a million, or a
// subject, member or tenant not of their form. An id is at most MaxAttemptLen
// characters.
func (a *Attempts) Seal(at Attempt) (string, error) {
	st := a.state()
	defer a.pool.Put(st)
	id := st.id[:]
	if at.ID == "" {
		_, _ = rand.Read(id) // never fails: crypto/rand crashes the program instead
	} else if len(at.ID) != idTextLen {
		return "", errAttemptID
	} else if n, err := strictB64.Decode(id, []byte(at.ID)); err != nil || n != idLen {
		return "", errAttemptID
	}
	if at.Issued.IsZero() {
		return "", errAttemptIssued
	}
	var rulesHash [rulesHashLen]byte
	if at.Rules != "" && !decodeRules(rulesHash[:], at.Rules) {
		return "", errAttemptRules
	}
	if len(at.Flow) > MaxAttemptFlowLen || at.Cost < 0 || at.Cost > maxAttemptCost {
		return "", errAttemptField
	}
	if len(at.Member) > MaxAttemptMemberLen || !allB64URL(at.Member) {
		return "", errAttemptMember
	}
	if at.Tenant != "" && keys.CheckTenant(at.Tenant) != nil {
		return "", errAttemptTenant
	}

	b := append(st.raw[:0], attemptVersion)
	b = append(b, id...)
	b = binary.BigEndian.AppendUint64(b, uint64(at.Issued.UnixMilli()))
	b = appendString(b, at.Flow)
	b = binary.AppendUvarint(b, uint64(at.Cost))
	b = binary.AppendUvarint(b, at.Spent)
	b = binary.AppendUvarint(b, uint64(at.flags()))
	if at.Rules != "" {
		b = append(b, rulesHash[:]...)
	}
	var ok bool
	for _, s := range [...]string{at.Account, at.Bucket, at.Pair, at.Recipient} {
		if b, ok = appendSubject(b, s); !ok {
			return "", errAttemptSubject
		}
	}
	if at.Member != "" {
		b = appendString(b, at.Member)
	}
	if at.Guess != 0 {
		b = binary.BigEndian.AppendUint64(b, at.Guess)
	}
	if at.IP.IsValid() {
		ip := at.IP.As16()
		b = st.keys[0].xorPad(append(b, ip[:]...), id, st.sum[:0])
	}
	if at.Tenant != "" {
		b = appendString(b, at.Tenant)
	}
	b = st.keys[0].seal(b, st.sum[:0])
	txt := strictB64.AppendEncode(st.txt[:0], b)
	return string(txt), nil
}

// flags returns at's fields word: its flags, and which optional fields it
// holds.
func (at *Attempt) flags() uint {
	var f uint
	for _, c := range [...]struct {
		on   bool
		flag uint
	}{
		{at.Fallback, flagFallback}, {at.HardStop, flagHardStop}, {at.Counted, flagCounted},
		{at.Challenged, flagChallenged}, {at.Familiar, flagFamiliar}, {at.Rules != "", flagRules},
		{at.Account != "", flagAccount}, {at.Bucket != "", flagBucket}, {at.Pair != "", flagPair},
		{at.Recipient != "", flagRecipient}, {at.Member != "", flagMember}, {at.Guess != 0, flagGuess},
		{at.IP.IsValid(), flagAddr}, {at.IP.Is4(), flagIPv4}, {at.Tenant != "", flagTenant},
	} {
		if c.on {
			f |= c.flag
		}
	}
	return f
}

// Open verifies an attempt id at instant now and returns the Attempt
// sealed in it. Every error wraps ErrInvalidAttempt: the id is too long,
// not canonical base64url, forged or altered (the tag is checked, in
// constant time, before anything else is read), not exactly what Seal
// writes, or issued more than a minute after now. An id issued more than
// TTL before now gives ErrExpiredAttempt.
//
// An id of the layout before this one, signed with the same key, opens to
// an Attempt with its ID, issue time, flow, account and flags but no Rules
// and nothing spent: a report of it is accepted, once, and settles
// nothing, as one of rules the instance does not know (package engine).
func (a *Attempts) Open(token string, now time.Time) (Attempt, error) {
	if len(token) > maxLegacyLen {
		return Attempt{}, errAttemptTooLong
	}
	if !allB64URL(token) {
		return Attempt{}, errAttemptEncoding
	}
	st := a.state()
	defer a.pool.Put(st)
	raw := st.raw[:strictB64.DecodedLen(len(token))]
	n, err := strictB64.Decode(raw, []byte(token))
	if err != nil || n < headerLen+4+attemptTagLen {
		return Attempt{}, errAttemptEncoding
	}
	raw = raw[:n]
	payload, tag := raw[:n-attemptTagLen], raw[n-attemptTagLen:]
	k := st.verify(payload, tag)
	if k == nil {
		return Attempt{}, errAttemptTag
	}
	var at Attempt
	switch {
	case payload[0] == legacyVersion:
		at, err = parseLegacy(payload)
	case len(token) > MaxAttemptLen:
		return Attempt{}, errAttemptTooLong
	default:
		at, err = parseAttempt(payload, k, st)
	}
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

// parseAttempt reads a payload whose tag k verified, refusing anything Seal
// would not have written.
func parseAttempt(p []byte, k *attemptKey, st *attemptState) (Attempt, error) {
	if p[0] != attemptVersion {
		return Attempt{}, errAttemptEncoding
	}
	id := p[1 : 1+idLen]
	at := Attempt{
		ID:     strictB64.EncodeToString(id),
		Issued: time.UnixMilli(int64(binary.BigEndian.Uint64(p[1+idLen:]))),
	}
	r := reader{b: p[headerLen:]}
	at.Flow = r.string(MaxAttemptFlowLen)
	at.Cost = int64(r.uvarint(maxAttemptCost))
	at.Spent = r.uvarint(1<<64 - 1)
	f := uint(r.uvarint(flagsKnown))
	at.Fallback, at.HardStop, at.Counted = f&flagFallback != 0, f&flagHardStop != 0, f&flagCounted != 0
	at.Challenged, at.Familiar = f&flagChallenged != 0, f&flagFamiliar != 0
	if f&flagRules != 0 {
		at.Rules = hex.EncodeToString(r.bytes(rulesHashLen))
	}
	for _, s := range [...]struct {
		flag uint
		dst  *string
	}{{flagAccount, &at.Account}, {flagBucket, &at.Bucket}, {flagPair, &at.Pair}, {flagRecipient, &at.Recipient}} {
		if f&s.flag != 0 {
			*s.dst = strictB64.EncodeToString(r.bytes(subjectLen))
		}
	}
	if f&flagMember != 0 {
		at.Member = r.string(MaxAttemptMemberLen)
		r.bad = r.bad || at.Member == "" || !allB64URL(at.Member)
	}
	if f&flagGuess != 0 {
		at.Guess = binary.BigEndian.Uint64(r.bytes(guessLen))
		r.bad = r.bad || at.Guess == 0
	}
	switch {
	case f&flagAddr != 0:
		var ip [addrLen]byte
		copy(ip[:], r.bytes(addrLen))
		k.xorPadInto(ip[:], id, st.sum[:0])
		at.IP = netip.AddrFrom16(ip)
		if f&flagIPv4 != 0 {
			r.bad = r.bad || !at.IP.Is4In6()
			at.IP = at.IP.Unmap()
		}
	case f&flagIPv4 != 0:
		r.bad = true
	}
	if f&flagTenant != 0 {
		at.Tenant = r.string(keys.MaxTenantLen)
		r.bad = r.bad || keys.CheckTenant(at.Tenant) != nil
	}
	if r.bad || len(r.b) != 0 {
		return Attempt{}, errAttemptEncoding
	}
	return at, nil
}

// parseLegacy reads the header of an id of the layout before this one,
// whose tag was verified: id, issue time, flow, account subject, device,
// flags; what it carried after them was store keys, which no report uses
// any more.
func parseLegacy(p []byte) (Attempt, error) {
	if len(p) < minLegacyPayload {
		return Attempt{}, errAttemptEncoding
	}
	at := Attempt{
		ID:     strictB64.EncodeToString(p[1 : 1+idLen]),
		Issued: time.UnixMilli(int64(binary.BigEndian.Uint64(p[1+idLen:]))),
	}
	r := reader{b: p[legacyHeaderLen:]}
	at.Flow = r.string(MaxAttemptFlowLen)
	at.Account = r.string(keys.SubjectLen)
	r.string(maxLegacyFieldLen) // the device
	flags := r.bytes(1)[0]
	if _, subject := appendSubject(nil, at.Account); r.bad || !subject || flags&^legacyFlagsKnown != 0 {
		return Attempt{}, errAttemptEncoding
	}
	at.Fallback, at.HardStop, at.Counted = flags&legacyFlagFallback != 0, flags&legacyFlagHardStop != 0, flags&legacyFlagCounted != 0
	return at, nil
}

// appendSubject appends the 16 bytes subject s decodes to, nothing for an
// empty s, and reports whether s is a subject.
func appendSubject(b []byte, s string) ([]byte, bool) {
	if s == "" {
		return b, true
	}
	if len(s) != keys.SubjectLen {
		return b, false
	}
	var raw [subjectLen]byte
	if n, err := strictB64.Decode(raw[:], []byte(s)); err != nil || n != subjectLen {
		return b, false
	}
	return append(b, raw[:]...), true
}

// decodeRules decodes a rules hash into dst, and reports whether h is one:
// lowercase hex digits, two for each byte of dst.
func decodeRules(dst []byte, h string) bool {
	if len(h) != 2*len(dst) {
		return false
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	_, err := hex.Decode(dst, []byte(h))
	return err == nil
}

// reader reads the fields of a payload. The first problem sets bad, and
// every later read returns a zero value.
type reader struct {
	b   []byte
	bad bool
}

// bytes reads n bytes; a zero slice of n after a problem.
func (r *reader) bytes(n int) []byte {
	if r.bad || len(r.b) < n {
		r.bad = true
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
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
	r.b = r.b[n:]
	return v
}

// string reads a length-prefixed string of at most limit bytes.
func (r *reader) string(limit int) string {
	n := int(r.uvarint(uint64(limit)))
	return string(r.bytes(n))
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

// allB64URL reports whether every byte of s is in the base64url alphabet.
func allB64URL(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// seal appends the truncated HMAC of b under k to b; sum is scratch space.
func (k *attemptKey) seal(b, sum []byte) []byte {
	k.tag.Reset()
	k.tag.Write(b)
	return append(b, k.tag.Sum(sum)[:attemptTagLen]...)
}

// xorPad XORs the last addrLen bytes of b with k's pad for the attempt id,
// and returns b.
func (k *attemptKey) xorPad(b, id, sum []byte) []byte {
	k.xorPadInto(b[len(b)-addrLen:], id, sum)
	return b
}

// xorPadInto XORs dst, addrLen bytes, with k's pad for the attempt id.
func (k *attemptKey) xorPadInto(dst, id, sum []byte) {
	k.pad.Reset()
	k.pad.Write(id)
	pad := k.pad.Sum(sum)
	for i := range dst {
		dst[i] ^= pad[i]
	}
}

// verify returns the key whose truncated HMAC of payload is tag, the
// signing key or another key in force; nil when none is.
func (st *attemptState) verify(payload, tag []byte) *attemptKey {
	for i := range st.keys {
		k := &st.keys[i]
		k.tag.Reset()
		k.tag.Write(payload)
		if hmac.Equal(k.tag.Sum(st.sum[:0])[:attemptTagLen], tag) {
			return k
		}
	}
	return nil
}
