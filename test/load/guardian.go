package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// childCommand is the hidden first argument that makes this program serve
// guardian instead of driving load: the run starts a copy of itself that
// way, so that guardian has a process of its own, whose CPU time and
// allocations are guardian's alone.
const childCommand = "serve-guardian"

// keyEnv carries the signing key to the guardian process; it is the
// variable guardian itself reads.
const keyEnv = "GUARDIAN_SIGNING_KEY"

// guardianProc is the guardian process under test.
type guardianProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// addr is where guardian serves its API; pprofAddr, when not empty,
	// where it serves net/http/pprof.
	addr, pprofAddr string
}

// guardianOptions says how to start guardian.
type guardianOptions struct {
	// bin, when set, is a guardian binary to run; otherwise this program
	// serves guardian from the source tree it was built from.
	bin          string
	redisURL     string
	redisFiles   redisstore.Options
	rulesPath    string
	storeTimeout time.Duration
	// pprof makes the guardian process serve net/http/pprof on 127.0.0.1
	// (source-tree guardian only).
	pprof bool
	key   string
	// proxyPath, when set, is a proxy file guardian also serves
	// (serve --proxy).
	proxyPath string
}

// startGuardian starts guardian and waits, at most timeout, until it serves.
func startGuardian(ctx context.Context, o guardianOptions, timeout time.Duration) (*guardianProc, error) {
	if o.bin != "" {
		return startBinary(ctx, o, timeout)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := append([]string{childCommand, "--redis-url", o.redisURL, "--store-timeout", o.storeTimeout.String()}, o.redisFileFlags()...)
	if o.rulesPath != "" {
		args = append(args, "--rules", o.rulesPath)
	}
	if o.pprof {
		args = append(args, "--pprof")
	}
	if o.proxyPath != "" {
		args = append(args, "--proxy", o.proxyPath)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), keyEnv+"="+o.key)
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
	g := &guardianProc{cmd: cmd, stdin: stdin}
	// Lines guardian prints once it serves are read, and dropped, until it
	// exits, so that it never blocks on a full pipe.
	lines, started := make(chan string), make(chan struct{})
	defer close(started)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-started:
			}
		}
		close(lines)
		_, _ = io.Copy(io.Discard, out)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for g.addr == "" || (o.pprof && g.pprofAddr == "") {
		select {
		case l, ok := <-lines:
			if !ok {
				g.stop()
				return nil, errors.New("guardian exited before serving")
			}
			if v, ok := strings.CutPrefix(l, "addr "); ok {
				g.addr = v
			}
			if v, ok := strings.CutPrefix(l, "pprof "); ok {
				g.pprofAddr = v
			}
		case <-timer.C:
			g.stop()
			return nil, fmt.Errorf("guardian did not serve within %s", timeout)
		case <-ctx.Done():
			g.stop()
			return nil, ctx.Err()
		}
	}
	return g, nil
}

// redisFileFlags are guardian's flags for o.redisFiles.
func (o guardianOptions) redisFileFlags() []string {
	var args []string
	for _, f := range [][2]string{
		{"--redis-ca-file", o.redisFiles.CAFile},
		{"--redis-cert-file", o.redisFiles.CertFile},
		{"--redis-key-file", o.redisFiles.KeyFile},
	} {
		if f[1] != "" {
			args = append(args, f[0], f[1])
		}
	}
	return args
}

// startBinary runs a guardian binary on a free port of 127.0.0.1.
func startBinary(ctx context.Context, o guardianOptions, timeout time.Duration) (*guardianProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append([]string{"serve", "--addr", addr, "--redis-url", o.redisURL, "--store-timeout", o.storeTimeout.String(), "--log-format", "json"}, o.redisFileFlags()...)
	if o.rulesPath != "" {
		args = append(args, "--rules", o.rulesPath)
	}
	if o.proxyPath != "" {
		args = append(args, "--proxy", o.proxyPath)
	}
	cmd := exec.Command(o.bin, args...)
	cmd.Env = append(os.Environ(), keyEnv+"="+o.key)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	g := &guardianProc{cmd: cmd, addr: addr}
	deadline := time.Now().Add(timeout)
	for {
		cn := newConn(addr, "", time.Second)
		status, _, err := cn.do("GET", "/healthz", nil)
		cn.close()
		if err == nil && status == http.StatusOK {
			return g, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			g.stop()
			return nil, fmt.Errorf("guardian %s did not serve within %s", o.bin, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop asks guardian to drain and exit, and kills it if it has not after a
// few seconds.
func (g *guardianProc) stop() {
	if g.cmd.Process == nil {
		return
	}
	if g.stdin != nil {
		_ = g.stdin.Close()
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = g.cmd.Process.Kill()
		<-done
	}
}

// cpuSeconds is the CPU time (user and system, every thread) the guardian
// process has used so far.
func (g *guardianProc) cpuSeconds() (float64, error) {
	return procCPU(g.cmd.Process.Pid)
}

// clockTicks is the unit of the CPU times in /proc/PID/stat (USER_HZ, 100 on
// every Linux guardian runs on).
const clockTicks = 100

// procCPU reads the user and system CPU time of process pid from
// /proc/PID/stat.
func procCPU(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// parseStat reads utime and stime (fields 14 and 15) from the text of
// /proc/PID/stat, in seconds. The command name, field 2, may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseStat(s string) (float64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, errors.New("/proc stat: too few fields")
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: %w", err)
		}
		ticks += n
	}
	return float64(ticks) / clockTicks, nil
}

// serveChild is the guardian process of a run: guardian from this source
// tree on a free port of 127.0.0.1, configured like `guardian serve` with
// the run's Redis. It prints "addr HOST:PORT" (and "pprof HOST:PORT") on
// stdout once it serves, and drains and exits when its stdin closes or on
// SIGTERM.
func serveChild(args []string) int {
	fs := flag.NewFlagSet(childCommand, flag.ContinueOnError)
	redisURL := fs.String("redis-url", "", "the security store")
	var files redisstore.Options
	fs.StringVar(&files.CAFile, "redis-ca-file", "", "CA of a rediss:// store")
	fs.StringVar(&files.CertFile, "redis-cert-file", "", "client certificate for a rediss:// store")
	fs.StringVar(&files.KeyFile, "redis-key-file", "", "its key")
	rulesPath := fs.String("rules", "", "rules file; empty: the built-in rules")
	storeTimeout := fs.Duration("store-timeout", 5*time.Millisecond, "deadline of one store call")
	withPprof := fs.Bool("pprof", false, "serve net/http/pprof on a free port of 127.0.0.1")
	proxyPath := fs.String("proxy", "", "proxy file (serve --proxy); empty: none")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	key, err := secret.New([]byte(os.Getenv(keyEnv)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "guardian:", err)
		return 2
	}
	srv, err := server.New(server.Config{
		Addr:         "127.0.0.1:0",
		RulesPath:    *rulesPath,
		RedisURL:     *redisURL,
		Redis:        files,
		SigningKey:   key,
		StoreTimeout: *storeTimeout,
		ProxyPath:    *proxyPath,
		// guardian logs nothing per request at info level; warnings and
		// errors still show on the run's stderr.
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "guardian:", err)
		return 1
	}
	if err := srv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "guardian:", err)
		return 1
	}
	if *withPprof {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, "guardian: pprof:", err)
			return 1
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		go func() { _ = http.Serve(ln, mux) }()
		fmt.Printf("pprof %s\n", ln.Addr())
	}
	fmt.Printf("addr %s\n", srv.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintln(os.Stderr, "guardian:", err)
		return 1
	}
	return 0
}
