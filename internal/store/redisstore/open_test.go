package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
