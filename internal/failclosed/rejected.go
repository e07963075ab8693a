package failclosed

import (
	"errors"
	"strings"
)

// IsRejected reports whether err is the store refusing a write while it
// answers: Redis out of memory under maxmemory (an OOM reply, also when a
// script's write meets it). Such a store is not back, however quickly it
// answers a read.
func IsRejected(err error) bool {
	var reply interface{ RedisError() }
	if !errors.As(err, &reply) {
		return false
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "OOM ") || strings.Contains(msg, "OOM command not allowed")
}
