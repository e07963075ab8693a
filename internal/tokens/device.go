package tokens

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
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
	token, err = d.keys.load().signDevice(account, deviceID, now, now.Add(d.ttl))
	if err != nil {
		return "", "", err
	}
	return token, deviceID, nil
}

// deviceClaimsOf is what a device token Issue signs at iat, valid until exp.
func deviceClaimsOf(account, deviceID string, iat, exp time.Time) deviceClaims {
	return deviceClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuer,
			Subject:   account,
			Audience:  jwt.ClaimStrings{deviceType},
			IssuedAt:  jwt.NewNumericDate(iat),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
		DeviceID: deviceID,
	}
}

// signDevice returns the device token of deviceClaimsOf(account, deviceID,
// iat, exp) signed with d's signing key: byte for byte the JWT signJWT
// makes of it (TestSignDeviceIsSignJWT), written without reflection, as a
// success report issues one every time.
func (d *derived) signDevice(account, deviceID string, iat, exp time.Time) (string, error) {
	kid, err := json.Marshal(d.kid)
	if err != nil {
		return "", err
	}
	sub, err := json.Marshal(account)
	if err != nil {
		return "", err
	}
	var head, claims [512]byte
	h := append(append(append(head[:0], `{"alg":"HS256","kid":`...), kid...), `,"typ":"`+deviceType+`"}`...)
	c := append(claims[:0], `{"iss":"`+issuer+`","sub":`...)
	c = append(c, sub...)
	c = append(c, `,"aud":["`+deviceType+`"],"exp":`...)
	c = strconv.AppendInt(c, exp.Truncate(jwt.TimePrecision).Unix(), 10)
	c = append(c, `,"iat":`...)
	c = strconv.AppendInt(c, iat.Truncate(jwt.TimePrecision).Unix(), 10)
	c = append(append(append(c, `,"did":"`...), deviceID...), `"}`...)
	enc := base64.RawURLEncoding
	out := make([]byte, 0, enc.EncodedLen(len(h))+enc.EncodedLen(len(c))+enc.EncodedLen(sha256.Size)+2)
	out = enc.AppendEncode(out, h)
	out = append(out, '.')
	out = enc.AppendEncode(out, c)
	m := hmac.New(sha256.New, d.sign)
	m.Write(out)
	var sum [sha256.Size]byte
	out = append(out, '.')
	out = enc.AppendEncode(out, m.Sum(sum[:0]))
	return string(out), nil
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
