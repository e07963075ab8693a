package redistest

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kill kills the cluster node at addr (SIGKILL): a crash. Its replica takes
// over once cluster-node-timeout has passed.
func (c *Cluster) Kill(tb testing.TB, addr string) {
	tb.Helper()
	cmd, ok := c.procs[addr]
	if !ok {
		tb.Fatalf("redistest: %s is not a node of the cluster", addr)
	}
	if err := cmd.Process.Kill(); err != nil {
		tb.Fatalf("redistest: kill %s: %v", addr, err)
	}
}

// MasterOf returns the address of the master that serves slot, as the node
// at via sees it.
func (c *Cluster) MasterOf(tb testing.TB, via string, slot int) string {
	tb.Helper()
	for _, sh := range c.shards(tb, via) {
		for _, r := range sh.slots {
			if r.Start <= int64(slot) && int64(slot) <= r.End {
				return sh.master
			}
		}
	}
	tb.Fatalf("redistest: no master serves slot %d", slot)
	return ""
}

// Masters returns the addresses of the masters, as the node at via sees
// them: those that serve slots.
func (c *Cluster) Masters(tb testing.TB, via string) []string {
	tb.Helper()
	var out []string
	for _, sh := range c.shards(tb, via) {
		if len(sh.slots) > 0 && !slices.Contains(out, sh.master) {
			out = append(out, sh.master)
		}
	}
	return out
}

// shard is one master of a Cluster and the slots it serves.
type shard struct {
	master string
	slots  []redis.SlotRange
}

// shards returns the Cluster's masters, as CLUSTER SHARDS on the node at
// via reports them.
func (c *Cluster) shards(tb testing.TB, via string) []shard {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n := c.node(via)
	defer func() { _ = n.Close() }()
	all, err := n.ClusterShards(ctx).Result()
	if err != nil {
		tb.Fatalf("redistest: CLUSTER SHARDS on %s: %v", via, err)
	}
	var out []shard
	for _, sh := range all {
		for _, node := range sh.Nodes {
			if node.Role == "master" && node.Health == "online" {
				port := node.Port
				if c.tls != nil {
					port = node.TLSPort
				}
				out = append(out, shard{master: net.JoinHostPort(node.IP, strconv.FormatInt(port, 10)), slots: sh.Slots})
			}
		}
	}
	return out
}

// WaitStable waits until every node but those in dead reports
// cluster_state:ok with every slot served by a live master, and returns
// when that was.
func (c *Cluster) WaitStable(tb testing.TB, within time.Duration, dead ...string) time.Time {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for _, addr := range c.addrs {
		if slices.Contains(dead, addr) {
			continue
		}
		n := c.node(addr)
		for {
			info, err := n.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_ok:16384") &&
				!slices.ContainsFunc(c.Masters(tb, addr), func(m string) bool { return slices.Contains(dead, m) }) {
				break
			}
			select {
			case <-ctx.Done():
				_ = n.Close()
				tb.Fatalf("redistest: cluster not stable within %v: node %s: %v %q", within, addr, err, info)
			case <-time.After(50 * time.Millisecond):
			}
		}
		_ = n.Close()
	}
	return time.Now()
}

// MigrateSlot moves slot from its master to the master at to, the way
// redis-cli --cluster reshard does: IMPORTING on the target, MIGRATING on
// the source, MIGRATE of the keys a few at a time with hold between the
// batches (clients meanwhile get ASK and TRYAGAIN), then SETSLOT NODE on
// every master.
func (c *Cluster) MigrateSlot(tb testing.TB, slot int, to string, hold time.Duration) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	from := c.MasterOf(tb, to, slot)
	if from == to {
		tb.Fatalf("redistest: slot %d is already on %s", slot, to)
	}
	src := c.node(from)
	defer func() { _ = src.Close() }()
	dst := c.node(to)
	defer func() { _ = dst.Close() }()
	srcID, err := src.ClusterMyID(ctx).Result()
	if err != nil {
		tb.Fatalf("redistest: CLUSTER MYID %s: %v", from, err)
	}
	dstID, err := dst.ClusterMyID(ctx).Result()
	if err != nil {
		tb.Fatalf("redistest: CLUSTER MYID %s: %v", to, err)
	}
	s := strconv.Itoa(slot)
	must := func(n *redis.Client, args ...any) {
		tb.Helper()
		if err := n.Do(ctx, args...).Err(); err != nil {
			tb.Fatalf("redistest: %v on %s: %v", args, n.Options().Addr, err)
		}
	}
	must(dst, "CLUSTER", "SETSLOT", s, "IMPORTING", srcID)
	must(src, "CLUSTER", "SETSLOT", s, "MIGRATING", dstID)
	host, port, _ := strings.Cut(to, ":")
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 2).Result()
		if err != nil {
			tb.Fatalf("redistest: CLUSTER GETKEYSINSLOT: %v", err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(src, args...)
		time.Sleep(hold)
	}
	time.Sleep(hold)
	for _, m := range c.Masters(tb, to) {
		n := c.node(m)
		must(n, "CLUSTER", "SETSLOT", s, "NODE", dstID)
		_ = n.Close()
	}
	if got := c.MasterOf(tb, to, slot); got != to {
		tb.Fatalf("redistest: slot %d on %s after the move, want %s", slot, got, to)
	}
}
