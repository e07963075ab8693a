package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// The calls of the deny and allow lists, for Hooks.
const (
	// CallListAdd is Client.AddDeny and Client.AddAllow.
	CallListAdd Call = "list_add"
	// CallLists is Client.Lists.
	CallLists Call = "lists"
	// CallListDelete is Client.DeleteListEntry.
	CallListDelete Call = "list_delete"
)

// DenyEntry is a deny list entry to add: every check from Network, or of
// Account, is answered Block with Rule "deny-list" while it holds.
type DenyEntry struct {
	// Network is an IPv4 or IPv6 prefix of any length ("198.51.100.0/24")
	// or one address; set it or Account, never both.
	Network string
	// Account is the account as checks name it; guardian keeps and shows
	// only its pseudonym.
	Account string
	// TTL is how long the entry holds: required, at most a year, whole
	// milliseconds.
	TTL time.Duration
	// Reason is why, for whoever reads Lists and the audit line.
	Reason string
}

// AllowEntry is an allow list entry to add: checks from Network skip the
// rules named in Exempt. Only rules with key ip or global, or of type
// distinct, may be named: an allow entry never lifts an account's limits
// or its hard stop.
type AllowEntry struct {
	// Network is a prefix or an address, as DenyEntry.Network.
	Network string
	// Exempt are the names of the rules the network's checks skip.
	Exempt []string
	// TTL is how long the entry holds; zero: until it is deleted.
	TTL time.Duration
	// Reason is why.
	Reason string
}

// ListAdded is guardian's answer to an added entry.
type ListAdded struct {
	// ID is the entry's id, for DeleteListEntry.
	ID string
	// ExpiresAt is when the entry lapses, to the second; zero for an
	// allow entry without a TTL.
	ExpiresAt time.Time
}

// Lists are the deny and allow entries in force.
type Lists struct {
	Deny, Allow []ListEntry
}

// ListEntry is an entry as guardian shows it: an account only as its
// pseudonym.
type ListEntry struct {
	// ID is the entry's id; a rules file's entries are rules-deny-N and
	// rules-allow-N.
	ID string
	// Network is the entry's network as a prefix; empty on an account
	// entry.
	Network string
	// Account is the pseudonym of a deny entry's account ("h-" and 22
	// characters), never the account; empty on a network entry.
	Account string
	// Exempt are the rules an allow entry's checks skip.
	Exempt []string
	// Reason is why the entry was added.
	Reason string
	// CreatedAt is when it was added (a rules file's: when its rules were
	// loaded); ExpiresAt when it lapses, zero for an entry without an end.
	CreatedAt, ExpiresAt time.Time
	// Subject is the subject of the admin token that added it; empty for
	// a rules file's entry.
	Subject string
	// Source is "api", or the path of the rules file that holds the entry.
	Source string
}

// AddDeny adds a deny list entry, fleet-wide (POST /v1/lists/deny). It
// needs a token of scope admin.
func (c *Client) AddDeny(ctx context.Context, e DenyEntry) (ListAdded, error) {
	return c.addListEntry(ctx, "/v1/lists/deny", wireListAdd{Network: e.Network, Account: e.Account, TTL: ttl(e.TTL), Reason: e.Reason})
}

// AddAllow adds an allow list entry, fleet-wide (POST /v1/lists/allow). It
// needs a token of scope admin.
func (c *Client) AddAllow(ctx context.Context, e AllowEntry) (ListAdded, error) {
	return c.addListEntry(ctx, "/v1/lists/allow", wireListAdd{Network: e.Network, Exempt: e.Exempt, TTL: ttl(e.TTL), Reason: e.Reason})
}

func (c *Client) addListEntry(ctx context.Context, path string, w wireListAdd) (ListAdded, error) {
	body, err := json.Marshal(w)
	if err != nil {
		return ListAdded{}, fmt.Errorf("client: list: %w", err)
	}
	a, err := c.call(ctx, CallListAdd, http.MethodPost, path, body)
	if err != nil {
		return ListAdded{}, err
	}
	if a.status != http.StatusCreated {
		return ListAdded{}, c.answerErr(CallListAdd, a)
	}
	var added wireListAdded
	if json.Unmarshal(a.body, &added) != nil || added.ID == "" {
		return ListAdded{}, c.unavailableErr(CallListAdd, ReasonMalformed, errors.New(`list answer is not {"id", "expires_at"}`))
	}
	return ListAdded{ID: added.ID, ExpiresAt: timeOf(added.ExpiresAt)}, nil
}

// Lists returns the deny and allow entries in force (GET /v1/lists). It
// needs a token of scope admin.
func (c *Client) Lists(ctx context.Context) (Lists, error) {
	a, err := c.call(ctx, CallLists, http.MethodGet, "/v1/lists", nil)
	if err != nil {
		return Lists{}, err
	}
	if a.status != http.StatusOK {
		return Lists{}, c.answerErr(CallLists, a)
	}
	var w struct {
		Deny  []wireListEntry `json:"deny"`
		Allow []wireListEntry `json:"allow"`
	}
	if err := json.Unmarshal(a.body, &w); err != nil {
		return Lists{}, c.unavailableErr(CallLists, ReasonMalformed, err)
	}
	return Lists{Deny: listEntries(w.Deny), Allow: listEntries(w.Allow)}, nil
}

// DeleteListEntry removes the entry id, fleet-wide (DELETE
// /v1/lists/{id}). An id of no entry in force is a *Error of status 404. It
// needs a token of scope admin.
func (c *Client) DeleteListEntry(ctx context.Context, id string) error {
	a, err := c.call(ctx, CallListDelete, http.MethodDelete, "/v1/lists/"+url.PathEscape(id), nil)
	if err != nil {
		return err
	}
	if a.status != http.StatusOK {
		return c.answerErr(CallListDelete, a)
	}
	return nil
}

// ttl is a TTL as guardian reads it: whole hours, seconds or milliseconds;
// zero is none.
func ttl(d time.Duration) string {
	switch {
	case d == 0:
		return ""
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// timeOf parses an RFC 3339 time of guardian's; nil or unreadable is zero.
func timeOf(s *string) time.Time {
	if s == nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func listEntries(ws []wireListEntry) []ListEntry {
	if len(ws) == 0 {
		return nil
	}
	out := make([]ListEntry, len(ws))
	for i, w := range ws {
		out[i] = ListEntry{ID: w.ID, Network: w.Network, Account: w.Account, Exempt: w.Exempt, Reason: w.Reason,
			CreatedAt: timeOf(&w.CreatedAt), ExpiresAt: timeOf(w.ExpiresAt), Subject: w.Subject, Source: w.Source}
	}
	return out
}

type (
	wireListAdd struct {
		Network string   `json:"network,omitempty"`
		Account string   `json:"account,omitempty"`
		Exempt  []string `json:"exempt,omitempty"`
		TTL     string   `json:"ttl,omitempty"`
		Reason  string   `json:"reason,omitempty"`
	}
	wireListAdded struct {
		ID        string  `json:"id"`
		ExpiresAt *string `json:"expires_at"`
	}
	wireListEntry struct {
		ID        string   `json:"id"`
		Network   string   `json:"network"`
		Account   string   `json:"account"`
		Exempt    []string `json:"exempt"`
		Reason    string   `json:"reason"`
		CreatedAt string   `json:"created_at"`
		ExpiresAt *string  `json:"expires_at"`
		Subject   string   `json:"subject"`
		Source    string   `json:"source"`
	}
)
