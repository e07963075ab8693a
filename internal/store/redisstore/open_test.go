package redisstore

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/redistest"
)

func TestOpenSingle(t *testing.T) {
	tests := []struct {
		url      string
		wantAddr string
		wantDB   int
		wantTLS  bool
		wantDial time.Duration
	}{
		{"redis://127.0.0.1:1/0", "127.0.0.1:1", 0, false, dialTimeout},
		{"redis://user:secret@localhost:2/2", "localhost:2", 2, false, dialTimeout},
		{"rediss://localhost:3/1", "localhost:3", 1, true, dialTimeout},
		{"redis://127.0.0.1:4/3?dial_timeout=250ms", "127.0.0.1:4", 3, false, 250 * time.Millisecond},
		{"127.0.0.1:5", "127.0.0.1:5", 0, false, dialTimeout},
		{" 127.0.0.1:6 ", "127.0.0.1:6", 0, false, dialTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, err := Open(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			rc, ok := c.(*redis.Client)
			if !ok {
				t.Fatalf("Open(%q) is a %T, want *redis.Client", tt.url, c)
			}
			o := rc.Options()
			if o.Addr != tt.wantAddr || o.DB != tt.wantDB || (o.TLSConfig != nil) != tt.wantTLS {
				t.Errorf("addr %q db %d tls %v, want %q %d %v",
					o.Addr, o.DB, o.TLSConfig != nil, tt.wantAddr, tt.wantDB, tt.wantTLS)
			}
			if got, want := o.DialTimeout, tt.wantDial; got != want {
				t.Errorf("DialTimeout = %v, want %v", got, want)
			}
			if o.ReadTimeout != ioTimeout || o.WriteTimeout != ioTimeout || !o.ContextTimeoutEnabled {
				t.Errorf("read %v write %v context timeouts %v, want %v %v true",
					o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled, ioTimeout, ioTimeout)
			}
			if got, want := o.MinIdleConns, minIdleConns; got != want {
				t.Errorf("MinIdleConns = %d, want %d", got, want)
			}
		})
	}
}

