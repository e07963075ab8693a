package redisstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrBadURL reports a store address Open cannot read.
var ErrBadURL = errors.New("redisstore: bad url")

// Client defaults, applied where the URL does not set a value. Every call
// also carries the caller's deadline (--store-timeout, a few milliseconds),
// which the clients honour; these bound what runs without one, such as
// dialling a new connection in the background.
const (
	dialTimeout  = 2 * time.Second
	ioTimeout    = time.Second
	poolTimeout  = time.Second
	minIdleConns = 4
)

// Open returns a client for the store at addr, in one of the forms of
// --redis-url:
//
//   - "redis://[user:pass@]host:port/db" or "rediss://…" (TLS): one Redis,
//     a *redis.Client. Query parameters set client options (dial_timeout,
//     pool_size, …) as redis.ParseURL reads them.
//   - the same with "?master_name=NAME": host:port (and any &addr=host:port)
//     are Sentinels watching NAME, a failover *redis.Client
//     (redis.ParseFailoverURL).
//   - the same with "?addr=host:port" and no master_name: Redis Cluster
//     seeded from every address given, a *redis.ClusterClient
//     (redis.ParseClusterURL).
//   - "host:port,host:port,…": Redis Cluster seeded from the list, a
//     *redis.ClusterClient. A single "host:port" is one Redis.
//
// The caller closes the client.
func Open(addr string) (redis.UniversalClient, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return nil, fmt.Errorf("%w: empty", ErrBadURL)
	}
	if strings.Contains(addr, "://") {
		return openURL(addr)
	}

	var addrs []string
	for a := range strings.SplitSeq(addr, ",") {
		a = strings.TrimSpace(a)
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return nil, fmt.Errorf("%w: %q is not host:port", ErrBadURL, a)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 1 {
		o := &redis.Options{Addr: addrs[0]}
		tuneOptions(o)
		return redis.NewClient(o), nil
	}
	o := &redis.ClusterOptions{Addrs: addrs}
	tuneClusterOptions(o)
	return redis.NewClusterClient(o), nil
}

// openURL opens a redis:// or rediss:// URL.
func openURL(raw string) (redis.UniversalClient, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	q := u.Query()
	switch {
	case q.Has("master_name"):
		o, err := redis.ParseFailoverURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		tuneFailoverOptions(o)
		return redis.NewFailoverClient(o), nil
	case q.Has("addr"):
		o, err := redis.ParseClusterURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		tuneClusterOptions(o)
		return redis.NewClusterClient(o), nil
	default:
		o, err := redis.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		tuneOptions(o)
		return redis.NewClient(o), nil
	}
}

// orDefault returns d when v is unset (zero).
func orDefault[T comparable](v, d T) T {
	var zero T
	if v == zero {
		return d
	}
	return v
}

// tune applies guardian's client defaults to the fields every go-redis
// options type has, where the URL set none.
//
// A call is never retried within itself (retries, dialRetries): the
// deadline is a few milliseconds, shorter than any backoff, so a retry only
// hides why the call failed behind "deadline exceeded" (a refused
// connection would count as a timeout), and a retried spend could spend
// twice. The next call dials again.
func tune(dial, read, write, pool *time.Duration, minIdle, retries, dialRetries *int, ctxTimeout *bool) {
	*dial = orDefault(*dial, dialTimeout)
	*read = orDefault(*read, ioTimeout)
	*write = orDefault(*write, ioTimeout)
	*pool = orDefault(*pool, poolTimeout)
	*minIdle = orDefault(*minIdle, minIdleConns)
	*retries = orDefault(*retries, -1)
	*dialRetries = orDefault(*dialRetries, 1)
	*ctxTimeout = true
}

func tuneOptions(o *redis.Options) {
	tune(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MinIdleConns, &o.MaxRetries, &o.DialerRetries, &o.ContextTimeoutEnabled)
}

func tuneClusterOptions(o *redis.ClusterOptions) {
	tune(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MinIdleConns, &o.MaxRetries, &o.DialerRetries, &o.ContextTimeoutEnabled)
}

func tuneFailoverOptions(o *redis.FailoverOptions) {
	tune(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MinIdleConns, &o.MaxRetries, &o.DialerRetries, &o.ContextTimeoutEnabled)
}
