package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is a redis-server process this run started, on a free port of
// 127.0.0.1, with persistence off: a Redis that holds nothing but the run's
// own keys, so its memory and command counts are the run's alone.
type redisServer struct {
	cmd  *exec.Cmd
	addr string
}

// startRedis starts bin (redis-server) on a free port of 127.0.0.1 and waits
// until it answers PING, for at most timeout.
func startRedis(ctx context.Context, bin string, timeout time.Duration) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(bin,
		"--bind", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--loglevel", "warning",
	)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w (install the redis-server package, or pass --redis-url)", bin, err)
	}
	rs := &redisServer{cmd: cmd, addr: addr}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		err := c.Ping(pctx).Err()
		cancel()
		if err == nil {
			return rs, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			rs.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer within %s: %w", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// url is the server's address as --redis-url takes it.
func (rs *redisServer) url() string { return "redis://" + rs.addr + "/0" }

// stop ends the server.
func (rs *redisServer) stop() {
	if rs.cmd.Process != nil {
		_ = rs.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = rs.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = rs.cmd.Process.Kill()
			<-done
		}
	}
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// redisStats is what Redis says about itself at one moment, from INFO and
// DBSIZE.
type redisStats struct {
	// calls counts calls per command name since the server started
	// (INFO commandstats), commands run inside scripts included; usec is
	// the time Redis spent in them, in microseconds.
	calls, usec map[string]int64
	// usedMemory is INFO memory used_memory, in bytes.
	usedMemory int64
	// cpu is INFO cpu used_cpu_user + used_cpu_sys, in seconds.
	cpu float64
	// keys is DBSIZE of the database the client uses.
	keys int64
	// version is INFO server redis_version.
	version string
}

// readRedisStats asks c for its statistics.
func readRedisStats(ctx context.Context, c *redis.Client) (redisStats, error) {
	info, err := c.Info(ctx, "server", "memory", "cpu", "commandstats").Result()
	if err != nil {
		return redisStats{}, fmt.Errorf("redis INFO: %w", err)
	}
	st, err := parseInfo(info)
	if err != nil {
		return redisStats{}, err
	}
	if st.keys, err = c.DBSize(ctx).Result(); err != nil {
		return redisStats{}, fmt.Errorf("redis DBSIZE: %w", err)
	}
	return st, nil
}

// errInfo reports an INFO reply without a field the run needs.
var errInfo = errors.New("redis INFO: unexpected reply")

// parseInfo reads the fields redisStats needs from an INFO reply.
func parseInfo(info string) (redisStats, error) {
	st := redisStats{calls: map[string]int64{}, usec: map[string]int64{}}
	var haveMem, haveUser, haveSys bool
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, value, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		switch {
		case name == "redis_version":
			st.version = value
		case name == "used_memory":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return st, fmt.Errorf("%w: used_memory %q", errInfo, value)
			}
			st.usedMemory, haveMem = n, true
		case name == "used_cpu_user", name == "used_cpu_sys":
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return st, fmt.Errorf("%w: %s %q", errInfo, name, value)
			}
			st.cpu += f
			haveUser = haveUser || name == "used_cpu_user"
			haveSys = haveSys || name == "used_cpu_sys"
		case strings.HasPrefix(name, "cmdstat_"):
			// cmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,...
			cmd := strings.TrimPrefix(name, "cmdstat_")
			var haveCalls, haveUsec bool
			for field := range strings.SplitSeq(value, ",") {
				k, v, _ := strings.Cut(field, "=")
				if k != "calls" && k != "usec" {
					continue
				}
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return st, fmt.Errorf("%w: %s", errInfo, line)
				}
				if k == "calls" {
					st.calls[cmd], haveCalls = n, true
				} else {
					st.usec[cmd], haveUsec = n, true
				}
			}
			if !haveCalls || !haveUsec {
				return st, fmt.Errorf("%w: %s", errInfo, line)
			}
		}
	}
	if !haveMem || !haveUser || !haveSys {
		return st, fmt.Errorf("%w: no used_memory or used_cpu_user/used_cpu_sys", errInfo)
	}
	return st, nil
}

// scriptCommands are the commands that run guardian's scripts: EVALSHA,
// EVAL, and FCALL for the do script's function library.
var scriptCommands = []string{"evalsha", "eval", "fcall"}

// scriptCalls is how many script calls Redis ran between a and b.
func scriptCalls(a, b redisStats) int64 {
	var n int64
	for _, c := range scriptCommands {
		n += b.calls[c] - a.calls[c]
	}
	return n
}

// scriptMicros is the mean time Redis spent in one script call between a
// and b, in microseconds, the commands the scripts ran included: the part of
// Redis's CPU that the scripts themselves decide.
func scriptMicros(a, b redisStats) float64 {
	n := scriptCalls(a, b)
	if n == 0 {
		return 0
	}
	var us int64
	for _, c := range scriptCommands {
		us += b.usec[c] - a.usec[c]
	}
	return float64(us) / float64(n)
}

// commandCalls is how many commands Redis ran between a and b, those run
// inside scripts included, leaving out the INFO and DBSIZE calls of the
// measurement itself.
func commandCalls(a, b redisStats) int64 {
	var n int64
	for _, d := range commandDeltas(a, b) {
		n += d
	}
	return n
}

// commandDeltas is how many calls of each command Redis ran between a and
// b, without the measurement's own.
func commandDeltas(a, b redisStats) map[string]int64 {
	out := map[string]int64{}
	for name, v := range b.calls {
		switch name {
		case "info", "dbsize", "memory|usage", "scan", "ping":
			continue
		}
		if d := v - a.calls[name]; d != 0 {
			out[name] = d
		}
	}
	return out
}
