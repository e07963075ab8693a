package redisstore_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	t.Run("functions_refused", func(t *testing.T) {
		testFunctionsRefused(t, c)
	})
	t.Run("users_acl_script", func(t *testing.T) {
		// deploy/redis/users-acl.sh makes the ACL file of guardian's own
		// Redis, which holds guardian's data alone: its user may load and
		// call the library too.
		own := usersACLRules(t)
		if len(own) != len(rules)+2 || !slices.Equal(own[:len(rules)], rules) || !slices.Contains(own, "+fcall") || !slices.Contains(own, "+function|load") {
			t.Fatalf("users-acl.sh gives guardian %q, want guardian.acl's %q and +fcall +function|load", own, rules)
		}
		srv.AddUser(t, "guardianown", "pw", own)
		warmed(t, open(t, "redis://guardianown:pw@"+srv.Addr()+"/0"), redisstore.Config{})
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

// usersACLRules returns the rules deploy/redis/users-acl.sh gives the
// user guardian.
func usersACLRules(t *testing.T) []string {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte("test-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", filepath.Join("..", "..", "..", "deploy", "redis", "users-acl.sh"), pw).Output()
	if err != nil {
		t.Fatalf("users-acl.sh: %v", err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "user guardian on >test-password "); ok {
			return strings.Fields(rest)
		}
	}
	t.Fatalf("users-acl.sh printed no user guardian:\n%s", out)
	return nil
}
