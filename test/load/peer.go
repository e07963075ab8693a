package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The peer comparison (make bench-peer, --peer BIN): guardian and the envoy
// ratelimit service side by side, each on a Redis of its own started from
// the same redis-server binary, asked the same thing. A decision is three
// limits on one login: the account, the address, and the account with the
// address. guardian decides it twice over, each on a Redis of its own:
// with its built-in login rules (the protection people deploy: the
// account's rate and hard stop, its familiar networks, the address's /32
// and /24 or /48 rates and its network's distinct accounts), and with the
// same three limits as envoy (threeLimitRules); the envoy service with
// three descriptors (account, ip, and ip nested under account) on its HTTP
// /json endpoint. Every decision picks one of --peer-keys identities at
// random, the same identities for all. Rounds interleave the three, the
// order rotating, so that a burst of outside load on a shared machine falls
// on each.

// envoyDomain is the rate-limit domain of the envoy service's configuration.
const envoyDomain = "guardian-peer"

// envoyConfig is the envoy service's configuration: three limits, loose
// enough that nearly every decision of a round is allowed, as nearly every
// guardian check is.
const envoyConfig = `domain: ` + envoyDomain + `
descriptors:
  - key: account
    rate_limit:
      unit: minute
      requests_per_unit: 5
    descriptors:
      - key: ip
        rate_limit:
          unit: day
          requests_per_unit: 100
  - key: ip
    rate_limit:
      unit: hour
      requests_per_unit: 30
`

// threeLimitRules are guardian's rules for the same three limits as
// envoyConfig: every attempt counts (as every envoy request does), on the
// account, the address and the account with the address, with envoy's
// numbers and each burst its limit.
const threeLimitRules = `version: 1
rules:
  - {name: peer-account, flows: [login], key: account, type: rate, count: attempts, limit: 5, per: 1m, burst: 5, action: slow}
  - {name: peer-ip, flows: [login], key: ip, type: rate, count: attempts, limit: 30, per: 1h, burst: 30, action: slow, ipv4_prefix: 32}
  - {name: peer-account-ip, flows: [login], key: account+ip, type: rate, count: attempts, limit: 100, per: 24h, burst: 100, action: slow}
`

// peerSide is one of the services under comparison.
type peerSide uint8

const (
	sideGuardian peerSide = iota
	sideEnvoy
	sideThree
	// peerSides is how many there are.
	peerSides
)

func (s peerSide) String() string {
	switch s {
	case sideGuardian:
		return "guardian"
	case sideThree:
		return "guardian, three limits"
	}
	return "envoy ratelimit"
}

// peerTraffic is what a peer phase sends: one decision of a random identity
// out of keys, to path, in the service's own request format.
type peerTraffic struct {
	side peerSide
	path string
	keys uint64
	tag  string
}

// body appends the request of identity i to b.
func (p *peerTraffic) body(i uint64, b []byte) []byte {
	if p.side != sideEnvoy {
		b = append(b, `{"flow":"login","account":"`...)
		b = p.account(i, b)
		b = append(b, `","ip":"`...)
		b = appendPeerIP(b, i)
		return append(b, `"}`...)
	}
	b = append(b, `{"domain":"`+envoyDomain+`","descriptors":[{"entries":[{"key":"account","value":"`...)
	b = p.account(i, b)
	b = append(b, `"}]},{"entries":[{"key":"ip","value":"`...)
	b = appendPeerIP(b, i)
	b = append(b, `"}]},{"entries":[{"key":"account","value":"`...)
	b = p.account(i, b)
	b = append(b, `"},{"key":"ip","value":"`...)
	b = appendPeerIP(b, i)
	return append(b, `"}]}]}`...)
}

// account appends identity i's account name.
func (p *peerTraffic) account(i uint64, b []byte) []byte {
	b = append(b, "peer-"...)
	b = strconv.AppendUint(b, i, 10)
	b = append(b, '-')
	b = append(b, p.tag...)
	return append(b, "@example.com"...)
}

// appendPeerIP appends identity i's address: one IPv4 /24 prefix per
// identity (10.0.0.0 upwards), so that guardian's per-prefix rule sees as
// many distinct keys as the envoy service's per-address one.
func appendPeerIP(b []byte, i uint64) []byte {
	b = strconv.AppendUint(b, 10+i>>16&0xff, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, i>>8&0xff, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, i&0xff, 10)
	return append(b, ".7"...)
}

// pick is the identity of the next decision.
func (p *peerTraffic) pick(rng *rand.Rand) uint64 { return rng.Uint64N(p.keys) }

// peerService is one side's running service: its process and its Redis.
type peerService struct {
	side  peerSide
	pid   func() int
	redis *redis.Client
	d     *driver
}

// cpu is the service process's CPU seconds so far.
func (s *peerService) cpu() (float64, error) { return procCPU(s.pid()) }

