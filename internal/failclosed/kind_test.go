package failclosed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/guardian-sec/guardian/internal/store"
)

func TestClassify(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	noHost := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "redis.invalid", IsNotFound: true}}
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: &timeoutErr{}}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"deadline", context.DeadlineExceeded, KindTimeout},
		{"joined deadline", errors.Join(errors.New("x"), context.DeadlineExceeded), KindTimeout},
		{"read deadline", readTimeout, KindTimeout},
		{"wrapped read deadline", fmt.Errorf("redisstore: %w", readTimeout), KindTimeout},
		{"refused", refused, KindUnreachable},
		{"refused wrapped", fmt.Errorf("redisstore: %w", refused), KindUnreachable},
		{"no such host", noHost, KindUnreachable},
		{"dns error alone", &net.DNSError{Err: "server misbehaving", Name: "redis", IsTimeout: true}, KindUnreachable},
		{"dial timeout", dialTimeout, KindUnreachable},
		{"refused past the deadline", errors.Join(context.DeadlineExceeded, refused), KindUnreachable},
		{"reset", reset, KindUnreachable},
		{"eof", io.EOF, KindUnreachable},
		{"closed", net.ErrClosed, KindUnreachable},
		{"unknown", errDown, KindUnreachable},
		{"bad reply", fmt.Errorf("redisstore: %w", store.ErrBadReply), KindScript},
		{"lua error", replyError("ERR user_script:1: Script attempted to access nonexistent global variable 'x' script: 3b3a, on @user_script:1."), KindScript},
		{"lua error, redis 6", replyError("ERR Error running script (call to f_3b3a): @user_script:1: oops"), KindScript},
		{"bad call in a script", replyError("ERR wrong number of arguments for 'hset' command script: 3b3a, on @user_script:9."), KindScript},
		{"noscript", replyError("NOSCRIPT No matching script. Please use EVAL."), KindScript},
		{"oom", replyError("OOM command not allowed when used memory > 'maxmemory'."), KindRejected},
		{"oom in a script", replyError("OOM command not allowed when used memory > 'maxmemory'. script: 3b3a, on @user_script:12."), KindRejected},
		{"readonly", replyError("READONLY You can't write against a read only replica."), KindRejected},
		{"loading", replyError("LOADING Redis is loading the dataset in memory"), KindRejected},
		{"noperm", replyError("NOPERM this user has no permissions to run the 'evalsha' command"), KindRejected},
		{"wrapped oom", fmt.Errorf("redisstore: %w", replyError("OOM command not allowed")), KindRejected},
		{"oom text that is no reply", errors.New("OOM command not allowed"), KindUnreachable},
	}
	for _, tt := range tests {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("%s: Classify(%v) = %q, want %q", tt.name, tt.err, got, tt.want)
		}
	}
}

// timeoutErr is a net.Error that timed out, as a dial past its deadline is.
type timeoutErr struct{}

func (*timeoutErr) Error() string   { return "i/o timeout" }
func (*timeoutErr) Timeout() bool   { return true }
func (*timeoutErr) Temporary() bool { return true }

// replyError is an error the store answered, as go-redis marks them.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}
