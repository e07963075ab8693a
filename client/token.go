package client

import "context"

// TokenSource gives the service token the client sends as
// "Authorization: Bearer …" on every call. A TokenSource must be safe for
// concurrent use; one that fetches tokens should cache them, since it is
// asked on every call.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// StaticToken is a TokenSource that always gives the same token, such as one
// printed by `guardian token --scope check`.
type StaticToken string

// Token returns t.
func (t StaticToken) Token(context.Context) (string, error) { return string(t), nil }

var _ TokenSource = StaticToken("")