// benchPeer runs the comparison and returns its figures.
func benchPeer(ctx context.Context, cfg *config, log io.Writer) (*peerResult, error) {
	if cfg.peerBin == "" {
		return nil, errNoPeer
	}
	if _, err := os.Stat(cfg.peerBin); err != nil {
		return nil, fmt.Errorf("--peer: %w", err)
	}
	keyText, keyBytes, token, err := runKey()
	if err != nil {
		return nil, err
	}
	tag := keyText[:8]

	var cleanup []func()
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	startOne := func() (*redisServer, *redis.Client, error) {
		rs, err := startRedis(ctx, cfg.redisBin, 10*time.Second)
		if err != nil {
			return nil, nil, err
		}
		cleanup = append(cleanup, rs.stop)
		rc := redis.NewClient(&redis.Options{Addr: rs.addr})
		cleanup = append(cleanup, func() { _ = rc.Close() })
		return rs, rc, nil
	}

	// guardian twice, each on a Redis of its own: the built-in rules, and
	// envoy's three limits.
	dir, err := os.MkdirTemp("", "guardian-peer-rules-")
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { _ = os.RemoveAll(dir) })
	threePath := filepath.Join(dir, "three-limits.yaml")
	if err := os.WriteFile(threePath, []byte(threeLimitRules), 0o600); err != nil {
		return nil, err
	}
	startG := func(rulesPath string) (*guardianProc, *redis.Client, error) {
		rs, rc, err := startOne()
		if err != nil {
			return nil, nil, err
		}
		g, err := startGuardian(ctx, guardianOptions{bin: cfg.guardianBin, redisURL: rs.url(), rulesPath: rulesPath, storeTimeout: cfg.storeTimeout, key: keyText}, 15*time.Second)
		if err != nil {
			return nil, nil, err
		}
		cleanup = append(cleanup, g.stop)
		return g, rc, nil
	}
	g, grc, err := startG("")
	if err != nil {
		return nil, err
	}
	g3, g3rc, err := startG(threePath)
	if err != nil {
		return nil, err
	}

	// The envoy service, on another.
	ers, erc, err := startOne()
	if err != nil {
		return nil, err
	}
	e, err := startEnvoy(ctx, cfg.peerBin, ers.addr, 15*time.Second)
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, e.stop)

	// The floor script, on a third.
	_, frc, err := startOne()
	if err != nil {
		return nil, err
	}

	seed := uint64(keyBytes[0])<<8 | uint64(keyBytes[1])
	guardianSide := func(side peerSide, g *guardianProc, rc *redis.Client) *peerService {
		return &peerService{side: side, pid: func() int { return g.cmd.Process.Pid }, redis: rc,
			d: &driver{addr: g.addr, token: token, timeout: cfg.timeout, seed: seed,
				peer: &peerTraffic{side: side, path: "/v1/check", keys: cfg.peerKeys, tag: tag}}}
	}
	sides := [peerSides]*peerService{
		sideGuardian: guardianSide(sideGuardian, g, grc),
		sideEnvoy: {side: sideEnvoy, pid: func() int { return e.cmd.Process.Pid }, redis: erc,
			d: &driver{addr: e.addr, timeout: cfg.timeout, seed: seed,
				peer: &peerTraffic{side: sideEnvoy, path: "/json", keys: cfg.peerKeys, tag: tag}}},
		sideThree: guardianSide(sideThree, g3, g3rc),
	}
	res := &peerResult{Keys: cfg.peerKeys, Conns: cfg.peerConns, Rate: cfg.rate, Seconds: cfg.duration.Seconds(), Binary: cfg.peerBin}
	if v, err := grc.Info(ctx, "server").Result(); err == nil {
		if st, err := parseServerVersion(v); err == nil {
			res.RedisVersion = st
		}
	}
	for round := range cfg.peerRounds {
		var pr peerRound
		for i := range sides {
			s := sides[(i+round)%len(sides)]
			f, err := peerPhases(ctx, cfg, s, log, round)
			if err != nil {
				return nil, err
			}
			pr.Sides[s.side] = f
		}
		res.Rounds = append(res.Rounds, pr)
		var x extraRound
		for _, run := range floorRuns(&pr) {
			fmt.Fprintf(log, "load: peer round %d, floor of the %s, %d decision(s) a call…\n", round+1, run.floor.Name, run.group)
			f, err := runFloor(ctx, frc, run.floor, cfg.peerConns, run.group, cfg.peerKeys, cfg.duration, seed+uint64(round))
			if err != nil {
				return nil, err
			}
			x.Floor = append(x.Floor, f)
		}
		for i, report := range []bool{false, true} {
			fmt.Fprintf(log, "load: peer round %d, guardian, credential stuffing (reported: %v)…\n", round+1, report)
			if x.Stuffing[i], err = runStuffing(ctx, cfg, sides[sideGuardian], report); err != nil {
				return nil, err
			}
		}
		res.Extra = append(res.Extra, x)
	}
	res.Rows = peerTable(res.Rounds)
	return res, nil
}

