package tokens

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/guardian-sec/guardian/internal/secret"
)

// servicePurpose is the secret.Key purpose of the service token key.
const servicePurpose = "guardian service tokens v1"

// maxCached is how many verified service tokens a Service remembers.
const maxCached = 10_000

// Claims is what a verified service token says.
type Claims struct {
	// Subject names the caller, as given when the token was issued; it may
	// be empty.
	Subject string
	// Scope is what the token may call.
	Scope Scope
	// ExpiresAt is when the token stops being valid.
	ExpiresAt time.Time
}

// serviceClaims is the JSON form of a service token's claims.
type serviceClaims struct {
	jwt.RegisteredClaims
	Scope Scope `json:"scope"`
}

// Service issues and verifies service tokens: HS256 JWTs with the claims
// scope, sub, iat, exp and iss "guardian", signed with a key derived from
// the signing key for this purpose alone.
//
// Verify remembers the tokens it has verified until they expire, so a
// caller presenting the same token on every request pays for the signature
// once; the memory is bounded. A Service is safe for concurrent use; build
// one with NewService.
type Service struct {
	key     []byte
	keyFunc jwt.Keyfunc
	parser  *jwt.Parser
	reasons jwtReasons
	badIss  error
	badScp  error
	cache   verified[Claims]
}

// NewService returns a Service signing with a key derived from k. Tokens
// signed under a previous signing key still verify, for the grace period of
// a key rotation.
func NewService(k secret.Key, previous ...secret.Key) *Service {
	s := &Service{
		key:     k.Derive(servicePurpose),
		parser:  newParser(),
		reasons: newJWTReasons(ErrInvalidToken),
		badIss:  wrap(ErrInvalidToken, "wrong issuer"),
		badScp:  wrap(ErrInvalidToken, "bad scope"),
		cache:   newVerified[Claims](maxCached),
	}
	s.keyFunc = keyFunc(servicePurpose, s.key, previous)
	return s
}

// errBadTTL reports a token lifetime that is not positive.
var errBadTTL = errors.New("tokens: token lifetime must be positive")

// Issue returns a service token of the given scope for subject, valid from
// now for ttl. The expiry is kept to the second, rounded down.
func (s *Service) Issue(scope Scope, subject string, ttl time.Duration, now time.Time) (string, error) {
	if !scope.Valid() {
		return "", wrap(ErrInvalidScope, "must be check or admin")
	}
	if ttl <= 0 {
		return "", errBadTTL
	}
	c := serviceClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuer,
			Subject:   subject,
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
		Scope: scope,
	}
	return jwt.NewWithClaims(alg, c).SignedString(s.key)
}

// Verify checks a service token at instant now and returns its claims. The
// token must be HS256 with this Service's key (alg none and every other
// algorithm are refused), carry exp later than now, iss "guardian" and a
// scope of check or admin. Errors wrap ErrInvalidToken with a short reason.
func (s *Service) Verify(token string, now time.Time) (Claims, error) {
	if e, ok := s.cache.get(token); ok {
		if err := s.reasons.times(e.exp, e.nbf, now); err != nil {
			return Claims{}, err
		}
		return e.val, nil
	}
	e, err := s.verify(token, now)
	if err != nil {
		return Claims{}, err
	}
	s.cache.put(token, e, now)
	return e.val, nil
}

// verify is Verify without the cache.
func (s *Service) verify(token string, now time.Time) (cacheEntry[Claims], error) {
	if len(token) > maxJWTLen {
		return cacheEntry[Claims]{}, s.reasons.tooLong
	}
	var c serviceClaims
	tok, err := s.parser.ParseWithClaims(token, &c, s.keyFunc)
	if err != nil {
		return cacheEntry[Claims]{}, s.reasons.parseError(tok, err)
	}
	if err := s.reasons.times(c.ExpiresAt, c.NotBefore, now); err != nil {
		return cacheEntry[Claims]{}, err
	}
	if c.Issuer != issuer {
		return cacheEntry[Claims]{}, s.badIss
	}
	if !c.Scope.Valid() {
		return cacheEntry[Claims]{}, s.badScp
	}
	claims := Claims{Subject: c.Subject, Scope: c.Scope, ExpiresAt: c.ExpiresAt.Time}
	return cacheEntry[Claims]{val: claims, exp: c.ExpiresAt, nbf: c.NotBefore}, nil
}
