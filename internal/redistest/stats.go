package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// CommandStats returns how many times each command ran on n since it
// started, from INFO commandstats; the commands a script runs count too.
func CommandStats(tb testing.TB, n *redis.Client) map[string]int64 {
	tb.Helper()
	info, err := n.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatalf("INFO commandstats: %v", err)
	}
	out := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			tb.Fatalf("INFO commandstats line %q: %v", line, err)
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = v
	}
	return out
}

// Ran returns the commands that ran between two CommandStats, and how many
// times each, leaving out the INFO calls that read them.
func Ran(before, after map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for name, n := range after {
		if d := n - before[name]; d != 0 && name != "info" {
			out[name] = d
		}
	}
	return out
}

// ScriptCalls is how many of ran's commands ran guardian's Lua: EVALSHA,
// EVAL, and FCALL of the do script's function library.
func ScriptCalls(ran map[string]int64) int64 {
	return ran["evalsha"] + ran["eval"] + ran["fcall"]
}