// errNoPeer is what peer mode says without the envoy service's binary.
var errNoPeer = errors.New("peer mode needs an envoy ratelimit binary: set ENVOY_RATELIMIT_BIN=/path/to/ratelimit (make bench-peer) or pass --peer; docs/performance.md says how the compared one was built")

// parseServerVersion reads redis_version from INFO server.
func parseServerVersion(info string) (string, error) {
	st, err := parseInfo(info + "\nused_memory:0\nused_cpu_user:0\nused_cpu_sys:0\n")
	if err != nil {
		return "", err
	}
	return st.version, nil
}

// peerPhases runs one side's closed-loop and open phases of a round.
func peerPhases(ctx context.Context, cfg *config, s *peerService, log io.Writer, round int) (peerFigures, error) {
	var f peerFigures
	for _, open := range []bool{false, true} {
		l := load{traffic: peerChecks, conns: cfg.peerConns, duration: cfg.duration}
		if open {
			l.rate, l.conns = cfg.rate, cfg.openConns
		}
		fmt.Fprintf(log, "load: peer round %d, %s (%s)…\n", round+1, s.side, describe(l))
		if cfg.warmup > 0 {
			w := l
			w.duration = cfg.warmup
			s.d.run(w)
		}
		if ctx.Err() != nil {
			return f, ctx.Err()
		}
		cpu0, err := s.cpu()
		if err != nil {
			return f, err
		}
		r0, err := readRedisStats(ctx, s.redis)
		if err != nil {
			return f, err
		}
		t, elapsed := s.d.run(l)
		cpu1, err := s.cpu()
		if err != nil {
			return f, err
		}
		r1, err := readRedisStats(ctx, s.redis)
		if err != nil {
			return f, err
		}
		ph := peerPhase{
			Decisions:  t.checks,
			Seconds:    elapsed.Seconds(),
			Errors:     t.errors,
			FirstError: t.firstErr,
			Degraded:   t.degraded,
			Denied:     t.decisions["slow"] + t.decisions["block"] + t.decisions["over_limit"],
			P50:        ms(t.check.Quantile(0.5)),
			P99:        ms(t.check.Quantile(0.99)),
			ServiceCPU: cpu1 - cpu0,
			RedisCPU:   r1.cpu - r0.cpu,
			Commands:   commandCalls(r0, r1),
			Scripts:    scriptCalls(r0, r1),
		}
		if open {
			f.Open = ph
		} else {
			f.Closed = ph
		}
	}
	return f, nil
}

// envoyProc is the envoy ratelimit service under comparison.
type envoyProc struct {
	cmd  *exec.Cmd
	addr string
	dir  string
}

// startEnvoy runs the envoy ratelimit binary bin on free ports of 127.0.0.1
// against the Redis at redisAddr, with envoyConfig, and waits until its
// health check answers. Every setting it reads is given here, in a fresh
// environment: its statistics go to no sink (they are neither sent nor
// served), it listens on loopback alone, and talks to that Redis alone.
func startEnvoy(ctx context.Context, bin, redisAddr string, timeout time.Duration) (*envoyProc, error) {
	dir, err := os.MkdirTemp("", "guardian-peer-")
	if err != nil {
		return nil, err
	}
	cfgDir := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "peer.yaml"), []byte(envoyConfig), 0o644); err != nil {
		return nil, err
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = []string{
		"HOST=127.0.0.1", "PORT=" + strconv.Itoa(ports[0]),
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + strconv.Itoa(ports[1]),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + strconv.Itoa(ports[2]),
		"USE_STATSD=false", "USE_DOG_STATSD=false", "USE_PROMETHEUS=false", "DISABLE_STATS=true",
		"TRACING_ENABLED=false",
		"LOG_LEVEL=warn",
		"BACKEND_TYPE=redis", "REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=SINGLE", "REDIS_URL=" + redisAddr,
		"RUNTIME_ROOT=" + filepath.Join(dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit",
		"RUNTIME_WATCH_ROOT=false", "RUNTIME_IGNOREDOTFILES=true",
		"HOME=" + dir,
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	e := &envoyProc{cmd: cmd, addr: addr, dir: dir}
	deadline := time.Now().Add(timeout)
	for {
		cn := newConn(addr, "", time.Second)
		status, _, err := cn.do("GET", "/healthcheck", nil)
		cn.close()
		if err == nil && status == http.StatusOK {
			return e, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			e.stop()
			return nil, fmt.Errorf("envoy ratelimit %s did not serve within %s", bin, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the service and removes its configuration.
func (e *envoyProc) stop() {
	if e.cmd.Process != nil {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = e.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = e.cmd.Process.Kill()
			<-done
		}
	}
	_ = os.RemoveAll(e.dir)
}
