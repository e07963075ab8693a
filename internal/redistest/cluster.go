package redistest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterNodes is how many masters StartCluster runs: the fewest Redis
// Cluster accepts.
const clusterNodes = 3

// clusterBusOffset is the distance from a node's port to its cluster bus
// port.
const clusterBusOffset = 10000

// Cluster is a Redis Cluster of three masters, each a redis-server process
// on 127.0.0.1, with the 16384 slots split between them, and with
// StartReplicatedCluster a replica of each.
type Cluster struct {
	addrs []string
	procs map[string]*exec.Cmd
	cli   string
	// tls, for StartTLSCluster, is how this package's own clients speak TLS
	// to the nodes (see options.clientTLS).
	tls *tls.Config
}

// StartCluster starts a three-master Redis Cluster for tb, in tb.TempDir(),
// and stops it when tb ends. It needs redis-server and redis-cli on PATH
// (Debian: redis-server and redis-tools). It returns once every node reports
// cluster_state:ok.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	return startCluster(tb, 0, 5*time.Second, nil)
}

// StartTLSCluster is StartCluster speaking TLS alone, clients, replication
// and the cluster bus, with certs' server certificate (it must name
// 127.0.0.1, as NewCerts's does). Clients need not present a certificate.
// URL is the cluster's rediss:// address.
func StartTLSCluster(tb testing.TB, certs *Certs) *Cluster {
	tb.Helper()
	return startCluster(tb, 0, 5*time.Second, certs)
}

// StartReplicatedCluster is StartCluster with a replica of each master,
// and a cluster-node-timeout of one second: a replica takes over a master
// that does not answer for that long, within about two seconds.
func StartReplicatedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	return startCluster(tb, 1, time.Second, nil)
}

// startCluster starts clusterNodes masters with replicas replicas each,
// over TLS when certs is set.
func startCluster(tb testing.TB, replicas int, nodeTimeout time.Duration, certs *Certs) *Cluster {
	tb.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("redistest: redis-server not found (install redis-server): %v", err)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		tb.Fatalf("redistest: redis-cli not found (install redis-tools): %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	dir := tb.TempDir()
	o := options{certs: certs}
	c := &Cluster{procs: map[string]*exec.Cmd{}, cli: cli, tls: o.clientTLS(tb)}
	total := clusterNodes * (1 + replicas)
	for i := range total {
		addr, cmd, err := startNode(ctx, tb, server, filepath.Join(dir, "node"+strconv.Itoa(i)), nodeTimeout, certs)
		if err != nil {
			tb.Fatalf("redistest: cluster node %d: %v", i, err)
		}
		c.addrs = append(c.addrs, addr)
		c.procs[addr] = cmd
	}

	args := append([]string{"--cluster", "create"}, c.addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if certs != nil {
		args = append(args, "--tls", "--cacert", certs.CA)
	}
	cmd := exec.CommandContext(ctx, cli, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v: %s", err, out.String())
	}
	for _, addr := range c.addrs {
		if err := waitClusterOK(ctx, c.node(addr), total); err != nil {
			tb.Fatalf("redistest: cluster node %s: %v", addr, err)
		}
		if err := waitReplicaSynced(ctx, c.node(addr)); err != nil {
			tb.Fatalf("redistest: cluster node %s: %v", addr, err)
		}
	}
	return c
}

// node returns a client of the node at addr, which the caller closes.
func (c *Cluster) node(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, TLSConfig: c.tls})
}

// URL returns the cluster's address as a guardian --redis-url: the
// host:port list, or for StartTLSCluster rediss://first?addr=… .
func (c *Cluster) URL() string {
	if c.tls == nil {
		return strings.Join(c.addrs, ",")
	}
	return "rediss://" + c.addrs[0] + "?addr=" + strings.Join(c.addrs[1:], "&addr=")
}

// waitReplicaSynced waits until the node c, if it is a replica, has its link
// to its master up. It closes c.
func waitReplicaSynced(ctx context.Context, c *redis.Client) error {
	defer func() { _ = c.Close() }()
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && (strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up")) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replica not in sync: %v %q", err, info)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Addrs returns the nodes' addresses, "127.0.0.1:port" each.
func (c *Cluster) Addrs() []string {
	return append([]string(nil), c.addrs...)
}

// Client returns a cluster client seeded with every node, closed when tb
// ends.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), TLSConfig: c.tls})
	tb.Cleanup(func() { _ = cc.Close() })
	return cc
}

// startNode starts one cluster-enabled redis-server in dir on a free
// loopback port, retrying with another port if the one picked was taken in
// the meantime, and returns its address once it answers.
func startNode(ctx context.Context, tb testing.TB, server, dir string, nodeTimeout time.Duration, certs *Certs) (string, *exec.Cmd, error) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, err
	}
	clientTLS := (&options{certs: certs}).clientTLS(tb)
	var lastErr error
	for range 5 {
		port, err := freePort(clusterBusOffset)
		if err != nil {
			return "", nil, err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		logPath := filepath.Join(dir, "redis.log")
		listen := []string{"--port", strconv.Itoa(port)}
		if certs != nil {
			listen = []string{
				"--port", "0", "--tls-port", strconv.Itoa(port),
				"--tls-cluster", "yes", "--tls-replication", "yes",
				"--tls-cert-file", certs.ServerCert, "--tls-key-file", certs.ServerKey,
				"--tls-ca-cert-file", certs.CA, "--tls-auth-clients", "optional",
			}
		}
		cmd := exec.Command(server, append(listen, []string{
			"--bind", "127.0.0.1",
			"--protected-mode", "no",
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10),
			// A replica takes over however long its link was down: a test
			// kills a master moments after the replica first synced.
			"--cluster-replica-validity-factor", "0",
			"--dir", dir,
			"--save", "",
			"--appendonly", "no",
			"--logfile", logPath,
		}...)...)
		if err := cmd.Start(); err != nil {
			return "", nil, err
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		stop := func() {
			_ = cmd.Process.Kill()
			<-exited
		}

		pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		pinged := make(chan error, 1)
		go func() { pinged <- waitPing(pingCtx, addr, clientTLS) }()
		select {
		case err = <-pinged:
		case err = <-exited:
			exited <- err // for stop
			err = fmt.Errorf("redis-server exited: %v: %s", err, tail(logPath))
		}
		cancel()
		if err == nil {
			tb.Cleanup(stop)
			return addr, cmd, nil
		}
		stop()
		lastErr = err
		_ = os.Remove(filepath.Join(dir, "nodes.conf"))
	}
	return "", nil, lastErr
}

// waitClusterOK polls CLUSTER INFO on the node c until it sees all nodes
// of the cluster and every slot served, or ctx ends. It closes c.
func waitClusterOK(ctx context.Context, c *redis.Client, nodes int) error {
	defer func() { _ = c.Close() }()
	var info string
	for {
		var err error
		info, err = c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") &&
			strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(nodes)) &&
			strings.Contains(info, "cluster_slots_ok:16384") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ok: %v; last CLUSTER INFO: %q", err, info)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail returns the end of a log file, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(bytes.TrimSpace(b))
}

// freePort returns a loopback port that is free, along with port+offset
// when offset is not zero (a cluster node's bus port).
func freePort(offset int) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if offset == 0 {
			_ = l.Close()
			return port, nil
		}
		if port+offset > 65535 {
			_ = l.Close()
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+offset))
		_ = l.Close()
		if err != nil {
			continue
		}
		_ = l2.Close()
		return port, nil
	}
	return 0, errors.New("no free loopback port")
}
