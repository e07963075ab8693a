package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The proxy phase: guardian's gateway (serve --proxy) in front of a
// trivial upstream, against the same upstream direct, both at one open
// arrival rate. What it reports is what gateway mode adds to a login: the
// latency of a request through the proxy minus the latency direct, and
// guardian's CPU per proxied request beside the upstream's own.

// upstreamCommand is the hidden first argument that makes this program
// serve the proxy phase's upstream: a process of its own, so that its CPU
// time is the upstream's alone.
const upstreamCommand = "serve-upstream"

// proxyUsers is how many accounts the proxy phase logs in as, in turn.
const proxyUsers = 100_000

// serveUpstream answers every request 200 with a small body, as a login
// that succeeds does, on a free port of 127.0.0.1. It prints "addr
// HOST:PORT" once it serves and exits when its stdin closes or on SIGTERM.
func serveUpstream() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "upstream:", err)
		return 1
	}
	body := []byte(`{"ok":true}`)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("addr %s\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	<-ctx.Done()
	_ = srv.Close()
	return 0
}

// upstreamProc is the running upstream.
type upstreamProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

// startUpstream starts the upstream and waits until it serves.
func startUpstream() (*upstreamProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, upstreamCommand)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	u := &upstreamProc{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "addr ")
	if err != nil || !ok {
		u.stop()
		return nil, errors.New("the upstream did not start")
	}
	u.addr = addr
	return u, nil
}

func (u *upstreamProc) stop() {
	_ = u.stdin.Close()
	_ = u.cmd.Process.Signal(syscall.SIGTERM)
	_ = u.cmd.Wait()
}

// writeProxyFile writes the proxy file of the phase into dir: one proxy on
// a free port in front of upstream, its route checking every request with
// basic auth as a login, 200 a success. The load generator is a trusted
// proxy: each account logs in from an address of its own, which it names
// in X-Forwarded-For, as a load balancer in front of guardian would.
func writeProxyFile(dir, upstream string) (path, listen string, err error) {
	port, err := freePort()
	if err != nil {
		return "", "", err
	}
	listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	yaml := fmt.Sprintf(`version: 1
proxies:
  - listen: %s
    upstream: http://%s
    trusted_proxies: [127.0.0.1]
    routes:
      - name: login
        match: {path: /login}
        flow: login
        account: {basic_auth: user}
        secret: {basic_auth: password}
        outcome:
          failure: [{status: [401]}]
          success: [{status: [200]}]
`, listen, upstream)
	path = filepath.Join(dir, "proxy.yaml")
	return path, listen, os.WriteFile(path, []byte(yaml), 0o600)
}

