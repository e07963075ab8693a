package tokens

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/secret"
)

// servicePurpose is the secret.Key purpose of the service token key.
const servicePurpose = "guardian service tokens v1"

// maxCached is how many verified service tokens a Service remembers.
const maxCached = 10_000

// MaxTTL is the longest life of a service token: Issue refuses a longer
// one, and a revocation that is not told the token's expiry is kept this
// long, which outlives every token that carries a jti.
const MaxTTL = 365 * 24 * time.Hour

// Claims is what a verified service token says.
type Claims struct {
	// Subject names the caller, as given when the token was issued; it may
	// be empty.
	Subject string
	// Scope is what the token may call.
	Scope Scope
	// Tenant is the tenant whose accounts the token's calls see
	// (package keys), "" for the default tenant.
	Tenant string
	// ID is the token's jti, what POST /v1/tokens/revoke names it by; ""
	// for a token issued before tokens carried one.
	ID string
	// IssuedAt is when the token was issued; zero when it does not say.
	IssuedAt time.Time
	// ExpiresAt is when the token stops being valid.
	ExpiresAt time.Time
}

// serviceClaims is the JSON form of a service token's claims.
type serviceClaims struct {
	jwt.RegisteredClaims
	Scope Scope `json:"scope"`
	// Tenant is absent for the default tenant.
	Tenant string `json:"tenant,omitempty"`
}

// Revocations says which service tokens were revoked before they expire,
// by jti. Package revocation implements it; Revoked is called on every
// request, so it must answer from memory.
type Revocations interface {
	Revoked(jti string) bool
}

// Service issues and verifies service tokens: HS256 JWTs with the claims
// scope, sub, jti, iat, exp and iss "guardian" and the header kid (the id
// of the signing key that signed it), signed with a key derived from the
// signing key for this purpose alone.
//
// Verify remembers the tokens it has verified until they expire, so a
// caller presenting the same token on every request pays for the signature
// once; the memory is bounded, is verified again once the keys change, and
// never outlives a revocation, which is looked up on every call. A Service
// is safe for concurrent use; build one with NewService or Keys.Service.
type Service struct {
	keys       *purposeKeys
	parser     *jwt.Parser
	reasons    jwtReasons
	badIss     error
	badScp     error
	badTenant  error
	revokedErr error
	revoked    Revocations
	cache      verified[Claims]
}

// NewService returns a Service signing with a key derived from k. Tokens
// signed under a previous signing key still verify, for the grace period of
// a key rotation. It is NewKeys(k, previous...).Service().
func NewService(k secret.Key, previous ...secret.Key) *Service {
	return NewKeys(k, previous...).Service()
}

func newService(keys *Keys) *Service {
	return &Service{
		keys:       newPurposeKeys(servicePurpose, keys),
		parser:     newParser(),
		reasons:    newJWTReasons(ErrInvalidToken),
		badIss:     wrap(ErrInvalidToken, "wrong issuer"),
		badScp:     wrap(ErrInvalidToken, "bad scope"),
		badTenant:  wrap(ErrInvalidToken, "bad tenant"),
		revokedErr: wrap(ErrInvalidToken, "revoked"),
		cache:      newVerified[Claims](maxCached),
	}
}

// WithRevocations makes Verify refuse the tokens r says were revoked, and
// returns s. Call it before s is used.
func (s *Service) WithRevocations(r Revocations) *Service {
	s.revoked = r
	return s
}

// errBadTenant reports a tenant name Issue refuses.
var errBadTenant = errors.New("tokens: tenant must be 1 to 32 characters of a-z, 0-9 and '-', not starting or ending with '-'")

// errBadTTL reports a token lifetime that is not positive or longer than
// MaxTTL.
var errBadTTL = errors.New("tokens: token lifetime must be positive and at most 8760h")

// Issue returns a service token of the given scope for subject, valid from
// now for ttl (at most MaxTTL), with a fresh random jti. The expiry is kept
// to the second, rounded down.
func (s *Service) Issue(scope Scope, subject string, ttl time.Duration, now time.Time) (string, error) {
	return s.IssueTenant(scope, subject, "", ttl, now)
}

// IssueTenant is Issue of a token of the tenant named (keys.CheckTenant),
// whose calls see only that tenant's accounts; "" is the default tenant,
// a token without the tenant claim.
func (s *Service) IssueTenant(scope Scope, subject, tenant string, ttl time.Duration, now time.Time) (string, error) {
	if !scope.Valid() {
		return "", wrap(ErrInvalidScope, "must be check or admin")
	}
	if ttl <= 0 || ttl > MaxTTL {
		return "", errBadTTL
	}
	if tenant != "" && keys.CheckTenant(tenant) != nil {
		return "", errBadTenant
	}
	c := serviceClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuer,
			Subject:   subject,
			ID:        newID(),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
		},
		Scope:  scope,
		Tenant: tenant,
	}
	return s.keys.load().signJWT(c, "")
}

// Verify checks a service token at instant now and returns its claims. The
// token must be HS256 with this Service's key (alg none and every other
// algorithm are refused) — the key its kid names, or any key in force when
// it names none —, carry exp later than now, iss "guardian" and a scope of
// check or admin, a valid tenant if any (keys.CheckTenant), and not be
// revoked. Errors wrap ErrInvalidToken with a
// short reason.
func (s *Service) Verify(token string, now time.Time) (Claims, error) {
	e, ok := s.cache.get(token)
	fresh := !ok || e.keys != s.keys.keys.cur.Load()
	if fresh {
		var err error
		if e, err = s.verify(token); err != nil {
			return Claims{}, err
		}
	}
	if err := s.reasons.times(e.exp, e.nbf, now); err != nil {
		return Claims{}, err
	}
	if fresh {
		s.cache.put(token, e, now)
	}
	if e.val.ID != "" && s.revoked != nil && s.revoked.Revoked(e.val.ID) {
		return Claims{}, s.revokedErr
	}
	return e.val, nil
}

// verify checks everything of a service token but its times and its
// revocation, which Verify checks on every call, cached or not.
func (s *Service) verify(token string) (cacheEntry[Claims], error) {
	if len(token) > maxJWTLen {
		return cacheEntry[Claims]{}, s.reasons.tooLong
	}
	d := s.keys.load()
	var c serviceClaims
	tok, err := s.parser.ParseWithClaims(token, &c, d.keyFunc)
	if err != nil {
		return cacheEntry[Claims]{}, s.reasons.parseError(tok, err)
	}
	if c.ExpiresAt == nil {
		return cacheEntry[Claims]{}, s.reasons.noExpiry
	}
	if c.Issuer != issuer {
		return cacheEntry[Claims]{}, s.badIss
	}
	if !c.Scope.Valid() {
		return cacheEntry[Claims]{}, s.badScp
	}
	if c.Tenant != "" && keys.CheckTenant(c.Tenant) != nil {
		return cacheEntry[Claims]{}, s.badTenant
	}
	claims := Claims{Subject: c.Subject, Scope: c.Scope, Tenant: c.Tenant, ID: c.ID, ExpiresAt: c.ExpiresAt.Time}
	if c.IssuedAt != nil {
		claims.IssuedAt = c.IssuedAt.Time
	}
	return cacheEntry[Claims]{val: claims, exp: c.ExpiresAt, nbf: c.NotBefore, keys: d.from}, nil
}

// key is the key this Service signs with now (tests craft tokens with it).
func (s *Service) key() []byte { return s.keys.load().sign }
