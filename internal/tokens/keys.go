package tokens

import (
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/guardian-sec/guardian/internal/secret"
)

// Keys is the signing keys an instance signs and verifies with: the first
// signs, every one verifies. The Service, Attempts and Devices built on one
// Keys share it, and Set swaps the keys of all of them at once (a rotated
// key file), each taking the new keys at its next use. Tokens name the key
// that signed them by its id (secret.Key.ID, the kid of a JWT). A Keys is
// safe for concurrent use; build one with NewKeys.
type Keys struct {
	cur atomic.Pointer[keyList]
}

// keyList is one immutable set of keys: keys[0] signs.
type keyList struct {
	keys []secret.Key
	ids  []string
}

// NewKeys returns Keys signing with signing and also verifying with every
// key of verifying. A key given twice counts once.
func NewKeys(signing secret.Key, verifying ...secret.Key) *Keys {
	k := &Keys{}
	k.Set(signing, verifying...)
	return k
}

// Set makes signing the key that signs and signing and verifying the keys
// that verify, in place of the keys before. What is signed from now on is
// signed with signing; what only a key no longer given signed is refused.
func (k *Keys) Set(signing secret.Key, verifying ...secret.Key) {
	l := &keyList{}
	for _, key := range append([]secret.Key{signing}, verifying...) {
		if slices.ContainsFunc(l.keys, key.Equal) {
			continue
		}
		l.keys = append(l.keys, key)
		l.ids = append(l.ids, key.ID())
	}
	k.cur.Store(l)
}

// IDs returns the id of the signing key and the ids of every key that
// verifies, the signing key's first.
func (k *Keys) IDs() (signing string, verifying []string) {
	l := k.cur.Load()
	return l.ids[0], slices.Clone(l.ids)
}

// Signing returns the key that signs.
func (k *Keys) Signing() secret.Key { return k.cur.Load().keys[0] }

// Service returns a Service on k.
func (k *Keys) Service() *Service { return newService(k) }

// Devices returns a Devices on k, issuing tokens valid for ttl, or
// DefaultDeviceTTL when ttl is not positive.
func (k *Keys) Devices(ttl time.Duration) *Devices { return newDevices(k, ttl) }

// Attempts returns an Attempts on k.
func (k *Keys) Attempts() *Attempts { return newAttempts(k) }

// derived is one purpose's keys, derived from one keyList.
type derived struct {
	from *keyList
	// sign is the signing key's, kid its id.
	sign []byte
	kid  string
	// verify holds every key's, the signing key's first.
	verify [][]byte
	byKID  map[string][]byte
	// all verifies a JWT that names no key: one minted before tokens
	// carried kid.
	all jwt.VerificationKeySet
}

// purposeKeys are the keys of one purpose, derived again from a Keys each
// time its keys change. It is safe for concurrent use.
type purposeKeys struct {
	purpose string
	keys    *Keys
	cur     atomic.Pointer[derived]
}

func newPurposeKeys(purpose string, keys *Keys) *purposeKeys {
	return &purposeKeys{purpose: purpose, keys: keys}
}

// load returns the keys derived from the Keys in force, deriving them
// first if they changed.
func (p *purposeKeys) load() *derived { return p.loadFrom(p.keys.cur.Load()) }

// loadFrom returns the keys derived from l, one keyList of p's Keys,
// deriving them first if they are not yet: one who derives for two
// purposes derives both from the same l.
func (p *purposeKeys) loadFrom(l *keyList) *derived {
	if d := p.cur.Load(); d != nil && d.from == l {
		return d
	}
	d := &derived{from: l, kid: l.ids[0], byKID: make(map[string][]byte, len(l.keys))}
	for i, key := range l.keys {
		b := key.Derive(p.purpose)
		d.verify = append(d.verify, b)
		d.byKID[l.ids[i]] = b
		d.all.Keys = append(d.all.Keys, b)
	}
	d.sign = d.verify[0]
	// Derivations racing here give equal keys; the last stored wins.
	p.cur.Store(d)
	return d
}

// errUnknownKID is what the key function answers for a kid naming no key
// in force.
var errUnknownKID = errors.New("tokens: unknown kid")

// keyFunc is the JWT key function of d: the key a token's kid names, every
// key for a token without kid, and errUnknownKID for a kid naming no key
// in force (a key rotated out, or never this fleet's).
func (d *derived) keyFunc(tok *jwt.Token) (any, error) {
	v, ok := tok.Header["kid"]
	if !ok {
		return d.all, nil
	}
	kid, _ := v.(string)
	if key, ok := d.byKID[kid]; ok {
		return key, nil
	}
	return nil, errUnknownKID
}

// signJWT returns the JWT of claims signed with d's signing key, with its
// kid and, when typ is not empty, its typ header.
func (d *derived) signJWT(claims jwt.Claims, typ string) (string, error) {
	t := jwt.NewWithClaims(alg, claims)
	t.Header["kid"] = d.kid
	if typ != "" {
		t.Header["typ"] = typ
	}
	return t.SignedString(d.sign)
}
