package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/store"
)

// ErrAccess reports a Redis that refuses guardian's login (a wrong user or
// password, no password given) or a command or key guardian needs
// (NOPERM): a configuration error that no retry mends. docs/operations.md
// gives the ACL guardian needs.
var ErrAccess = errors.New("redisstore: Redis refused access (see the ACL in docs/operations.md)")

// accessKey is the store key CheckAccess spends and deletes: under
// guardian's key prefix, so the ACL's key pattern covers it, and apart from
// every key a rule makes.
const accessKey = "guardian:access-check:{access-check}"

// CheckAccess sends every kind of call the Store makes, on a key of its own
// that it removes again, and reports ErrAccess when Redis refuses the login
// or any command or key they need. Another failure (Redis not answering) is
// returned as it is. A server calls it at start, so that a missing
// permission stops it there instead of turning every check over to the
// fallback.
func (s *Store) CheckAccess(ctx context.Context) error {
	rate := store.Op{Key: accessKey, Cost: 1, Limit: store.Rate{Interval: time.Millisecond, Burst: 1}}
	// A distinct op adds its member (PFADD) the first time and counts its
	// live sub-window (PFCOUNT) the second.
	distinct := store.Op{Key: accessKey + ":distinct", Cost: 1, Limit: store.Distinct{Step: time.Second, Max: 1}, Member: "access-check"}
	res := make([]store.Result, 1)
	gone := appendSubKeys([]string{accessKey, accessKey + ":once", distinct.Key}, distinct.Key, true)
	steps := []struct {
		name string
		call func() error
	}{
		{"PING", func() error { return s.c.Ping(ctx).Err() }},
		{"INFO server", func() error { return s.c.Info(ctx, "server").Err() }},
		{"peek", func() error { return s.Peek(ctx, []store.Op{rate}, res) }},
		{"do", func() error { return s.Do(ctx, []store.Op{rate}, res) }},
		{"settle", func() error {
			return s.Settle(ctx, []store.Settlement{{Key: accessKey, Action: store.GiveBack, Span: time.Millisecond}})
		}},
		{"mark once", func() error { _, err := s.MarkOnce(ctx, accessKey+":once", time.Second); return err }},
		// Deleting first starts the distinct op afresh, whatever an
		// earlier check that stopped half-way left.
		{"delete", func() error { return s.Delete(ctx, gone...) }},
		{"distinct add", func() error { return s.Do(ctx, []store.Op{distinct}, res) }},
		{"distinct count", func() error { return s.Do(ctx, []store.Op{distinct}, res) }},
		{"delete again", func() error { return s.Delete(ctx, gone...) }},
	}
	for _, st := range steps {
		if err := st.call(); err != nil {
			if accessDenied(err) {
				return fmt.Errorf("%w: %s: %w", ErrAccess, st.name, err)
			}
			return fmt.Errorf("redisstore: check access: %s: %w", st.name, err)
		}
	}
	return nil
}

// accessDenied reports whether err is Redis refusing the login or a
// permission: NOAUTH, WRONGPASS, NOPERM, or the same refusal met by a
// command or key inside a script.
func accessDenied(err error) bool {
	if redis.IsAuthError(err) || redis.IsPermissionError(err) {
		return true
	}
	var reply redis.Error
	if !errors.As(err, &reply) {
		return false
	}
	msg := reply.Error()
	return strings.Contains(msg, "The user executing the script can't run this command") ||
		strings.Contains(msg, "The user executing the script can't access")
}
