package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/guardian-sec/guardian/internal/audit"
	"github.com/guardian-sec/guardian/internal/lists"
)

// Lister keeps the deny and allow lists (package lists). The server's
// implementation, over *lists.List, is where every change goes through.
type Lister interface {
	Add(ctx context.Context, spec lists.Spec, subject string) (lists.Entry, error)
	Delete(ctx context.Context, id string) (lists.Entry, error)
	Entries(ctx context.Context, now time.Time) (deny, allow []lists.Entry)
}

// denyRequest is the body of POST /v1/lists/deny.
type denyRequest struct {
	Network *string `json:"network"`
	Account *string `json:"account"`
	TTL     *string `json:"ttl"`
	Reason  *string `json:"reason"`
}

// allowRequest is the body of POST /v1/lists/allow.
type allowRequest struct {
	Network *string  `json:"network"`
	Exempt  []string `json:"exempt"`
	TTL     *string  `json:"ttl"`
	Reason  *string  `json:"reason"`
}

// listEntry is an entry as GET /v1/lists shows it: an account only as its
// pseudonym.
type listEntry struct {
	ID        string   `json:"id"`
	Network   string   `json:"network,omitempty"`
	Account   string   `json:"account,omitempty"`
	Exempt    []string `json:"exempt,omitempty"`
	Reason    string   `json:"reason"`
	CreatedAt string   `json:"created_at"`
	ExpiresAt *string  `json:"expires_at"`
	Subject   string   `json:"subject"`
	Source    string   `json:"source"`
}

// routeLists adds the lists' routes to the admin group g.
func (a *API) routeLists(g *gin.RouterGroup) {
	g.POST("/lists/deny", a.addDeny)
	g.POST("/lists/allow", a.addAllow)
	g.GET("/lists", a.getLists)
	g.DELETE("/lists/:id", a.deleteList)
}

func (a *API) addDeny(c *gin.Context) {
	var body denyRequest
	spec, err := lists.Spec{List: lists.Deny}, decode(c, &body)
	if err == nil {
		err = specFields(&spec, body.Network, body.Account, body.TTL, body.Reason)
	}
	a.addEntry(c, spec, err)
}

func (a *API) addAllow(c *gin.Context) {
	var body allowRequest
	spec, err := lists.Spec{List: lists.Allow}, decode(c, &body)
	if err == nil {
		spec.Exempt = body.Exempt
		err = specFields(&spec, body.Network, nil, body.TTL, body.Reason)
	}
	a.addEntry(c, spec, err)
}

// specFields fills spec's string fields, refusing one present and empty.
func specFields(spec *lists.Spec, network, account, ttl, reason *string) error {
	for _, f := range []struct {
		p    *string
		name string
		dst  *string
	}{{network, "network", &spec.Network}, {account, "account", &spec.Account}, {ttl, "ttl", &spec.TTL}} {
		v, err := optional(f.p, f.name)
		if err != nil {
			return err
		}
		*f.dst = v
	}
	if reason != nil {
		spec.Reason = *reason
	}
	return nil
}

// addEntry makes the entry spec asks for, unless decoding it failed with
// err, audits the call and answers 201 {id, expires_at}.
func (a *API) addEntry(c *gin.Context, spec lists.Spec, err error) {
	var e lists.Entry
	if err == nil {
		e, err = a.cfg.Lists.Add(c.Request.Context(), spec, subject(c))
	}
	a.auditList(c, audit.ActionListAdd, spec.List, &e, err)
	if err != nil {
		a.abort(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"id": e.ID, "expires_at": expiry(e.ExpiresAt)})
}

func (a *API) deleteList(c *gin.Context) {
	e, err := a.cfg.Lists.Delete(c.Request.Context(), c.Param("id"))
	a.auditList(c, audit.ActionListDelete, e.List, &e, err)
	if err != nil {
		a.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": true, "id": e.ID})
}

// auditList writes the audit line of a list change, or of one refused:
// the entry's list, id and network or account pseudonym, when known.
func (a *API) auditList(c *gin.Context, action, list string, e *lists.Entry, err error) {
	var extra []slog.Attr
	if list != "" {
		extra = append(extra, slog.String("list", list))
	}
	if e.ID != "" {
		extra = append(extra, slog.String("id", e.ID))
	}
	if e.Network.IsValid() {
		extra = append(extra, slog.String("network", e.Network.String()))
	}
	if e.Account != "" {
		extra = append(extra, slog.String("account", e.Account))
	}
	if len(e.Exempt) > 0 {
		extra = append(extra, slog.Any("exempt", e.Exempt))
	}
	a.cfg.Audit.Action(c.Request.Context(), action, subject(c), result(err), "", extra...)
}

func (a *API) getLists(c *gin.Context) {
	deny, allow := a.cfg.Lists.Entries(c.Request.Context(), a.now())
	c.JSON(http.StatusOK, gin.H{"deny": shownEntries(deny), "allow": shownEntries(allow)})
}

// shownEntries are entries as GET /v1/lists shows them.
func shownEntries(es []lists.Entry) []listEntry {
	out := make([]listEntry, 0, len(es))
	for _, e := range es {
		le := listEntry{ID: e.ID, Account: e.Account, Exempt: e.Exempt, Reason: e.Reason, Subject: e.Subject, Source: e.Source,
			CreatedAt: e.CreatedAt.UTC().Format(time.RFC3339), ExpiresAt: expiry(e.ExpiresAt)}
		if e.Network.IsValid() {
			le.Network = e.Network.String()
		}
		out = append(out, le)
	}
	return out
}

// expiry is an entry's expires_at: RFC 3339, or nil for none.
func expiry(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}
