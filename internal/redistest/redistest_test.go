package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
)

func TestMain(m *testing.M) { Main(m) }

func TestStartBuildsMissingImage(t *testing.T) {
	ctx := context.Background()
	image := fmt.Sprintf("guardian-redis:redistest-%d", time.Now().UnixNano())
	t.Setenv("GUARDIAN_REDIS_IMAGE", image)
	if got := Image(); got != image {
		t.Fatalf("Image() = %q, want %q", got, image)
	}
	// Registered first, so it runs after the container is terminated.
	t.Cleanup(func() {
		c, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err != nil {
			t.Errorf("docker client: %v", err)
			return
		}
		defer c.Close()
		if _, err := c.ImageRemove(ctx, image, client.ImageRemoveOptions{PruneChildren: true}); err != nil {
			t.Errorf("remove %s: %v", image, err)
		}
	})

	s := Start(t)
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING a server from a freshly built image: %v", err)
	}
	info, err := s.Container().Inspect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Config.Image; got != image {
		t.Errorf("container image = %q, want %q", got, image)
	}
}

func TestServerRestartKeepsAOFData(t *testing.T) {
	ctx := context.Background()
	s := Start(t, WithAOF())
	if err := s.Client(t).Set(ctx, "guardian:v1:{a}:hard-stop", "42", 0).Err(); err != nil {
		t.Fatal(err)
	}
	aof, err := s.Client(t).ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := aof["appendonly"], "yes"; got != want {
		t.Errorf("appendonly = %q, want %q", got, want)
	}

	s.Restart(t)

	got, err := s.Client(t).Get(ctx, "guardian:v1:{a}:hard-stop").Result()
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if want := "42"; got != want {
		t.Errorf("after restart got %q, want %q", got, want)
	}
}

func TestServerStopRefusesConnections(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	before := s.Addr()
	s.Stop(t)
	c := redis.NewClient(&redis.Options{Addr: before, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING a stopped server: no error")
	}
	s.Start(t)
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Start: %v", err)
	}
}

func TestServerPauseHangsCommands(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	c := redis.NewClient(&redis.Options{
		Addr: s.Addr(), MaxRetries: -1, ReadTimeout: 200 * time.Millisecond,
	})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	s.Pause(t)
	start := time.Now()
	err := c.Ping(ctx).Err()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("PING a paused server: err = %v, want a timeout", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("PING a paused server failed after %v, want it to hang until the read timeout", d)
	}

	s.Unpause(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Unpause: %v", err)
	}
}

func TestServerArgsAndAddr(t *testing.T) {
	ctx := context.Background()
	s := Start(t, WithArgs("--maxmemory", "12345678"))
	got, err := s.Client(t).ConfigGet(ctx, "maxmemory").Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := "12345678"; got["maxmemory"] != want {
		t.Errorf("maxmemory = %q, want %q", got["maxmemory"], want)
	}
	host, _, err := net.SplitHostPort(s.Addr())
	if err != nil || host != "127.0.0.1" {
		t.Errorf("Addr() = %q, want 127.0.0.1:port", s.Addr())
	}
	if got, want := s.URL(), "redis://"+s.Addr()+"/0"; got != want {
		t.Errorf("URL() = %q, want %q", got, want)
	}
	if s.Container().GetContainerID() == "" {
		t.Error("Container() has no id")
	}
}

func TestClusterServesEverySlot(t *testing.T) {
	ctx := context.Background()
	c := StartCluster(t)
	if got, want := len(c.Addrs()), 3; got != want {
		t.Fatalf("len(Addrs()) = %d, want %d", got, want)
	}
	cc := c.Client(t)

	shards, err := cc.ClusterShards(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	var served int64
	masters := map[string]bool{}
	for _, sh := range shards {
		for _, r := range sh.Slots {
			served += r.End - r.Start + 1
		}
		for _, n := range sh.Nodes {
			if n.IP != "127.0.0.1" {
				t.Errorf("node %s:%d, want 127.0.0.1", n.IP, n.Port)
			}
			if n.Role == "master" {
				masters[fmt.Sprintf("%s:%d", n.IP, n.Port)] = true
			}
		}
	}
	if served != 16384 || len(masters) != 3 {
		t.Errorf("%d slots served by %d masters, want 16384 by 3", served, len(masters))
	}

	// Keys on every master round-trip through the cluster client.
	for i := range 30 {
		k := fmt.Sprintf("guardian:v1:{s%d}:r", i)
		if err := cc.Set(ctx, k, i, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		got, err := cc.Get(ctx, k).Int()
		if err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d", k, got, err, i)
		}
	}
	var mu sync.Mutex
	var perNode []int64
	err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		mu.Lock()
		perNode = append(perNode, n)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range perNode {
		if n == 0 {
			t.Errorf("keys per master %v: want every master to hold some", perNode)
			break
		}
	}
}
