package failclosed

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/guardian-sec/guardian/internal/store"
)

// The kinds of store error, the values of guardian_store_errors_total's kind
// label.
const (
	// KindTimeout is a call that got no answer before its deadline.
	KindTimeout = "timeout"
	// KindUnreachable is a store that could not be reached: a refused or
	// reset connection, a name that does not resolve, a closed client.
	KindUnreachable = "unreachable"
	// KindRejected is an error reply the store sent instead of running the
	// call: out of memory, a read-only replica, a store still loading.
	KindRejected = "rejected"
	// KindScript is a script that failed in the store, or a reply guardian
	// cannot read.
	KindScript = "script"
)

// Classify names the kind of a store error. A connection that could not be
// made is unreachable even when the deadline passed too: what failed was the
// connection, not the store's answer. An error reply is rejected, unless
// the script itself failed. Anything else guardian cannot name is
// unreachable, the kind that says the store did not serve the call.
func Classify(err error) string {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var netErr net.Error
	var reply interface{ RedisError() }
	switch {
	case errors.As(err, &dnsErr),
		errors.As(err, &opErr) && opErr.Op == "dial",
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.EHOSTUNREACH),
		errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return KindUnreachable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return KindTimeout
	case errors.Is(err, store.ErrBadReply):
		return KindScript
	case errors.As(err, &reply):
		if scriptFailed(err.Error()) {
			return KindScript
		}
		return KindRejected
	}
	return KindUnreachable
}

// scriptFailed reports whether an error reply says a script failed in the
// store (a Lua error, a bad call the script made, a script the store does
// not have) rather than that the store refused to run it. A refusal keeps
// its own prefix even inside a script ("OOM command not allowed … script:
// …"): rejected.
func scriptFailed(msg string) bool {
	return strings.HasPrefix(msg, "NOSCRIPT") ||
		strings.HasPrefix(msg, "ERR ") && strings.Contains(msg, "script")
}