// proxyRun is one side of the comparison.
type proxyRun struct {
	Target      string  `json:"target"`
	Requests    int64   `json:"requests"`
	PerSec      float64 `json:"per_sec"`
	Errors      int64   `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	Latency     latency `json:"latency"`
	GuardianCPU float64 `json:"guardian_cpu_us_per_request"`
	UpstreamCPU float64 `json:"upstream_cpu_us_per_request"`
}

// proxyResult is the proxy phase's figures.
type proxyResult struct {
	Rate     float64  `json:"rate"`
	Conns    int      `json:"conns"`
	Direct   proxyRun `json:"direct"`
	Proxied  proxyRun `json:"proxied"`
	AddedP50 float64  `json:"added_p50_ms"`
	AddedP99 float64  `json:"added_p99_ms"`
	// CPURatio is guardian's CPU per proxied request over the upstream's
	// own per request.
	CPURatio float64 `json:"cpu_ratio"`
}

// proxyPhase measures the upstream direct, then through the proxy at
// listen, each at cfg.proxyRate after a warmup.
func proxyPhase(ctx context.Context, cfg *config, g *guardianProc, up *upstreamProc, listen string) (*proxyResult, error) {
	res := &proxyResult{Rate: cfg.proxyRate, Conns: cfg.openConns}
	var users atomic.Int64
	for _, side := range []struct {
		name, addr string
		dst        *proxyRun
	}{{"direct", up.addr, &res.Direct}, {"proxied", listen, &res.Proxied}} {
		fmt.Fprintf(os.Stderr, "load: phase proxy, %s (open model, %.0f/s, up to %d connections, %s)…\n", side.name, cfg.proxyRate, cfg.openConns, cfg.duration)
		if cfg.warmup > 0 {
			openLogins(side.addr, cfg.proxyRate, cfg.openConns, cfg.warmup, cfg.timeout, &users)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		gBefore, err := g.cpuSeconds()
		if err != nil {
			return nil, err
		}
		uBefore, err := procCPU(up.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		var profErr chan error
		if side.name == "proxied" && cfg.pprofPhase == "proxy" && cfg.pprofDir != "" && g.pprofAddr != "" {
			profErr = make(chan error, 1)
			go func() { profErr <- profile(ctx, g.pprofAddr, cfg.duration, cfg.pprofDir) }()
		}
		h, n, errs, first, elapsed := openLogins(side.addr, cfg.proxyRate, cfg.openConns, cfg.duration, cfg.timeout, &users)
		gAfter, _ := g.cpuSeconds()
		uAfter, _ := procCPU(up.cmd.Process.Pid)
		if profErr != nil {
			if err := <-profErr; err != nil {
				return nil, fmt.Errorf("--pprof: %w", err)
			}
		}
		*side.dst = proxyRun{Target: side.addr, Requests: n, PerSec: float64(n) / elapsed.Seconds(), Errors: errs, FirstError: first, Latency: summary(h)}
		if n > 0 {
			side.dst.GuardianCPU = (gAfter - gBefore) / float64(n) * 1e6
			side.dst.UpstreamCPU = (uAfter - uBefore) / float64(n) * 1e6
		}
	}
	res.AddedP50 = res.Proxied.Latency.P50 - res.Direct.Latency.P50
	res.AddedP99 = res.Proxied.Latency.P99 - res.Direct.Latency.P99
	if res.Proxied.UpstreamCPU > 0 {
		res.CPURatio = res.Proxied.GuardianCPU / res.Proxied.UpstreamCPU
	}
	return res, nil
}

// openLogins sends GET /login with basic auth of a new account each, at
// rate for d over conns keep-alive connections (open model: latency runs
// from when a request was due), and returns the latency histogram, the
// requests sent, those that failed (not 200) and the first failure.
func openLogins(addr string, rate float64, conns int, d, timeout time.Duration, users *atomic.Int64) (*Histogram, int64, int64, string, time.Duration) {
	interval := time.Duration(float64(time.Second) / rate)
	n := int64(d / interval)
	var next, errs atomic.Int64
	var mu sync.Mutex
	total := &Histogram{}
	first := ""
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Go(func() {
			cn := newConn(addr, "", timeout)
			defer cn.close()
			h := &Histogram{}
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				at := start.Add(time.Duration(i) * interval)
				sleepUntil(at)
				u := users.Add(1) % proxyUsers
				cn.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte("user"+strconv.FormatInt(u, 10)+"@load.example:pw-"+strconv.FormatInt(u, 10)))
				// An IPv6 /48 of its own (two accounts share one at most),
				// apart from the other phases' 10/8: the built-in rules
				// challenge a network in which more than 20 accounts failed
				// or went unreported.
				cn.extra = fmt.Sprintf("X-Forwarded-For: 2001:db8:%x:%x::1\r\n", u&0xffff, u>>16)
				status, _, err := cn.do("GET", "/login", nil)
				h.Record(time.Since(at))
				if err != nil || status != http.StatusOK {
					errs.Add(1)
					mu.Lock()
					if first == "" {
						first = fmt.Sprintf("status %d, %v", status, err)
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			total.Merge(h)
			mu.Unlock()
		})
	}
	wg.Wait()
	return total, n, errs.Load(), first, time.Since(start)
}

// proxyTarget judges the proxy phase against the targets.
func (r *result) proxyTargets() {
	p := r.Proxy
	if p == nil {
		return
	}
	held := p.Proxied.PerSec >= 0.97*p.Rate && p.Proxied.Errors == 0
	r.Targets = append(r.Targets,
		targetResult{
			Name: fmt.Sprintf("gateway: p99 added to a login at %.0f/s, loopback", p.Rate),
			Want: "≤ 1 ms, rate held, no errors",
			Got: fmt.Sprintf("%.3f ms (p99 %.3f ms through guardian, %.3f ms direct; p50 +%.3f ms) at %.0f/s, %d errors",
				p.AddedP99, p.Proxied.Latency.P99, p.Direct.Latency.P99, p.AddedP50, p.Proxied.PerSec, p.Proxied.Errors),
			Met: p.AddedP99 <= 1 && held,
		},
		targetResult{
			Name: "gateway: guardian CPU per proxied request ÷ the upstream's own",
			Want: "≤ 2",
			Got:  fmt.Sprintf("%.2f (%.0f µs ÷ %.0f µs; the check, the report and the proxying, with Redis)", p.CPURatio, p.Proxied.GuardianCPU, p.Proxied.UpstreamCPU),
			Met:  p.CPURatio > 0 && p.CPURatio <= 2,
		})
}
