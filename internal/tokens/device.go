package tokens

import (
	"crypto/rand"
	"encoding/base64"
	"slices"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/guardian-sec/guardian/internal/secret"
)

// devicePurpose is the secret.Key purpose of the device token key.
const devicePurpose = "guardian device tokens v1"

// deviceType is both the typ header and the aud claim of a device token.
const deviceType = "guardian-device"

// DefaultDeviceTTL is how long a device token lasts when NewDevices is
// given no lifetime.
const DefaultDeviceTTL = 90 * 24 * time.Hour

// deviceClaims is the JSON form of a device token's claims.
type deviceClaims struct {
	jwt.RegisteredClaims
	// DeviceID names the device; the check uses it for the account+device
	// bucket.
	DeviceID string `json:"did"`
}

// Devices issues and verifies device tokens: after a successful login, a
// token binding that device to that account, so that later checks from it
// get a bucket of their own and nobody can slow them down by failing on
// purpose against the account. A device token is an HS256 JWT with sub (the
// account subject), did (a random device id), iat, exp, iss "guardian", aud
// and typ "guardian-device", signed with a key derived for this purpose
// alone: a service token is never a device token. Its header kid names the
// signing key. A Devices is safe for concurrent use; build one with
// NewDevices or Keys.Devices.
type Devices struct {
	keys    *purposeKeys
	ttl     time.Duration
	parser  *jwt.Parser
	reasons jwtReasons
	badAud  error
	badSub  error
	badDID  error
	cache   verified[device]
}

// device is what a verified device token says: whose it is, and its id.
type device struct {
	account, id string
}

// NewDevices returns a Devices signing with a key derived from k, issuing
// tokens valid for ttl, or DefaultDeviceTTL when ttl is not positive.
// Tokens signed under a previous signing key still verify, for the grace
// period of a key rotation. It is NewKeys(k, previous...).Devices(ttl).
func NewDevices(k secret.Key, ttl time.Duration, previous ...secret.Key) *Devices {
	return NewKeys(k, previous...).Devices(ttl)
}

func newDevices(keys *Keys, ttl time.Duration) *Devices {
	if ttl <= 0 {
		ttl = DefaultDeviceTTL
	}
	return &Devices{
		keys:    newPurposeKeys(devicePurpose, keys),
		ttl:     ttl,
		parser:  newParser(),
		reasons: newJWTReasons(ErrInvalidDevice),
		badAud:  wrap(ErrInvalidDevice, "not a device token"),
		badSub:  wrap(ErrInvalidDevice, "issued to another account"),
		badDID:  wrap(ErrInvalidDevice, "malformed device id"),
		cache:   newVerified[device](maxCached),
	}
}

// Issue returns a new device token for account (an account subject) at
// instant now, and the random id of the device it names.
func (d *Devices) Issue(account string, now time.Time) (token, deviceID string, err error) {
	if account == "" {
		return "", "", d.badSub
	}
	deviceID = newID()
	c := deviceClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuer,
			Subject:   account,
			Audience:  jwt.ClaimStrings{deviceType},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(d.ttl)),
		},
		DeviceID: deviceID,
	}
	token, err = d.keys.load().signJWT(c, deviceType)
	if err != nil {
		return "", "", err
	}
	return token, deviceID, nil
}

// Verify checks a device token for account at instant now and returns the
// device id it carries. The token must be HS256 with this Devices' key, of
// type and audience "guardian-device", issued by guardian to exactly this
// account, with exp later than now. Errors wrap ErrInvalidDevice; a check
// treats them all alike, as an untrusted device.
func (d *Devices) Verify(token, account string, now time.Time) (string, error) {
	e, ok := d.cache.get(token)
	if !ok || e.keys != d.keys.keys.cur.Load() {
		var err error
		if e, err = d.verify(token); err != nil {
			return "", err
		}
		d.cache.put(token, e, now)
	}
	if err := d.reasons.times(e.exp, e.nbf, now); err != nil {
		return "", err
	}
	if account == "" || e.val.account != account {
		return "", d.badSub
	}
	return e.val.id, nil
}

// verify checks everything of a device token but its times and its
// account, which Verify checks on every call, cached or not.
func (d *Devices) verify(token string) (cacheEntry[device], error) {
	if len(token) > maxJWTLen {
		return cacheEntry[device]{}, d.reasons.tooLong
	}
	keys := d.keys.load()
	var c deviceClaims
	tok, err := d.parser.ParseWithClaims(token, &c, keys.keyFunc)
	if err != nil {
		return cacheEntry[device]{}, d.reasons.parseError(tok, err)
	}
	if c.ExpiresAt == nil {
		return cacheEntry[device]{}, d.reasons.noExpiry
	}
	if tok.Header["typ"] != deviceType || c.Issuer != issuer || !slices.Equal(c.Audience, jwt.ClaimStrings{deviceType}) {
		return cacheEntry[device]{}, d.badAud
	}
	if c.Subject == "" {
		return cacheEntry[device]{}, d.badSub
	}
	if !validID(c.DeviceID) {
		return cacheEntry[device]{}, d.badDID
	}
	return cacheEntry[device]{val: device{account: c.Subject, id: c.DeviceID}, exp: c.ExpiresAt, nbf: c.NotBefore, keys: keys.from}, nil
}

// key is the key this Devices signs with now (tests craft tokens with it).
func (d *Devices) key() []byte { return d.keys.load().sign }

// newID returns 16 random bytes in unpadded base64url.
func newID() string {
	var b [idLen]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	var s [idTextLen]byte
	base64.RawURLEncoding.Encode(s[:], b[:])
	return string(s[:])
}

// validID reports whether s is 16 bytes in canonical unpadded base64url.
func validID(s string) bool {
	if len(s) != idTextLen {
		return false
	}
	var b [idLen]byte
	n, err := strictB64.Decode(b[:], []byte(s))
	return err == nil && n == idLen
}
