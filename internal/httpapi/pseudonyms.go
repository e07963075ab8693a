package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/keys"
)

// Pseudonymizer gives an identifier its pseudonym (keys.Hasher.PseudonymOf
// under the instance's hash key and normaliser) in the tenant of ctx
// (keys.TenantOf): kind is keys.PseudonymAccount, PseudonymRecipient or
// PseudonymNetwork.
type Pseudonymizer func(ctx context.Context, kind, value string) (string, error)

// pseudonymRequest is the body of POST /v1/pseudonyms: exactly one
// identifier.
type pseudonymRequest struct {
	Account   *string `json:"account"`
	Recipient *string `json:"recipient"`
	Network   *string `json:"network"`
}

// identifier returns the kind and the value of the one identifier r names.
func (r *pseudonymRequest) identifier() (kind, value string, err error) {
	n := 0
	for _, f := range []struct {
		kind string
		v    *string
	}{{keys.PseudonymAccount, r.Account}, {keys.PseudonymRecipient, r.Recipient}, {keys.PseudonymNetwork, r.Network}} {
		if f.v != nil {
			kind, value = f.kind, *f.v
			n++
		}
	}
	switch n {
	case 0:
		return "", "", newError(http.StatusBadRequest, "missing_field", "account: required (or recipient, or network)")
	case 1:
		return kind, value, nil
	}
	return "", "", newError(http.StatusBadRequest, "invalid_field", "body: one of account, recipient and network, not several")
}

// pseudonym answers the pseudonym of the identifier the body names, the
// name audit lines, the decision log, the console and webhooks give it.
func (a *API) pseudonym(c *gin.Context) {
	var body pseudonymRequest
	if err := decode(c, &body); err != nil {
		a.abort(c, err)
		return
	}
	kind, value, err := body.identifier()
	if err != nil {
		a.abort(c, err)
		return
	}
	p, err := a.cfg.Pseudonyms(c.Request.Context(), kind, value)
	if err != nil {
		a.abort(c, pseudonymError(kind, err))
		return
	}
	c.JSON(http.StatusOK, gin.H{"kind": kind, "pseudonym": p})
}

// pseudonymError names the field of an invalid identifier of kind.
func pseudonymError(kind string, err error) error {
	if kind == keys.PseudonymNetwork && errors.Is(err, keys.ErrInvalidIP) {
		return newError(http.StatusBadRequest, "invalid_field", "network: "+detail(err, keys.ErrInvalidIP))
	}
	return err
}
