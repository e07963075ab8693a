package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// snapshot is the counters a phase's figures are deltas of.
type snapshot struct {
	guardianCPU float64 // seconds
	mallocs     float64 // guardian's heap allocations so far
	selfCPU     float64 // the load generator's own CPU seconds
	redis       redisStats
	redisAt     time.Time // when Redis's figures were read
}

// meter takes snapshots of guardian, Redis and the load generator.
type meter struct {
	g     *guardianProc
	rc    *redis.Client
	httpc *http.Client
}

// snap takes a snapshot.
func (m *meter) snap(ctx context.Context) (snapshot, error) {
	var s snapshot
	var err error
	if s.guardianCPU, err = m.g.cpuSeconds(); err != nil {
		return s, fmt.Errorf("guardian CPU: %w", err)
	}
	if s.mallocs, err = m.metric(ctx, "go_memstats_mallocs_total"); err != nil {
		return s, err
	}
	s.selfCPU = selfCPU()
	if s.redis, err = readRedisStats(ctx, m.rc); err != nil {
		return s, err
	}
	s.redisAt = time.Now()
	return s, nil
}

// settle waits, at most five seconds, until guardian's /readyz says its
// store answers, so that a fallback a previous phase set off does not
// decide the next phase's first checks.
func (m *meter) settle(ctx context.Context) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.g.addr+"/readyz", nil)
		if err != nil {
			return
		}
		resp, err := m.httpc.Do(req)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), `"ok"`) {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric reads one unlabelled sample from guardian's /metrics.
func (m *meter) metric(ctx context.Context, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m.g.addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := m.httpc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("guardian /metrics: %w", err)
	}
	defer resp.Body.Close()
	v, ok, err := sample(resp.Body, name)
	if err != nil {
		return 0, fmt.Errorf("guardian /metrics: %w", err)
	}
	if !ok {
		return 0, fmt.Errorf("guardian /metrics: no %s", name)
	}
	return v, nil
}

// sample finds the unlabelled sample name in Prometheus text r.
func sample(r io.Reader, name string) (float64, bool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name+" ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", name, err)
		}
		return v, true, nil
	}
	return 0, false, sc.Err()
}

// selfCPU is the load generator's own CPU time so far, in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// profile fetches CPU and allocation profiles of guardian over d from its
// pprof listener into dir, as cpu.pprof and allocs.pprof (the allocations
// made during d, not since start). It returns when both are written.
func profile(ctx context.Context, pprofAddr string, d time.Duration, dir string) error {
	secs := strconv.Itoa(max(int(d/time.Second), 1))
	errs := make(chan error, 2)
	for _, p := range []struct{ path, file string }{
		{"/debug/pprof/profile?seconds=" + secs, "cpu.pprof"},
		{"/debug/pprof/allocs?seconds=" + secs, "allocs.pprof"},
	} {
		go func() { errs <- fetch(ctx, "http://"+pprofAddr+p.path, filepath.Join(dir, p.file), d+30*time.Second) }()
	}
	var first error
	for range 2 {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// fetch writes the body of url into file.
func fetch(ctx context.Context, url, file string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// limitKeys matches the Redis keys that hold guardian's limit state: one
// tracked key (one rule's state for one subject, or a report's mark) each.
const limitKeys = "guardian:v3:*"

// keySample is the MEMORY USAGE of a rule's keys over how many were
// sampled (Hashes, the name kept from the layout of shared hashes, counts
// the Redis keys sampled, as Keys does).
type keySample struct {
	Rule   string  `json:"rule"`
	Hashes int     `json:"hashes"`
	Keys   int64   `json:"keys"`
	Bytes  float64 `json:"bytes"`
}

// trackedKeys counts the tracked keys in Redis, guardian's limit keys, and
// samples MEMORY USAGE per rule (the part of a key's name after its last
// colon) over up to n keys. MEMORY USAGE counts a key, its value and its
// entry in the keyspace, not its entry in the expiry table.
func trackedKeys(ctx context.Context, rc *redis.Client, n int) (int64, []keySample, error) {
	type acc struct {
		hashes      int
		keys, bytes int64
	}
	by := map[string]*acc{}
	var total int64
	sampled := 0
	var cursor uint64
	for range 100_000 { // SCAN rounds, bounded
		ks, next, err := rc.Scan(ctx, cursor, limitKeys, 1000).Result()
		if err != nil {
			return 0, nil, fmt.Errorf("redis SCAN: %w", err)
		}
		total += int64(len(ks))
		pipe := rc.Pipeline()
		usage := make([]*redis.IntCmd, len(ks))
		for i, k := range ks {
			if sampled < n {
				usage[i] = pipe.MemoryUsage(ctx, k, 0)
				sampled++
			}
		}
		if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
			return 0, nil, fmt.Errorf("redis MEMORY USAGE: %w", err)
		}
		for i, k := range ks {
			const fields = 1
			if usage[i] == nil || usage[i].Err() != nil {
				continue // not sampled, or expired meanwhile
			}
			rule := k[strings.LastIndexByte(k, ':')+1:]
			a := by[rule]
			if a == nil {
				a = &acc{}
				by[rule] = a
			}
			a.hashes++
			a.keys += fields
			a.bytes += usage[i].Val()
		}
		cursor = next
		if cursor == 0 {
			break
		}
	}
	out := make([]keySample, 0, len(by))
	for rule, a := range by {
		out = append(out, keySample{Rule: rule, Hashes: a.hashes, Keys: a.keys, Bytes: float64(a.bytes) / float64(a.keys)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rule < out[j].Rule })
	return total, out, nil
}
