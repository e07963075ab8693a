package redistest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// GuardianACL returns the ACL rules of guardian's Redis user, as
// deploy/redis/guardian.acl gives them to operators: one rule a field.
func GuardianACL(tb testing.TB) []string {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "redis", "guardian.acl"))
	if err != nil {
		tb.Fatalf("redistest: guardian's ACL: %v", err)
	}
	var rules []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			rules = append(rules, strings.Fields(line)...)
		}
	}
	return rules
}

// AddUser makes the Redis user name, logging in with password, with rules
// (ACL SETUSER syntax), in place of any user of that name. The default user
// stays as it was, for the test's own clients.
func (s *Server) AddUser(tb testing.TB, name, password string, rules []string) {
	tb.Helper()
	args := []any{"ACL", "SETUSER", name, "reset", "on", ">" + password}
	for _, r := range rules {
		args = append(args, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.Client(tb).Do(ctx, args...).Err(); err != nil {
		tb.Fatalf("redistest: ACL SETUSER %s: %v", name, err)
	}
}
