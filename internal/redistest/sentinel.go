package redistest

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

// MasterName is the name the Sentinels of StartSentinel watch the master by.
const MasterName = "guardian"

// Sentinel timings: a master that does not answer for sentinelDownAfter is
// down, and a failover that has not finished within sentinelFailoverTimeout
// is tried again. Small, so a test fails over in about two seconds.
const (
	sentinelDownAfter       = 1000 * time.Millisecond
	sentinelFailoverTimeout = 3000 * time.Millisecond
)

// sentinelPort is the port Sentinels listen on.
const sentinelPort = 26379

// Sentinel is a Redis master, one replica and three Sentinels watching them
// (quorum 2), each a container on a Docker network of its own.
//
// guardian, in the test process on the host, reaches every container at its
// address on that network: Docker routes the host to its bridge networks,
// so the addresses the Sentinels announce (as each container sees the
// others) are the addresses guardian dials, with no announce-ip and no
// published ports. Cutting a node off that network cuts it off from
// guardian too.
type Sentinel struct {
	network   *testcontainers.DockerNetwork
	nodes     []*Node // the two data nodes, master first
	sentinels []*Node
	// certs and tls, for StartTLSSentinel: the certificates, and how this
	// package's own clients speak TLS (see options.clientTLS).
	certs *Certs
	tls   *tls.Config
}

// Node is one container of a Sentinel setup.
type Node struct {
	ctr     *testcontainers.DockerContainer
	network string
	addr    string
	tls     *tls.Config

	mu     sync.Mutex
	paused bool
	cut    bool
}

// Addr is the node's address on the Docker network, "ip:port".
func (n *Node) Addr() string { return n.addr }

// Kill kills the node's processes (SIGKILL): a crash, no clean shutdown.
func (n *Node) Kill(tb testing.TB) {
	tb.Helper()
	docker(tb, n.ctr.GetContainerID(), func(ctx context.Context, c *testcontainers.DockerClient, id string) error {
		_, err := c.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"})
		return err
	})
}

// Pause freezes the node: connections stay open, nothing answers. It is
// unpaused when tb ends if the test did not.
func (n *Node) Pause(tb testing.TB) {
	tb.Helper()
	pause(tb, n.ctr.GetContainerID(), true)
	n.set(&n.paused, true)
}

// Unpause resumes a paused node.
func (n *Node) Unpause(tb testing.TB) {
	tb.Helper()
	pause(tb, n.ctr.GetContainerID(), false)
	n.set(&n.paused, false)
}

// Disconnect cuts the node off the network: every packet to it is lost,
// from the other nodes and from the host alike.
func (n *Node) Disconnect(tb testing.TB) {
	tb.Helper()
	docker(tb, n.ctr.GetContainerID(), func(ctx context.Context, c *testcontainers.DockerClient, id string) error {
		_, err := c.NetworkDisconnect(ctx, n.network, client.NetworkDisconnectOptions{Container: id, Force: true})
		return err
	})
	n.set(&n.cut, true)
}

func (n *Node) set(flag *bool, v bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	*flag = v
}

// Client returns a client of the node, closed when tb ends.
func (n *Node) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: n.addr, DialTimeout: time.Second, ReadTimeout: time.Second, TLSConfig: n.tls})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// StartSentinel starts a master, its replica and three Sentinels for tb,
// and removes them and their network when tb ends. It returns once the
// replica is in sync and every Sentinel knows the replica and the other
// Sentinels, so that a failover can happen.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	return startSentinel(tb, false)
}

// StartTLSSentinel is StartSentinel speaking TLS alone: clients, the
// replication and the Sentinels, with a server certificate for the first
// addresses of the setup's network (Docker hands them out in order). Certs
// returns the certificates; URL is rediss://.
func StartTLSSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	return startSentinel(tb, true)
}

// Certs returns the certificates of a StartTLSSentinel setup, or nil.
func (s *Sentinel) Certs() *Certs { return s.certs }

// tlsHosts is how many addresses of its network a TLS setup's certificate
// names: the five containers of the setup, with room to spare.
const tlsHosts = 30