func TestOpenCluster(t *testing.T) {
	tests := []struct {
		url  string
		want []string
	}{
		{"127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}},
		{"127.0.0.1:4, localhost:5", []string{"127.0.0.1:4", "localhost:5"}},
		{"redis://127.0.0.1:6?addr=127.0.0.1:7&addr=localhost:8", []string{"127.0.0.1:6", "127.0.0.1:7", "localhost:8"}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, err := Open(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cc, ok := c.(*redis.ClusterClient)
			if !ok {
				t.Fatalf("Open(%q) is a %T, want *redis.ClusterClient", tt.url, c)
			}
			o := cc.Options()
			if len(o.Addrs) != len(tt.want) {
				t.Fatalf("Addrs = %q, want %q", o.Addrs, tt.want)
			}
			for i := range tt.want {
				if o.Addrs[i] != tt.want[i] {
					t.Errorf("Addrs = %q, want %q", o.Addrs, tt.want)
				}
			}
			if o.DialTimeout != dialTimeout || o.ReadTimeout != ioTimeout || !o.ContextTimeoutEnabled {
				t.Errorf("dial %v read %v context timeouts %v, want %v %v true",
					o.DialTimeout, o.ReadTimeout, o.ContextTimeoutEnabled, dialTimeout, ioTimeout)
			}
		})
	}
}

func TestOpenSentinel(t *testing.T) {
	c, err := Open("redis://127.0.0.1:1/1?master_name=guardian&addr=127.0.0.1:2")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, ok := c.(*redis.Client)
	if !ok {
		t.Fatalf("Open is a %T, want a failover *redis.Client", c)
	}
	o := rc.Options()
	// A failover client dials whichever master the Sentinels name; go-redis
	// marks its options with this placeholder address.
	if got, want := o.Addr, "FailoverClient"; got != want {
		t.Errorf("Addr = %q, want %q", got, want)
	}
	if o.DB != 1 || o.DialTimeout != dialTimeout || !o.ContextTimeoutEnabled {
		t.Errorf("db %d dial %v context timeouts %v, want 1 %v true", o.DB, o.DialTimeout, o.ContextTimeoutEnabled, dialTimeout)
	}
}

func TestOpenBad(t *testing.T) {
	for _, url := range []string{
		"",
		"   ",
		"localhost",
		":1",
		"127.0.0.1:1,,127.0.0.1:2",
		"127.0.0.1:1,localhost",
		"http://127.0.0.1:1",
		"redis://127.0.0.1:1/zero",
		"redis://127.0.0.1:1/0?no_such_option=1",
		"redis://127.0.0.1:1/0/1",
	} {
		c, err := Open(url)
		if !errors.Is(err, ErrBadURL) {
			t.Errorf("Open(%q): err = %v, want ErrBadURL", url, err)
		}
		if c != nil {
			t.Errorf("Open(%q) returned a client with an error", url)
			_ = c.Close()
		}
	}
}

// writeFile writes content to a new file in tb's temporary directory.
func writeFile(tb testing.TB, name, content string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func TestOpenWithFiles(t *testing.T) {
	certs := redistest.NewCerts(t)
	pw := writeFile(t, "password", "s3cret\r\nsecond line\n")
	files := Options{CAFile: certs.CA, CertFile: certs.ClientCert, KeyFile: certs.ClientKey, PasswordFile: pw}

	c, err := OpenWith("rediss://guardian:fromurl@redis.example:6380/0", files)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.(*redis.Client).Options()
	if o.Username != "guardian" || o.Password != "s3cret" {
		t.Errorf("login %q/%q, want guardian and the file's first line", o.Username, o.Password)
	}
	tc := o.TLSConfig
	if tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.InsecureSkipVerify || tc.ServerName != "redis.example" {
		t.Fatalf("TLS config %+v: want the CA, the client certificate, verification, the URL's name", tc)
	}

	// Sentinel and Cluster verify each node by the address dialled, and log
	// in to the master with the URL's user.
	fc, err := OpenWith("rediss://guardian@10.0.0.1:26379/0?master_name=m&addr=10.0.0.2:26379", files)
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	fo := fc.(*redis.Client).Options()
	if fo.TLSConfig == nil || fo.TLSConfig.ServerName != "" || fo.TLSConfig.RootCAs == nil || fo.Username != "guardian" || fo.Password != "s3cret" {
		t.Errorf("failover: TLS %+v, login %q/%q", fo.TLSConfig, fo.Username, fo.Password)
	}
	cc, err := OpenWith("rediss://10.0.0.1:7000?addr=10.0.0.2:7000", files)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	co := cc.(*redis.ClusterClient).Options()
	if co.TLSConfig == nil || co.TLSConfig.ServerName != "" || len(co.TLSConfig.Certificates) != 1 || co.Password != "s3cret" {
		t.Errorf("cluster: TLS %+v, password %q", co.TLSConfig, co.Password)
	}

	// A password file serves the host:port forms too.
	hc, err := OpenWith("127.0.0.1:1", Options{PasswordFile: pw})
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	if got := hc.(*redis.Client).Options().Password; got != "s3cret" {
		t.Errorf("host:port password %q, want s3cret", got)
	}
}

func TestOpenWithBadFiles(t *testing.T) {
	certs := redistest.NewCerts(t)
	notPEM := writeFile(t, "ca.pem", "not a certificate")
	empty := writeFile(t, "password", "\nsecond line\n")
	tests := []struct {
		name string
		url  string
		o    Options
		want error
	}{
		{"CA without TLS", "redis://127.0.0.1:1/0", Options{CAFile: certs.CA}, ErrBadOptions},
		{"client certificate without TLS", "127.0.0.1:1", Options{CertFile: certs.ClientCert, KeyFile: certs.ClientKey}, ErrBadOptions},
		{"missing CA file", "rediss://127.0.0.1:1/0", Options{CAFile: "/nonexistent/ca.pem"}, ErrBadOptions},
		{"CA file without a certificate", "rediss://127.0.0.1:1/0", Options{CAFile: notPEM}, ErrBadOptions},
		{"certificate without its key", "rediss://127.0.0.1:1/0", Options{CertFile: certs.ClientCert}, ErrBadOptions},
		{"key that is not the certificate's", "rediss://127.0.0.1:1/0", Options{CertFile: certs.ClientCert, KeyFile: certs.ServerKey}, ErrBadOptions},
		{"missing password file", "redis://127.0.0.1:1/0", Options{PasswordFile: "/nonexistent/password"}, ErrBadOptions},
		{"empty first line", "redis://127.0.0.1:1/0", Options{PasswordFile: empty}, ErrBadOptions},
		{"skip_verify", "rediss://127.0.0.1:1/0?skip_verify=true", Options{}, ErrBadURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := OpenWith(tt.url, tt.o)
			if !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if c != nil {
				t.Error("a client with an error")
				_ = c.Close()
			}
		})
	}
}

// replyWith returns the error a go-redis client gets when Redis answers a
// command with the error line reply: a one-connection fake server that
// answers every command so.
func replyWith(t *testing.T, reply string) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		for {
			// One command: *N, then N bulk strings ($len, data).
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
			for range 2 * n {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
			}
			if _, err := conn.Write([]byte("-" + reply + "\r\n")); err != nil {
				return
			}
		}
	}()
	c := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	defer c.Close()
	return c.Do(t.Context(), "EVALSHA", "0", "0").Err()
}

func TestInFailover(t *testing.T) {
	tests := []struct {
		reply string
		want  bool
	}{
		{"READONLY You can't write against a read only replica.", true},
		{"ERR Error running script (call to f_0): @user_script:27: -READONLY You can't write against a read only replica.", true},
		{"LOADING Redis is loading the dataset in memory", true},
		{"MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", true},
		{"MOVED 3999 127.0.0.1:6381", true},
		{"ASK 3999 127.0.0.1:6381", true},
		{"TRYAGAIN Multiple keys request during rehashing of slot", true},
		{"CLUSTERDOWN The cluster is down", true},
		{"OOM command not allowed when used memory > 'maxmemory'.", false},
		{"NOPERM this user has no permissions to run the 'evalsha' command", false},
		{"ERR unknown command", false},
	}
	for _, tt := range tests {
		err := fmt.Errorf("redisstore: do: %w", replyWith(t, tt.reply))
		if got := InFailover(err); got != tt.want {
			t.Errorf("InFailover(%q) = %v, want %v", tt.reply, got, tt.want)
		}
	}
	if InFailover(nil) {
		t.Error("InFailover(nil)")
	}
}
