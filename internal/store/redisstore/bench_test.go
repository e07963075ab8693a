package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// loginBatch is the batch of a login check: the account's rate, the IP
// prefix's rate (each 1 per interval, burst burst) and a look at the
// account's hard stop.
func loginBatch(interval time.Duration, burst int64) []store.Op {
	return []store.Op{
		rate("guardian:v2:{acct1}:login-account", 1, interval, burst),
		rate("guardian:v2:{ip2}:login-ip", 1, interval, burst),
		counter("guardian:v2:{acct1}:hard-stop", 0, 100, 90*24*time.Hour),
	}
}

// familiarBatch is the batch of an untrusted login check under the built-in
// rules: the account's familiar list, its rate and hard stop each as the
// shared bucket and the network's (one of each counts), the address's two
// rates, and its network's distinct accounts.
func familiarBatch(interval time.Duration, burst int64) []store.Op {
	when := func(op store.Op, w store.When) store.Op { op.When = w; return op }
	return []store.Op{
		{Key: "guardian:v3:{acct1}:familiar", Limit: store.Familiar{}, Member: "netA"},
		when(rate("guardian:v3:{acct1}:login-account", 1, interval, burst), store.IfUnfamiliar),
		when(rate("guardian:v3:{acct1}:login-account:net:netA", 1, interval, burst), store.IfFamiliar),
		rate("guardian:v3:{ip2}:login-ip", 1, interval, burst),
		rate("guardian:v3:{ip3}:login-ip6-48", 1, interval, burst),
		{Key: "guardian:v3:{net4}:login-ip-distinct-accounts", Member: "acct1", Cost: 1, Role: store.Soft, Limit: store.Distinct{Step: 6 * time.Hour, Max: 20}},
		when(counter("guardian:v3:{acct1}:hard-stop", 0, 100, 90*24*time.Hour), store.IfUnfamiliar),
		when(counter("guardian:v3:{acct1}:hard-stop:net:netA", 0, 100, 90*24*time.Hour), store.IfFamiliar),
	}
}

// Batches that every call spends, and that every call after the first is
// denied.
var (
	spendBatch    = loginBatch(time.Microsecond, 1<<40)
	denyBatch     = loginBatch(time.Hour, 1)
	familiarSpend = familiarBatch(time.Microsecond, 1<<40)
)

// BenchmarkDo measures one login check against a Redis container. Besides
// time it reports, per Do, the EVALSHA calls and all commands Redis ran
// (from INFO commandstats; the script's own reads and writes count too), and
// the round trips the client made.
func BenchmarkDo(b *testing.B) {
	srv := redistest.Start(b)
	c, err := redisstore.Open(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	node := c.(*redis.Client)
	sent := &sentCounter{}
	node.AddHook(sent)
	s := redisstore.New(c, redisstore.Config{})

	for _, bb := range []struct {
		name     string
		ops      []store.Op
		parallel bool
	}{
		{"spend", spendBatch, false},
		{"deny", denyBatch, false},
		{"spend_parallel", spendBatch, true},
		{"spend_builtin_login", familiarSpend, false},
	} {
		b.Run(bb.name, func(b *testing.B) {
			flush(b, c)
			ops := bb.ops
			do(b, s, ops...)
			before := redistest.CommandStats(b, node)
			sent.take()
			b.ResetTimer()
			if bb.parallel {
				b.RunParallel(func(pb *testing.PB) {
					res := make([]store.Result, len(ops))
					for pb.Next() {
						if err := s.Do(context.Background(), ops, res); err != nil {
							b.Error(err)
							return
						}
					}
				})
			} else {
				res := make([]store.Result, len(ops))
				for b.Loop() {
					if err := s.Do(context.Background(), ops, res); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			reportCommands(b, before, redistest.CommandStats(b, node), sent)
		})
	}
}

// BenchmarkDoCluster measures a login check whose account and IP prefix live
// on different masters of a Redis Cluster: one pipelined round trip when it
// is spent.
func BenchmarkDoCluster(b *testing.B) {
	cl := redistest.StartCluster(b)
	c, err := redisstore.Open(strings.Join(cl.Addrs(), ","))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	sent := &sentCounter{}
	c.AddHook(sent)
	s := redisstore.New(c, redisstore.Config{})
	ops := spendBatch
	do(b, s, ops...)
	sent.take()
	res := make([]store.Result, len(ops))
	for b.Loop() {
		if err := s.Do(context.Background(), ops, res); err != nil {
			b.Fatal(err)
		}
	}
	cmds, roundTrips := sent.take()
	b.ReportMetric(float64(cmds)/float64(b.N), "sent/op")
	b.ReportMetric(float64(roundTrips)/float64(b.N), "roundtrips/op")
}

// reportCommands reports the commands between two commandStats, and what
// the client sent, per benchmark iteration. A pool dialling in the
// background adds its handshakes to both.
func reportCommands(b *testing.B, before, after map[string]int64, sent *sentCounter) {
	b.Helper()
	d := redistest.Ran(before, after)
	var all int64
	for _, n := range d {
		all += n
	}
	cmds, roundTrips := sent.take()
	n := float64(b.N)
	b.ReportMetric(float64(d["evalsha"])/n, "evalsha/op")
	b.ReportMetric(float64(all)/n, "cmds/op")
	b.ReportMetric(float64(cmds)/n, "sent/op")
	b.ReportMetric(float64(roundTrips)/n, "roundtrips/op")
}
