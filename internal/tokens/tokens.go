// Package tokens issues and verifies what guardian signs: service tokens
// (JWTs carried by the auth services that call guardian), attempt ids (the
// compact sealed record a check hands to its report) and device tokens (a
// JWT binding a device to an account after a successful login).
//
// Each kind is signed with its own key derived from the signing key
// (package secret), so a token of one kind never verifies as another. The
// signing keys are a Keys: the first signs, every one verifies, and a
// rotation swaps them without a restart.
package tokens

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Scope is what a service token may call.
type Scope string

// The scopes of the contract.
const (
	// ScopeCheck allows the decision API: /v1/check and /v1/report.
	ScopeCheck Scope = "check"
	// ScopeAdmin allows the admin API, and the decision API as well.
	ScopeAdmin Scope = "admin"
)

// Valid reports whether s is one of the contract's scopes.
func (s Scope) Valid() bool {
	return s == ScopeCheck || s == ScopeAdmin
}

// Allows reports whether a token of scope s may call what needs scope need:
// admin allows check and admin, check allows check only. An unknown scope
// allows nothing.
func (s Scope) Allows(need Scope) bool {
	switch s {
	case ScopeAdmin:
		return need == ScopeAdmin || need == ScopeCheck
	case ScopeCheck:
		return need == ScopeCheck
	}
	return false
}

// Errors of this package. Every error Verify, Open or Devices.Verify returns
// wraps one of them with a short reason that is safe to show a client.
var (
	// ErrInvalidToken reports a service token that is missing, malformed,
	// forged, expired or otherwise not acceptable.
	ErrInvalidToken = errors.New("tokens: invalid token")
	// ErrInvalidScope reports a scope other than check or admin.
	ErrInvalidScope = errors.New("tokens: invalid scope")
	// ErrInvalidAttempt reports an attempt id that is malformed, forged,
	// issued in the future or expired; it is also what Seal returns for an
	// Attempt it cannot seal.
	ErrInvalidAttempt = errors.New("tokens: invalid attempt id")
	// ErrExpiredAttempt reports an attempt id older than its TTL. It wraps
	// ErrInvalidAttempt, so errors.Is(err, ErrInvalidAttempt) holds for it.
	ErrExpiredAttempt = wrap(ErrInvalidAttempt, "expired")
	// ErrInvalidDevice reports a device token that is malformed, forged,
	// expired, or issued to another account.
	ErrInvalidDevice = errors.New("tokens: invalid device token")
)

// reason is an error that adds a short reason to a sentinel.
type reason struct {
	base error
	msg  string
}

func (r *reason) Error() string { return r.base.Error() + ": " + r.msg }
func (r *reason) Unwrap() error { return r.base }

// wrap returns an error that wraps base with a short reason. The reasons
// used on hot paths are built once, so failing costs no allocation.
func wrap(base error, msg string) error { return &reason{base: base, msg: msg} }

// issuer is the iss claim of every token guardian signs.
const issuer = "guardian"

// alg is the one JWT algorithm guardian signs and accepts.
var alg = jwt.SigningMethodHS256

// maxJWTLen bounds a JWT before any decoding; guardian's own are a few
// hundred bytes.
const maxJWTLen = 4 << 10

// newParser returns the JWT parser guardian uses: HS256 only, strict
// base64. Claims are checked by the callers against an explicit now. A
// Parser built this way is never modified and safe for concurrent use.
func newParser() *jwt.Parser {
	return jwt.NewParser(
		jwt.WithValidMethods([]string{alg.Alg()}),
		jwt.WithoutClaimsValidation(),
		jwt.WithStrictDecoding(),
	)
}

// jwtReasons are the reasons a JWT is refused, for one sentinel.
type jwtReasons struct {
	tooLong, malformed, algorithm, signature, unknownKey, expired, noExpiry, notYet error
}

// newJWTReasons builds the reasons for base.
func newJWTReasons(base error) jwtReasons {
	return jwtReasons{
		tooLong:   wrap(base, "too long"),
		malformed: wrap(base, "malformed"),
		algorithm: wrap(base, "algorithm not allowed"),
		signature: wrap(base, "bad signature"),
		// A kid naming no key in force: a key rotated out, or another
		// fleet's.
		unknownKey: wrap(base, "signed with a key not in force"),
		expired:    wrap(base, "expired"),
		noExpiry:   wrap(base, "no expiry"),
		notYet:     wrap(base, "not valid yet"),
	}
}

// parseError maps an error of jwt.Parser.ParseWithClaims to a reason.
func (r jwtReasons) parseError(tok *jwt.Token, err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return r.malformed
	case tok != nil && tok.Header["alg"] != alg.Alg():
		return r.algorithm
	case errors.Is(err, errUnknownKID):
		return r.unknownKey
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		return r.algorithm
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return r.signature
	}
	return r.malformed
}

// times checks the exp and nbf claims against now: exp is required and
// must be after now, nbf, when present, must not be after now.
func (r jwtReasons) times(exp, nbf *jwt.NumericDate, now time.Time) error {
	if exp == nil {
		return r.noExpiry
	}
	if !now.Before(exp.Time) {
		return r.expired
	}
	if nbf != nil && now.Before(nbf.Time) {
		return r.notYet
	}
	return nil
}
