package redisstore

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// RouteLogs sends go-redis's own log lines (a failed dial, a pool event)
// to log at debug level, instead of the plain-text lines it writes to
// stderr by default: guardian's log stays one format, and what those lines
// say is already counted in guardian_store_errors_total and logged when the
// fallback starts. go-redis has one logger for the process, so the last
// call wins.
func RouteLogs(log *slog.Logger) {
	redis.SetLogger(slogPrinter{log})
}

// slogPrinter is go-redis's logging interface on a *slog.Logger.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	if !p.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	p.log.LogAttrs(ctx, slog.LevelDebug, "redis client", slog.String("detail", fmt.Sprintf(format, v...)))
}
