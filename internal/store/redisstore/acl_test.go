package redisstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
	"github.com/guardian-sec/guardian/internal/store/storetest"
)

// TestACLUser runs the conformance suite as a Redis user that has only the
// ACL deploy/redis/guardian.acl gives, and checks that a user without one
// of its commands, or a wrong password, is ErrAccess at CheckAccess.
func TestACLUser(t *testing.T) {
	srv := redistest.Start(t)
	rules := redistest.GuardianACL(t)
	srv.AddUser(t, "guardian", "guardian-test-password", rules)
	c := open(t, "redis://guardian:guardian-test-password@"+srv.Addr()+"/0")

	t.Run("check_access", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s := redisstore.New(c, redisstore.Config{})
		if err := s.CheckAccess(ctx); err != nil {
			t.Fatalf("CheckAccess as guardian's ACL user: %v", err)
		}
		if err := s.Warm(ctx); err != nil {
			t.Fatalf("Warm as guardian's ACL user: %v", err)
		}
	})
	t.Run("functions_not_tried", func(t *testing.T) {
		testFunctionsNotTried(t, srv, c)
	})
	t.Run("conformance", func(t *testing.T) {
		admin := srv.Client(t)
		storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
			flush(t, admin)
			return redisstore.New(c, redisstore.Config{Now: now})
		})
	})
	t.Run("the_key_pattern_binds", func(t *testing.T) {
		// A command guardian does not send, or a key outside guardian:*,
		// is refused.
		if err := c.LPush(context.Background(), "guardian:x", "1").Err(); !redis.IsPermissionError(err) {
			t.Fatalf("LPUSH guardian:x: %v, want NOPERM: the ACL gives more than the commands guardian sends", err)
		}
		if err := c.Get(context.Background(), "other:key").Err(); !redis.IsPermissionError(err) {
			t.Fatalf("GET other:key: %v, want NOPERM", err)
		}
	})

	// Every command of the ACL that the store sends is needed: without it,
	// CheckAccess says so. (The rest serve other paths: SCRIPT LOAD Warm,
	// SELECT a DB other than 0, the hash, sorted-set and transaction
	// commands the fleet's shared state, CLUSTER and ASKING a Cluster.)
	for _, cmd := range []string{"+ping", "+info", "+evalsha", "+eval", "+time", "+get", "+set", "+del", "+pfadd", "+pfcount", "+pexpire"} {
		t.Run("without_"+cmd[1:], func(t *testing.T) {
			srv.AddUser(t, "lacking", "pw", slices.DeleteFunc(slices.Clone(rules), func(r string) bool { return r == cmd }))
			lc := open(t, "redis://lacking:pw@"+srv.Addr()+"/0")
			// A fresh server state: the scripts are not cached, so EVAL runs.
			if err := srv.Client(t).ScriptFlush(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			err := redisstore.New(lc, redisstore.Config{}).CheckAccess(context.Background())
			if !errors.Is(err, redisstore.ErrAccess) {
				t.Fatalf("CheckAccess without %s: %v, want ErrAccess", cmd, err)
			}
			t.Logf("without %s: %v", cmd, err)
		})
	}
	t.Run("wrong_password", func(t *testing.T) {
		wc := open(t, "redis://guardian:wrong@"+srv.Addr()+"/0")
		err := redisstore.New(wc, redisstore.Config{}).CheckAccess(context.Background())
		if !errors.Is(err, redisstore.ErrAccess) {
			t.Fatalf("CheckAccess with a wrong password: %v, want ErrAccess", err)
		}
	})
}
