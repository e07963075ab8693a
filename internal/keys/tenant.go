package keys

import (
	"context"
	"errors"
	"fmt"
)

// Tenants. One guardian may serve several applications or customers whose
// accounts must stay apart: the same e-mail address in two tenants is two
// accounts, with budgets, hard stops, trusted devices, remembered guesses
// and pseudonyms of their own. A tenant is a namespace in the subjects its
// Hasher derives (Hasher.Tenant), so every key of an account, an
// account+ip pair, a recipient, a guess (key: secret) or a device lives
// under its tenant, in a Redis Cluster slot of its own (the subject is the
// hash tag). Addresses (key: ip) and key: global rules are shared by every
// tenant: an attacker spraying several tenants from one network is seen
// as one. The default tenant, "", hashes exactly as guardian did before
// tenants, so an upgrade keeps every counted state.
//
// A request's tenant is its service token's (the tenant claim, guardian
// token --tenant); it travels in the request's context (WithTenant,
// TenantOf), so that everything the request derives a subject or a
// pseudonym for sees that tenant only.

// MaxTenantLen is the longest tenant name, in bytes.
const MaxTenantLen = 32

// Kinds of keys every tenant shares: the names of the rules' keys ip and
// global.
const (
	KindIP     = "ip"
	KindGlobal = "global"
)

// tenantSep joins a kind and a tenant's name in what a tenant's Hasher
// hashes: no kind guardian uses and no tenant name holds it, so no subject
// of one tenant is a subject of another, or of the default tenant.
const tenantSep = '@'

// ErrInvalidTenant reports a tenant name that is not 1 to MaxTenantLen
// characters of a-z, 0-9 and '-', starting and ending with a letter or a
// digit.
var ErrInvalidTenant = errors.New("keys: invalid tenant")

// CheckTenant reports whether name is a valid tenant name: a short DNS
// label, 1 to MaxTenantLen characters of a-z, 0-9 and '-' that neither
// starts nor ends with '-'. The default tenant has no name and is not
// checked. The error wraps ErrInvalidTenant and quotes at most
// MaxTenantLen bytes of name.
func CheckTenant(name string) error {
	if name == "" || len(name) > MaxTenantLen {
		echo := name
		if len(echo) > MaxTenantLen {
			echo = echo[:MaxTenantLen] + "…"
		}
		return fmt.Errorf("%w: %q: want 1 to %d characters", ErrInvalidTenant, echo, MaxTenantLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1:
		default:
			return fmt.Errorf("%w: %q: only a-z, 0-9 and '-' (not first or last)", ErrInvalidTenant, name)
		}
	}
	return nil
}

// Tenant returns the Hasher of the tenant name, sharing h's key: "" is the
// default tenant's. It does not check name (CheckTenant): a name reaches
// it from a verified service token or an attempt id, which hold only
// valid ones.
func (h *Hasher) Tenant(name string) *Hasher {
	if name == h.tenant {
		return h
	}
	return &Hasher{pool: h.pool, tenant: name}
}

// TenantName returns the name of the tenant h hashes for, "" for the
// default tenant.
func (h *Hasher) TenantName() string { return h.tenant }

// shared reports whether every tenant shares the subjects of kind.
func shared(kind string) bool { return kind == KindIP || kind == KindGlobal }

// appendKind appends kind to b as Subject's first field: kind itself for
// the default tenant and for the kinds every tenant shares, and kind, '@'
// and the tenant's name otherwise.
func (h *Hasher) appendKind(b []byte, kind string) []byte {
	if h.tenant == "" || shared(kind) {
		return appendField(b, kind)
	}
	b = appendLen(b, len(kind)+1+len(h.tenant))
	b = append(b, kind...)
	b = append(b, tenantSep)
	return append(b, h.tenant...)
}

// tenantKey is the context key of a request's tenant.
type tenantKey struct{}

// WithTenant returns ctx carrying the tenant name, or ctx itself for the
// default tenant, which a context carrying none stands for.
func WithTenant(ctx context.Context, name string) context.Context {
	if name == "" {
		return ctx
	}
	return context.WithValue(ctx, tenantKey{}, name)
}

// TenantOf returns the tenant ctx carries (WithTenant), "" for the default
// tenant.
func TenantOf(ctx context.Context) string {
	name, _ := ctx.Value(tenantKey{}).(string)
	return name
}

// ForContext returns the Hasher of the tenant ctx carries (TenantOf).
func (h *Hasher) ForContext(ctx context.Context) *Hasher { return h.Tenant(TenantOf(ctx)) }