func startSentinel(tb testing.TB, withTLS bool) *Sentinel {
	tb.Helper()
	setEnv()
	image := Image()
	ensureImage(tb, image)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	nw, err := network.New(ctx)
	if err != nil {
		tb.Fatalf("redistest: docker network: %v", err)
	}
	testcontainers.CleanupNetwork(tb, nw)
	s := &Sentinel{network: nw}
	var data, conf []string
	var files []any
	if withTLS {
		s.certs = NewCerts(tb, networkHosts(tb, nw, tlsHosts)...)
		o := options{certs: s.certs}
		s.tls = o.clientTLS(tb)
		args, fs := o.tlsArgs()
		data = append(args, "--tls-replication", "yes")
		for _, f := range fs {
			files = append(files, testcontainers.WithFiles(f))
		}
		conf = []string{
			"port 0",
			"tls-port " + strconv.Itoa(sentinelPort),
			"tls-cert-file " + tlsDir + "server.pem",
			"tls-key-file " + tlsDir + "server-key.pem",
			"tls-ca-cert-file " + tlsDir + "ca.pem",
			"tls-replication yes",
			"tls-auth-clients no",
		}
	} else {
		conf = []string{"port " + strconv.Itoa(sentinelPort)}
	}
	dataArgs := func(more ...string) []any {
		var out []any
		for _, a := range append(append([]string{"--protected-mode", "no", "--save", ""}, data...), more...) {
			out = append(out, a)
		}
		return append(out, files...)
	}

	master := s.run(ctx, tb, 6379, "Ready to accept connections", dataArgs()...)
	host, _, _ := net.SplitHostPort(master.addr)
	replica := s.run(ctx, tb, 6379, "MASTER <-> REPLICA sync: Finished", dataArgs("--replicaof", host, "6379")...)
	s.nodes = []*Node{master, replica}

	conf = append(conf,
		"protected-mode no",
		fmt.Sprintf("sentinel monitor %s %s 6379 2", MasterName, host),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", MasterName, sentinelDownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", MasterName, sentinelFailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", MasterName),
		"",
	)
	for range 3 {
		args := append([]any{
			testcontainers.WithFiles(testcontainers.ContainerFile{
				Reader: strings.NewReader(strings.Join(conf, "\n")), ContainerFilePath: "/data/sentinel.conf", FileMode: 0o644,
			}),
			"/data/sentinel.conf", "--sentinel",
		}, files...)
		s.sentinels = append(s.sentinels, s.run(ctx, tb, sentinelPort, "+monitor master", args...))
	}
	if err := s.waitReady(ctx); err != nil {
		tb.Fatalf("redistest: sentinel setup: %v", err)
	}
	return s
}

// run starts one container of the setup on its network and waits for
// ready in its log and for it to answer on port. Arguments are
// redis-server's, or request options.
func (s *Sentinel) run(ctx context.Context, tb testing.TB, port int, ready string, args ...any) *Node {
	tb.Helper()
	opts := []testcontainers.ContainerCustomizer{
		network.WithNetwork(nil, s.network),
		testcontainers.WithWaitStrategy(wait.ForLog(ready).WithStartupTimeout(startTimeout)),
	}
	var cmd []string
	for _, a := range args {
		switch a := a.(type) {
		case string:
			cmd = append(cmd, a)
		case testcontainers.ContainerCustomizer:
			opts = append(opts, a)
		}
	}
	opts = append(opts, testcontainers.WithCmd(cmd...))
	ctr, err := testcontainers.Run(ctx, Image(), opts...)
	testcontainers.CleanupContainer(tb, ctr)
	if err != nil {
		tb.Fatalf("redistest: start %s: %v", Image(), err)
	}
	ip, err := ctr.ContainerIP(ctx)
	if err != nil {
		tb.Fatalf("redistest: container address: %v", err)
	}
	n := &Node{ctr: ctr, network: s.network.Name, addr: net.JoinHostPort(ip, strconv.Itoa(port)), tls: s.tls}
	tb.Cleanup(func() {
		n.mu.Lock()
		paused := n.paused
		n.mu.Unlock()
		if paused {
			n.Unpause(tb)
		}
	})
	if err := waitPing(ctx, n.addr, s.tls); err != nil {
		tb.Fatalf("redistest: %s from the host: %v (the tests need the host to reach Docker's bridge networks)", n.addr, err)
	}
	return n
}

