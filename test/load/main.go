// Command load is guardian's load benchmark (make bench-load): it starts a
// Redis and a guardian of its own on 127.0.0.1, drives /v1/check and
// /v1/report over keep-alive connections with a realistic mix of users,
// attackers and OTP sends, and prints what a team deciding whether to put
// guardian in front of every login needs to know: checks per second,
// latency percentiles from an HDR-style histogram, errors, Redis script
// calls and commands per check, Redis memory per tracked key, guardian CPU
// per 1,000 checks, allocations per check, and the same load against
// /healthz as the bare-HTTP ceiling of the machine.
//
// Phases, each bounded in time (and the memory phase in count):
//
//	healthz       GET /healthz at maximum throughput: the ceiling
//	max           the mix's checks at maximum throughput, none reported
//	open-healthz  GET /healthz at the open phase's rate: the latency floor
//	open-store    a login batch straight to Redis through guardian's store
//	              code, at the open phase's rate: the store's floor
//	open          the mix at a fixed arrival rate (open model), checks reported
//	mix           the mix at maximum throughput, checks reported
//	memory        checks of distinct new users, to measure Redis bytes per key
//	proxy         GET /login with basic auth at --proxy-rate through guardian's
//	              gateway (serve --proxy) in front of a trivial upstream, and
//	              to the upstream direct: the latency gateway mode adds and
//	              guardian's CPU per request beside the upstream's
//
// Latency in the open model runs from when a check was due, not from when
// it was sent, so a stall shows in every check it delays (no coordinated
// omission). Run with -h for the flags; --json prints one JSON document.
//
// Load only ever goes to 127.0.0.1.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
	"github.com/guardian-sec/guardian/internal/tokens"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == childCommand {
		os.Exit(serveChild(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == upstreamCommand {
		os.Exit(serveUpstream())
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is the command line.
type config struct {
	duration, warmup   time.Duration
	rate, proxyRate    float64
	conns, openConns   int
	phases             []string
	memoryChecks       int64
	redisURL, redisBin string
	// redisFiles are the TLS files of a rediss:// --redis-url, passed on
	// to guardian.
	redisFiles       redisstore.Options
	guardianBin      string
	rulesPath        string
	storeTimeout     time.Duration
	timeout          time.Duration
	pprofDir         string
	pprofPhase       string
	micro            bool
	benchtime, goBin string
	json             bool
	mix              *mix
	// peerBin, when set, runs the peer comparison instead of the phases.
	peerBin    string
	peerKeys   uint64
	peerConns  int
	peerRounds int
}

// allPhases are the phases in the order they run, whatever the order of
// --phases. The proxy phase runs first, before any phase has failed or left
// checks unreported: its logins all succeed, and it measures them, not the
// global failure-rate challenge the attack mix of the others sets off.
// Memory runs next, while Redis holds little but its own keys, so that its
// figure is the cost of keys from few to --memory-checks×3 and does not
// depend on what the other phases left behind.
var allPhases = []string{"proxy", "memory", "healthz", "max", "open-healthz", "open-store", "open", "mix"}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{mix: &mix{}}
	fs := flag.NewFlagSet("load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "how long each phase runs")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured load before each phase (connections, scripts, caches)")
	fs.Float64Var(&c.rate, "rate", 2000, "arrival rate of the open phase, checks per second")
	fs.Float64Var(&c.proxyRate, "proxy-rate", 1000, "arrival rate of the proxy phase (guardian's gateway in front of a trivial upstream, and the upstream direct), requests per second")
	fs.IntVar(&c.conns, "conns", 8, "keep-alive connections at maximum throughput")
	fs.IntVar(&c.openConns, "open-conns", 64, "keep-alive connections of the open phase: at most this many checks in flight")
	phases := fs.String("phases", strings.Join(allPhases, ","), "phases to run, of "+strings.Join(allPhases, ","))
	fs.Int64Var(&c.memoryChecks, "memory-checks", 50_000, "checks of distinct new users in the memory phase (three keys each under the built-in rules)")
	fs.StringVar(&c.redisURL, "redis-url", "", "use this Redis (redis://127.0.0.1:PORT/DB) instead of starting one; it should hold nothing else, or memory figures include other traffic")
	fs.StringVar(&c.redisFiles.CAFile, "redis-ca-file", "", "with a rediss:// --redis-url: guardian's --redis-ca-file")
	fs.StringVar(&c.redisFiles.CertFile, "redis-cert-file", "", "with a rediss:// --redis-url: guardian's --redis-cert-file")
	fs.StringVar(&c.redisFiles.KeyFile, "redis-key-file", "", "with a rediss:// --redis-url: guardian's --redis-key-file")
	fs.StringVar(&c.redisBin, "redis-server", "redis-server", "redis-server binary to start when --redis-url is empty")
	fs.StringVar(&c.guardianBin, "guardian-bin", "", "run this guardian binary (make build: bin/guardian); empty: guardian from this source tree, in a process of its own")
	fs.StringVar(&c.rulesPath, "rules", "", "rules file for guardian; empty: the built-in rules")
	fs.DurationVar(&c.storeTimeout, "store-timeout", 5*time.Millisecond, "guardian's --store-timeout")
	fs.DurationVar(&c.timeout, "timeout", 2*time.Second, "deadline of one request; a later answer is an error")
	fs.StringVar(&c.pprofDir, "pprof", "", "write guardian's CPU and allocation profiles over one phase (--pprof-phase) into this directory (source-tree guardian only)")
	fs.StringVar(&c.pprofPhase, "pprof-phase", "max", "the phase --pprof profiles (proxy: its proxied side)")
	fs.BoolVar(&c.micro, "micro", true, "also run the Go benchmarks behind the allocation figures (needs the go command and the guardian module as working directory)")
	fs.StringVar(&c.benchtime, "benchtime", "1s", "-benchtime of the Go benchmarks")
	fs.StringVar(&c.goBin, "go", "go", "the go command")
	fs.BoolVar(&c.json, "json", false, "print one JSON document instead of the table")
	fs.Float64Var(&c.mix.AttackShare, "attack-share", 0.10, "share of logins that are attackers'")
	fs.Float64Var(&c.mix.OTPShare, "otp-share", 0.05, "share of attempts that are OTP sends")
	fs.IntVar(&c.mix.AttackAccounts, "attack-accounts", 50, "accounts the attackers guess against")
	fs.IntVar(&c.mix.AttackPrefixes, "attack-prefixes", 8, "IPv4 /24 prefixes the attackers come from")
	peer := fs.Bool("peer", false, "compare guardian with the envoy ratelimit service given by --peer-bin (make bench-peer) instead of running the phases")
	fs.StringVar(&c.peerBin, "peer-bin", os.Getenv("ENVOY_RATELIMIT_BIN"), "the envoy ratelimit binary of --peer (default $ENVOY_RATELIMIT_BIN)")
	fs.Uint64Var(&c.peerKeys, "peer-keys", 200_000, "distinct identities of --peer (three keys each)")
	fs.IntVar(&c.peerConns, "peer-conns", 16, "keep-alive connections of --peer's closed-loop phases")
	fs.IntVar(&c.peerRounds, "peer-rounds", 2, "interleaved rounds of --peer")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if !*peer {
		c.peerBin = ""
	} else if c.peerBin == "" {
		return c, errNoPeer
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	asked := map[string]bool{}
	for p := range strings.SplitSeq(*phases, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !contains(allPhases, p) {
			return c, fmt.Errorf("--phases: unknown phase %q", p)
		}
		asked[p] = true
	}
	for _, p := range allPhases {
		if asked[p] {
			c.phases = append(c.phases, p)
		}
	}
	// The memory and proxy phases measure what they measure their own way,
	// without a profile.
	if profiled := append([]string{"proxy"}, allPhases[2:]...); !contains(profiled, c.pprofPhase) {
		return c, fmt.Errorf("--pprof-phase: %q is not one of %s", c.pprofPhase, strings.Join(profiled, ", "))
	}
	switch {
	case c.duration <= 0 || c.duration > time.Hour:
		return c, errors.New("--duration must be in (0, 1h]")
	case c.warmup < 0 || c.warmup > 10*time.Minute:
		return c, errors.New("--warmup must be in [0, 10m]")
	case c.rate <= 0 || c.rate > 1e6:
		return c, errors.New("--rate must be in (0, 1e6]")
	case c.conns < 1 || c.conns > 4096 || c.openConns < 1 || c.openConns > 4096:
		return c, errors.New("--conns and --open-conns must be in [1, 4096]")
	case c.memoryChecks < 1 || c.memoryChecks > 10_000_000:
		return c, errors.New("--memory-checks must be in [1, 1e7]")
	case c.mix.AttackShare < 0 || c.mix.AttackShare > 1 || c.mix.OTPShare < 0 || c.mix.OTPShare > 1:
		return c, errors.New("--attack-share and --otp-share must be in [0, 1]")
	case c.peerKeys < 1 || c.peerKeys > 1<<24 || c.peerConns < 1 || c.peerConns > 4096 || c.peerRounds < 1 || c.peerRounds > 100:
		return c, errors.New("--peer-keys must be in [1, 2^24], --peer-conns in [1, 4096], --peer-rounds in [1, 100]")
	case c.mix.AttackAccounts < 1 || c.mix.AttackPrefixes < 1 || c.mix.AttackPrefixes > 256:
		return c, errors.New("--attack-accounts must be positive, --attack-prefixes in [1, 256]")
	}
	if c.redisURL != "" && !loopback(c.redisURL) {
		return c, errors.New("--redis-url must be on 127.0.0.1 or localhost: load is only ever sent to this machine")
	}
	return c, nil
}

// loopback reports whether a redis:// URL points at this machine.
func loopback(u string) bool {
	rest, ok := strings.CutPrefix(u, "redis://")
	if !ok {
		if rest, ok = strings.CutPrefix(u, "rediss://"); !ok {
			return false
		}
	}
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		rest = rest[i+1:]
	}
	return strings.HasPrefix(rest, "127.0.0.1:") || strings.HasPrefix(rest, "localhost:")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "load:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var res any
	var print func()
	if cfg.peerBin != "" {
		r, e := benchPeer(ctx, &cfg, stderr)
		res, err, print = r, e, func() { printPeer(stdout, r) }
	} else {
		r, e := bench(ctx, &cfg, stderr)
		res, err, print = r, e, func() { printText(stdout, r) }
	}
	if err != nil {
		fmt.Fprintln(stderr, "load:", err)
		return 1
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fmt.Fprintln(stderr, "load:", err)
			return 1
		}
		return 0
	}
	print()
	return 0
}

// runKey makes a run's signing key, new each run so that the run's
// identities differ from any earlier run's against the same Redis, as the
// hex text guardian reads, with its bytes and a check token it signed.
func runKey() (keyText string, keyBytes []byte, token string, err error) {
	keyBytes = make([]byte, 32)
	_, _ = rand.Read(keyBytes)
	keyText = hex.EncodeToString(keyBytes)
	key, err := secret.New([]byte(keyText))
	if err != nil {
		return "", nil, "", err
	}
	token, err = tokens.NewService(key).Issue(tokens.ScopeCheck, "load", 24*time.Hour, time.Now())
	return keyText, keyBytes, token, err
}

// bench runs the whole benchmark.
func bench(ctx context.Context, cfg *config, log io.Writer) (*result, error) {
	res := &result{
		CPUs:      runtime.NumCPU(),
		GoVersion: runtime.Version(),
		Rules:     "built-in",
		Guardian:  "source tree, own process",
	}
	if cfg.rulesPath != "" {
		res.Rules = cfg.rulesPath
	}
	if cfg.guardianBin != "" {
		res.Guardian = cfg.guardianBin
	}
	if cfg.micro {
		fmt.Fprintln(log, "load: running the Go benchmarks (engine, GCRA)…")
		mb, err := runMicro(ctx, cfg.goBin, cfg.benchtime)
		if err != nil {
			return nil, err
		}
		res.Micro = mb
	}

	redisURL := cfg.redisURL
	if redisURL == "" {
		rs, err := startRedis(ctx, cfg.redisBin, 10*time.Second)
		if err != nil {
			return nil, err
		}
		defer rs.stop()
		redisURL = rs.url()
	}
	// The run's own clients connect as guardian does, TLS files included.
	uc, err := redisstore.OpenWith(redisURL, cfg.redisFiles)
	if err != nil {
		return nil, fmt.Errorf("--redis-url: %w", err)
	}
	defer uc.Close()
	rc, ok := uc.(*redis.Client)
	if !ok {
		return nil, errors.New("--redis-url: one Redis, not a Cluster or Sentinel")
	}
	ropt := rc.Options()

	keyText, keyBytes, token, err := runKey()
	if err != nil {
		return nil, err
	}
	var up *upstreamProc
	var proxyPath, proxyListen string
	if contains(cfg.phases, "proxy") {
		if up, err = startUpstream(); err != nil {
			return nil, err
		}
		defer up.stop()
		dir, err := os.MkdirTemp("", "guardian-load-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if proxyPath, proxyListen, err = writeProxyFile(dir, up.addr); err != nil {
			return nil, err
		}
	}
	g, err := startGuardian(ctx, guardianOptions{
		proxyPath:    proxyPath,
		bin:          cfg.guardianBin,
		redisURL:     redisURL,
		redisFiles:   cfg.redisFiles,
		rulesPath:    cfg.rulesPath,
		storeTimeout: cfg.storeTimeout,
		pprof:        cfg.pprofDir != "" && cfg.guardianBin == "",
		key:          keyText,
	}, 15*time.Second)
	if err != nil {
		return nil, err
	}
	defer g.stop()

	m := &meter{g: g, rc: rc, httpc: &http.Client{Timeout: 5 * time.Second}}
	first, err := m.snap(ctx)
	if err != nil {
		return nil, err
	}
	res.RedisVersion = first.redis.version
	cfg.mix.Tag = keyText[:8]
	sopt := *ropt
	sopt.PoolSize = max(cfg.conns, cfg.openConns)
	sc := redis.NewClient(&sopt)
	defer sc.Close()
	d := &driver{addr: g.addr, token: token, mix: cfg.mix, timeout: cfg.timeout, seed: uint64(keyBytes[0])<<8 | uint64(keyBytes[1]),
		store: redisstore.New(sc, redisstore.Config{})}

	for _, name := range cfg.phases {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if name == "proxy" {
			m.settle(ctx)
			pr, err := proxyPhase(ctx, cfg, g, up, proxyListen)
			if err != nil {
				return nil, err
			}
			res.Proxy = pr
			if cfg.pprofPhase == "proxy" && cfg.pprofDir != "" && g.pprofAddr != "" {
				res.Profiles, res.ProfiledPhase = cfg.pprofDir, name
			}
			continue
		}
		if name == "memory" {
			mr, err := memoryPhase(ctx, d, m, cfg)
			if err != nil {
				return nil, err
			}
			res.Memory = mr
			continue
		}
		l := phaseLoad(name, cfg)
		fmt.Fprintf(log, "load: phase %s (%s)…\n", name, describe(l))
		if cfg.warmup > 0 {
			w := l
			w.duration = cfg.warmup
			d.run(w)
		}
		m.settle(ctx)
		before, err := m.snap(ctx)
		if err != nil {
			return nil, err
		}
		var profErr chan error
		if name == cfg.pprofPhase && cfg.pprofDir != "" && g.pprofAddr != "" {
			profErr = make(chan error, 1)
			go func() { profErr <- profile(ctx, g.pprofAddr, l.duration, cfg.pprofDir) }()
		}
		t, elapsed := d.run(l)
		after, err := m.snap(ctx)
		if err != nil {
			return nil, err
		}
		if profErr != nil {
			if err := <-profErr; err != nil {
				return nil, fmt.Errorf("--pprof: %w", err)
			}
			res.Profiles = cfg.pprofDir
			res.ProfiledPhase = name
		}
		res.Phases = append(res.Phases, summarise(name, l, t, elapsed, before, after))
	}
	res.evaluate()
	res.proxyTargets()
	return res, nil
}

// phaseLoad is the load of a named phase.
func phaseLoad(name string, cfg *config) load {
	l := load{conns: cfg.conns, duration: cfg.duration}
	switch name {
	case "healthz":
		l.traffic = healthz
	case "max":
		l.traffic = checks
	case "open-healthz":
		l.traffic, l.rate, l.conns = healthz, cfg.rate, cfg.openConns
	case "open-store":
		l.traffic, l.rate, l.conns = storeOnly, cfg.rate, cfg.openConns
	case "open":
		l.traffic, l.rate, l.conns = attempts, cfg.rate, cfg.openConns
	case "mix":
		l.traffic = attempts
	}
	return l
}

// describe says in a few words how l is paced.
func describe(l load) string {
	if l.rate > 0 {
		return fmt.Sprintf("open model, %.0f/s, up to %d connections, %s", l.rate, l.conns, l.duration)
	}
	return fmt.Sprintf("maximum throughput, %d connections, %s", l.conns, l.duration)
}

// memoryPhase sends cfg.memoryChecks checks of distinct new users and
// measures what Redis holds for them.
func memoryPhase(ctx context.Context, d *driver, m *meter, cfg *config) (*memoryResult, error) {
	fmt.Fprintf(os.Stderr, "load: phase memory (%d checks of new users)…\n", cfg.memoryChecks)
	m.settle(ctx)
	before, err := m.snap(ctx)
	if err != nil {
		return nil, err
	}
	keysBefore, _, err := trackedKeys(ctx, m.rc, 0)
	if err != nil {
		return nil, err
	}
	// Two connections: few enough that a check rarely outlasts the store
	// timeout and goes to the fallback, which adds no key to Redis. Bounded
	// in time as well: even a slow machine ends in ten minutes.
	t, elapsed := d.run(load{traffic: newUsers, conns: min(cfg.conns, 2), duration: 10 * time.Minute, limit: cfg.memoryChecks})
	after, err := m.snap(ctx)
	if err != nil {
		return nil, err
	}
	keysAfter, sample, err := trackedKeys(ctx, m.rc, 600)
	if err != nil {
		return nil, err
	}
	mr := &memoryResult{
		Checks:          int64(t.checks),
		Errors:          t.errors,
		Degraded:        t.degraded,
		Seconds:         elapsed.Seconds(),
		Keys:            keysAfter - keysBefore,
		RedisKeys:       after.redis.keys - before.redis.keys,
		UsedMemoryDelta: after.redis.usedMemory - before.redis.usedMemory,
		Sample:          sample,
	}
	if mr.Keys > 0 {
		mr.BytesPerKey = float64(mr.UsedMemoryDelta) / float64(mr.Keys)
	}
	return mr, nil
}
