package keys

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"sync"

	"github.com/guardian-sec/guardian/internal/secret"
)

// KeyPrefix starts every store key guardian writes. The version names the
// layout of limit state in Redis, so that a new layout lives beside an old
// one; v3 is a Redis key per subject and rule whose value carries its
// deadline (package redisstore), v2 kept subjects together in hashes.
const KeyPrefix = "guardian:v3:"

// hashPurpose is the secret.Key purpose of the subject hashing key.
const hashPurpose = "guardian keys v1"

// SubjectLen is the length of a subject: 16 bytes of HMAC-SHA256 in
// unpadded base64url.
const SubjectLen = 22

// tagLen is how many bytes of the HMAC a subject keeps.
const tagLen = 16

// Hasher turns normalised identifiers into subjects: keyed hashes that name
// a key in the store without revealing it. The key is derived from the
// signing key for this purpose alone, so a subject is useless to anyone
// without the signing key, and differs between deployments with different
// keys. A Hasher is safe for concurrent use; build one with NewHasher.
//
// A Hasher hashes for one tenant (Tenant): the default tenant, "", for one
// NewHasher returns. A tenant's Hasher puts the tenant into every subject
// and pseudonym it hashes but those of addresses and of key: global rules
// (tenant.go), so that tenants share no account, recipient or guess.
type Hasher struct {
	pool *sync.Pool // of *hashState, shared by every tenant's Hasher
	// tenant is the tenant's name, "" for the default tenant.
	tenant string
}

// hashState is one HMAC and its scratch space, reused through the pool.
type hashState struct {
	mac hash.Hash
	buf []byte
	sum [sha256.Size]byte
	out [SubjectLen]byte
}

// NewHasher returns a Hasher keyed from k.
func NewHasher(k secret.Key) *Hasher {
	key := k.Derive(hashPurpose)
	h := &Hasher{pool: &sync.Pool{}}
	h.pool.New = func() any {
		return &hashState{mac: hmac.New(sha256.New, key), buf: make([]byte, 0, 256)}
	}
	return h
}

// Subject returns the subject of one identifier: HMAC-SHA256 over kind and
// then each part, every one of them prefixed by its length (so ("a", "bc")
// and ("ab", "c") differ), cut to 16 bytes and encoded as SubjectLen
// characters of unpadded base64url. Kinds keep identifiers of different
// sorts apart: guardian uses "account", "ip", "account+ip", "recipient",
// "device" (account subject and device id) and "attempt". Parts are expected
// to be normalised already (Account, Recipient, Prefix). A tenant's Hasher
// hashes the kind with the tenant's name (appendKind).
func (h *Hasher) Subject(kind string, parts ...string) string {
	st := h.pool.Get().(*hashState)
	b := h.appendKind(st.buf[:0], kind)
	for _, p := range parts {
		b = appendField(b, p)
	}
	s := st.finish(b)
	h.pool.Put(st)
	return s
}

// appendField appends s to b, prefixed by its length.
func appendField(b []byte, s string) []byte {
	return append(appendLen(b, len(s)), s...)
}

// appendLen appends the length prefix of a field of n bytes to b.
func appendLen(b []byte, n int) []byte { return binary.AppendUvarint(b, uint64(n)) }

// finish hashes the message b, keeps b as scratch space for the next use,
// and returns the encoded subject.
func (st *hashState) finish(b []byte) string {
	if cap(b) <= 4<<10 {
		st.buf = b
	}
	st.mac.Reset()
	st.mac.Write(b)
	st.mac.Sum(st.sum[:0])
	base64.RawURLEncoding.Encode(st.out[:], st.sum[:tagLen])
	return string(st.out[:])
}

// StoreKey returns the store key of one rule for one subject. The subject
// is wrapped in braces, a Redis Cluster hash tag, so that all the rules of
// one subject live in one slot.
func StoreKey(subject, rule string) string {
	return KeyPrefix + "{" + subject + "}:" + rule
}