// waitReady waits until every Sentinel sees the replica and two other
// Sentinels.
func (s *Sentinel) waitReady(ctx context.Context) error {
	for _, sn := range s.sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.addr, TLSConfig: s.tls})
		var replicas []map[string]string
		var sentinels []map[string]string
		var err error
		for {
			replicas, err = c.Replicas(ctx, MasterName).Result()
			if err == nil {
				sentinels, err = c.Sentinels(ctx, MasterName).Result()
			}
			if err == nil && len(replicas) == 1 && len(sentinels) == 2 && replicas[0]["master-link-status"] == "ok" {
				break
			}
			select {
			case <-ctx.Done():
				_ = c.Close()
				return fmt.Errorf("sentinel %s: replicas %v, sentinels %d, err %v", sn.addr, replicas, len(sentinels), err)
			case <-time.After(100 * time.Millisecond):
			}
		}
		_ = c.Close()
	}
	return nil
}

// URL returns guardian's --redis-url for the setup: the three Sentinels
// and the master's name.
func (s *Sentinel) URL() string {
	scheme := "redis://"
	if s.tls != nil {
		scheme = "rediss://"
	}
	u := scheme + s.sentinels[0].addr + "/0?master_name=" + MasterName
	for _, sn := range s.sentinels[1:] {
		u += "&addr=" + sn.addr
	}
	return u
}

// Master returns the data node the Sentinels name master now, as the first
// Sentinel that answers says.
func (s *Sentinel) Master(tb testing.TB) *Node {
	tb.Helper()
	addr := s.masterAddr(tb)
	for _, n := range s.nodes {
		if n.addr == addr {
			return n
		}
	}
	tb.Fatalf("redistest: the Sentinels name %s master, not a node of the setup", addr)
	return nil
}

// Replica returns the data node that is not Master.
func (s *Sentinel) Replica(tb testing.TB) *Node {
	tb.Helper()
	m := s.Master(tb)
	for _, n := range s.nodes {
		if n != m {
			return n
		}
	}
	return nil
}

func (s *Sentinel) masterAddr(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var lastErr error
	for _, sn := range s.sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.addr, DialTimeout: time.Second, TLSConfig: s.tls})
		hp, err := c.GetMasterAddrByName(ctx, MasterName).Result()
		_ = c.Close()
		if err == nil {
			return net.JoinHostPort(hp[0], hp[1])
		}
		lastErr = err
	}
	tb.Fatalf("redistest: no Sentinel names the master: %v", lastErr)
	return ""
}

// WatchSwitch subscribes to +switch-master on every Sentinel and returns a
// channel that receives the time the first one announced the switch to a
// new master, once. The subscriptions end when tb ends.
func (s *Sentinel) WatchSwitch(tb testing.TB) <-chan time.Time {
	tb.Helper()
	out := make(chan time.Time, 1)
	var once sync.Once
	for _, sn := range s.sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: sn.addr, TLSConfig: s.tls})
		ps := c.Subscribe(context.Background(), "+switch-master")
		if _, err := ps.Receive(context.Background()); err != nil {
			tb.Fatalf("redistest: subscribe +switch-master on %s: %v", sn.addr, err)
		}
		tb.Cleanup(func() { _ = ps.Close(); _ = c.Close() })
		go func() {
			for range ps.Channel() {
				once.Do(func() { out <- time.Now() })
			}
		}()
	}
	return out
}

// Failover asks a Sentinel to fail over now, with the master healthy (a
// switchover, as for maintenance): the master is demoted to a replica of
// the promoted one.
func (s *Sentinel) Failover(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := redis.NewSentinelClient(&redis.Options{Addr: s.sentinels[0].addr, TLSConfig: s.tls})
	defer func() { _ = c.Close() }()
	if err := c.Failover(ctx, MasterName).Err(); err != nil {
		tb.Fatalf("redistest: SENTINEL FAILOVER: %v", err)
	}
}

// networkHosts returns the first n addresses Docker hands out on nw, after
// its gateway.
func networkHosts(tb testing.TB, nw *testcontainers.DockerNetwork, n int) []string {
	tb.Helper()
	var hosts []string
	docker(tb, nw.ID, func(ctx context.Context, c *testcontainers.DockerClient, id string) error {
		res, err := c.NetworkInspect(ctx, id, client.NetworkInspectOptions{})
		if err != nil {
			return err
		}
		if len(res.Network.IPAM.Config) == 0 {
			return fmt.Errorf("network %s has no subnet", nw.Name)
		}
		a := res.Network.IPAM.Config[0].Subnet.Masked().Addr().Next() // the gateway
		for range n {
			a = a.Next()
			hosts = append(hosts, a.String())
		}
		return nil
	})
	return hosts
}
