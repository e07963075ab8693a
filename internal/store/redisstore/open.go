package redisstore

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrBadURL reports a store address Open cannot read.
var ErrBadURL = errors.New("redisstore: bad url")

// ErrBadOptions reports connection options Open cannot use: a file that
// cannot be read, a certificate that does not parse, TLS files for a
// store reached without TLS.
var ErrBadOptions = errors.New("redisstore: bad connection options")

// Options are the connection settings that do not belong in the store's
// address: files holding secrets and certificates. The zero value adds
// nothing to the address.
type Options struct {
	// CAFile is a PEM file of the certificate authorities the server's
	// certificate must chain to, in place of the system roots. It needs a
	// rediss:// address.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key,
	// presented to a server that asks for one. Both or neither; they need a
	// rediss:// address.
	CertFile, KeyFile string
	// PasswordFile is a file whose first line is the password to log in
	// with, replacing any password in the address; the user, if any, stays
	// the address's.
	PasswordFile string
}

// tls reports whether o sets anything that only TLS can use.
func (o Options) tls() bool {
	return o.CAFile != "" || o.CertFile != "" || o.KeyFile != ""
}

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

// Open returns a client for the store at addr with no further options: it
// is shorthand for OpenWith(addr, Options{}).
func Open(addr string) (redis.UniversalClient, error) {
	return OpenWith(addr, Options{})
}

// OpenWith returns a client for the store at addr, in one of the forms of
// --redis-url, with o's files:
//
//   - "redis://[user:pass@]host:port/db" or "rediss://…" (TLS): one Redis,
//     a *redis.Client. Query parameters set client options (dial_timeout,
//     pool_size, …) as redis.ParseURL reads them.
//   - the same with "?master_name=NAME": host:port (and any &addr=host:port)
//     are Sentinels watching NAME, a failover *redis.Client
//     (redis.ParseFailoverURL). The user and password log in to the
//     Sentinels and to the master alike.
//   - the same with "?addr=host:port" and no master_name: Redis Cluster
//     seeded from every address given, a *redis.ClusterClient
//     (redis.ParseClusterURL).
//   - "host:port,host:port,…": Redis Cluster seeded from the list, a
//     *redis.ClusterClient. A single "host:port" is one Redis. Neither
//     form speaks TLS.
//
// rediss:// verifies every server's certificate, against the system roots
// or o.CAFile, and for Sentinel and Cluster against the address of the node
// it dials; skip_verify is refused. A server whose certificate does not
// verify is an error of every call, never a plain connection. The caller
// closes the client.
func OpenWith(addr string, o Options) (redis.UniversalClient, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return nil, fmt.Errorf("%w: empty", ErrBadURL)
	}
	if strings.Contains(addr, "://") {
		return openURL(addr, o)
	}
	if o.tls() {
		return nil, fmt.Errorf("%w: a CA or client certificate needs a rediss:// address", ErrBadOptions)
	}
	password, err := readPassword(o.PasswordFile)
	if err != nil {
		return nil, err
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
		ro := &redis.Options{Addr: addrs[0], Password: password}
		tuneOptions(ro)
		return redis.NewClient(ro), nil
	}
	co := &redis.ClusterOptions{Addrs: addrs, Password: password}
	tuneClusterOptions(co)
	return newClusterClient(co), nil
}

// newClusterClient returns a Cluster client that follows failovers at once
// (followCluster).
func newClusterClient(o *redis.ClusterOptions) *redis.ClusterClient {
	c := redis.NewClusterClient(o)
	c.AddHook(followCluster{c})
	return c
}

// openURL opens a redis:// or rediss:// URL.
func openURL(raw string, o Options) (redis.UniversalClient, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
	}
	q := u.Query()
	if q.Has("skip_verify") {
		return nil, fmt.Errorf("%w: skip_verify is not accepted: give the server's CA with --redis-ca-file", ErrBadURL)
	}
	if o.tls() && u.Scheme != "rediss" {
		return nil, fmt.Errorf("%w: a CA or client certificate needs a rediss:// address, not %s://", ErrBadOptions, u.Scheme)
	}
	password, err := readPassword(o.PasswordFile)
	if err != nil {
		return nil, err
	}
	switch {
	case q.Has("master_name"):
		fo, err := redis.ParseFailoverURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		// The Sentinels name masters by address: verify each by its own.
		if fo.TLSConfig, err = tlsConfig(fo.TLSConfig, o, false); err != nil {
			return nil, err
		}
		// The URL's login is the Sentinels'; guardian logs in to the master
		// with the same user and password.
		if password != "" {
			fo.SentinelPassword = password
		}
		fo.Username, fo.Password = fo.SentinelUsername, fo.SentinelPassword
		tuneFailoverOptions(fo)
		return redis.NewFailoverClient(fo), nil
	case q.Has("addr"):
		co, err := redis.ParseClusterURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		if co.TLSConfig, err = tlsConfig(co.TLSConfig, o, false); err != nil {
			return nil, err
		}
		if password != "" {
			co.Password = password
		}
		tuneClusterOptions(co)
		return newClusterClient(co), nil
	default:
		ro, err := redis.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		if ro.TLSConfig, err = tlsConfig(ro.TLSConfig, o, true); err != nil {
			return nil, err
		}
		if password != "" {
			ro.Password = password
		}
		tuneOptions(ro)
		return redis.NewClient(ro), nil
	}
}

// tlsConfig completes the TLS configuration the URL parser made (nil for
// redis://) with o's files. keepName keeps the server name the parser took
// from the URL; otherwise it is cleared, so that each node a Sentinel or
// Cluster client dials is verified against the address it dialled.
func tlsConfig(c *tls.Config, o Options, keepName bool) (*tls.Config, error) {
	if c == nil {
		return nil, nil
	}
	c = c.Clone()
	c.MinVersion = tls.VersionTLS12
	if !keepName {
		c.ServerName = ""
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --redis-ca-file: %w", ErrBadOptions, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: --redis-ca-file %s: no PEM certificate in it", ErrBadOptions, o.CAFile)
		}
		c.RootCAs = roots
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, fmt.Errorf("%w: --redis-cert-file and --redis-key-file go together", ErrBadOptions)
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate: %w", ErrBadOptions, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// readPassword returns the first line of path, or "" when path is empty.
func readPassword(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%w: --redis-password-file: %w", ErrBadOptions, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return "", fmt.Errorf("%w: --redis-password-file: %w", ErrBadOptions, err)
		}
	}
	password := strings.TrimRight(sc.Text(), "\r")
	if password == "" {
		return "", fmt.Errorf("%w: --redis-password-file %s: the first line is empty", ErrBadOptions, path)
	}
	return password, nil
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
