// Package redistest starts real Redis servers for guardian's tests: a Redis
// in a container (testcontainers-go) that a test can stop, restart and
// pause, and a three-node Redis Cluster of local redis-server processes.
//
// The container image is $GUARDIAN_REDIS_IMAGE, by default guardian-redis:7,
// which scripts/redis-image.sh builds from the local redis-server without any
// registry; Start builds it when it is missing. Any other image (redis:7) is
// pulled by testcontainers. Every address handed out is on 127.0.0.1.
//
// Nothing here skips: without Docker, the image or redis-server, the test
// fails with a message naming what is missing, since CI provides all three.
package redistest

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// DefaultImage is the image Start runs unless GUARDIAN_REDIS_IMAGE names
// another.
const DefaultImage = "guardian-redis:7"

// redisPort is the port Redis listens on inside the container.
const redisPort = "6379/tcp"

// startTimeout bounds starting a container or a cluster and waiting until
// it answers.
const startTimeout = time.Minute

// Option configures Start.
type Option func(*options)

type options struct {
	aof       bool
	args      []string
	certs     *Certs
	needCerts bool
}

// WithAOF turns on the append-only file with appendfsync everysec, the
// durability guardian's security Redis runs with, so that data survives
// Restart the way it survives a crash in production.
func WithAOF() Option {
	return func(o *options) { o.aof = true }
}

// WithArgs appends redis-server arguments, such as "--maxmemory", "10mb".
func WithArgs(args ...string) Option {
	return func(o *options) { o.args = append(o.args, args...) }
}

// WithTLS serves TLS alone on the Redis port, with certs' server
// certificate. When clientCerts is set, the server asks clients for a
// certificate certs' CA signed and refuses those without one. URL is then
// rediss://, and Client speaks TLS.
func WithTLS(certs *Certs, clientCerts bool) Option {
	return func(o *options) { o.certs, o.needCerts = certs, clientCerts }
}

// tlsDir is where the certificates of WithTLS are in the container.
const tlsDir = "/tls/"

// tlsArgs returns the redis-server arguments of WithTLS, and the files to
// copy into the container.
func (o *options) tlsArgs() ([]string, []testcontainers.ContainerFile) {
	if o.certs == nil {
		return nil, nil
	}
	auth := "no"
	if o.needCerts {
		auth = "yes"
	}
	args := []string{
		"--port", "0",
		"--tls-port", "6379",
		"--tls-cert-file", tlsDir + "server.pem",
		"--tls-key-file", tlsDir + "server-key.pem",
		"--tls-ca-cert-file", tlsDir + "ca.pem",
		"--tls-auth-clients", auth,
	}
	var files []testcontainers.ContainerFile
	for host, name := range map[string]string{o.certs.ServerCert: "server.pem", o.certs.ServerKey: "server-key.pem", o.certs.CA: "ca.pem"} {
		files = append(files, testcontainers.ContainerFile{HostFilePath: host, ContainerFilePath: tlsDir + name, FileMode: 0o644})
	}
	return args, files
}

// clientTLS is the TLS configuration of this package's own clients of a
// WithTLS server: they only check that Redis is up, so they verify nothing
// (a test may serve an expired certificate); they present the client
// certificate.
func (o *options) clientTLS(tb testing.TB) *tls.Config {
	tb.Helper()
	if o.certs == nil {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(o.certs.ClientCert, o.certs.ClientKey)
	if err != nil {
		tb.Fatalf("redistest: client certificate: %v", err)
	}
	return &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}
}

// Server is a Redis in a container. Its methods take the test that uses
// them and fail it on any error. They are safe for concurrent use, but a
// test that stops or pauses the server owns it until it is back.
type Server struct {
	ctr *testcontainers.DockerContainer
	tls *tls.Config

	mu     sync.Mutex
	addr   string
	paused bool
}

// Start runs a Redis container for tb and terminates it when tb ends. It
// sets TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1, and
// TESTCONTAINERS_RYUK_DISABLED=true when it is unset; testcontainers reads
// them once, so a TestMain should set them before any test runs.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	setEnv()
	image := Image()
	ensureImage(tb, image)

	cmd := []string{"--protected-mode", "no"}
	if o.aof {
		cmd = append(cmd, "--appendonly", "yes", "--appendfsync", "everysec")
	}
	tlsArgs, files := o.tlsArgs()
	cmd = append(cmd, tlsArgs...)
	cmd = append(cmd, o.args...)

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	ctr, err := testcontainers.Run(ctx, image,
		testcontainers.WithExposedPorts(redisPort),
		testcontainers.WithCmd(cmd...),
		testcontainers.WithFiles(files...),
		testcontainers.WithHostConfigModifier(bindLoopback),
		testcontainers.WithWaitStrategy(wait.ForListeningPort(redisPort).
			SkipInternalCheck().WithStartupTimeout(startTimeout)),
	)
	testcontainers.CleanupContainer(tb, ctr)
	if err != nil {
		tb.Fatalf("redistest: start %s: %v (guardian's Redis tests need Docker and the image; see scripts/redis-image.sh)", image, err)
	}
	s := &Server{ctr: ctr, tls: o.clientTLS(tb)}
	tb.Cleanup(func() {
		if s.isPaused() {
			s.Unpause(tb)
		}
	})
	s.refresh(tb)
	return s
}

// Image returns the image Start runs: $GUARDIAN_REDIS_IMAGE, or DefaultImage.
func Image() string {
	if img := os.Getenv("GUARDIAN_REDIS_IMAGE"); img != "" {
		return img
	}
	return DefaultImage
}

// Addr returns the server's address, "127.0.0.1:port". The port changes
// when the container restarts: read Addr again after Start or Restart.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// URL returns the server's address as a guardian --redis-url,
// "redis://127.0.0.1:port/0", or rediss:// for a WithTLS server.
func (s *Server) URL() string {
	if s.tls != nil {
		return "rediss://" + s.Addr() + "/0"
	}
	return "redis://" + s.Addr() + "/0"
}

// Client returns a client of the server at its current address, closed when
// tb ends. A client made before a Restart keeps dialling the old port.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), TLSConfig: s.tls})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Container returns the underlying container, for what this package does
// not wrap.
func (s *Server) Container() testcontainers.Container {
	return s.ctr
}

// Stop stops the container, keeping it and its data. Redis shuts down
// cleanly, as on a deploy.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	timeout := 10 * time.Second
	if err := s.ctr.Stop(ctx, &timeout); err != nil {
		tb.Fatalf("redistest: stop: %v", err)
	}
}

// Start starts a stopped container again and waits until Redis answers,
// its data loaded. The port is new: read Addr again.
func (s *Server) Start(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := s.ctr.Start(ctx); err != nil {
		tb.Fatalf("redistest: start: %v", err)
	}
	s.refresh(tb)
}

// Restart stops and starts the container, keeping its data.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop(tb)
	s.Start(tb)
}

// Pause freezes the container's processes: connections stay open and every
// command hangs, the way a stalled Redis looks to guardian. The server is
// unpaused when tb ends if the test did not.
func (s *Server) Pause(tb testing.TB) {
	tb.Helper()
	pause(tb, s.ctr.GetContainerID(), true)
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()
}

// Unpause resumes a paused container.
func (s *Server) Unpause(tb testing.TB) {
	tb.Helper()
	pause(tb, s.ctr.GetContainerID(), false)
	s.mu.Lock()
	s.paused = false
	s.mu.Unlock()
}

// pause pauses the container id, or unpauses it.
func pause(tb testing.TB, id string, on bool) {
	tb.Helper()
	docker(tb, id, func(ctx context.Context, c *testcontainers.DockerClient, id string) error {
		var err error
		if on {
			_, err = c.ContainerPause(ctx, id, client.ContainerPauseOptions{})
		} else {
			_, err = c.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
		}
		return err
	})
}

func (s *Server) isPaused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// docker runs f with a Docker client and the container id.
func docker(tb testing.TB, id string, f func(context.Context, *testcontainers.DockerClient, string) error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		tb.Fatalf("redistest: docker client: %v", err)
	}
	defer func() { _ = c.Close() }()
	if err := f(ctx, c, id); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
}

// refresh reads the container's mapped port and waits until Redis answers
// on it.
func (s *Server) refresh(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	port, err := s.ctr.MappedPort(ctx, redisPort)
	if err != nil {
		tb.Fatalf("redistest: mapped port: %v", err)
	}
	addr := net.JoinHostPort("127.0.0.1", port.Port())
	if err := waitPing(ctx, addr, s.tls); err != nil {
		tb.Fatalf("redistest: redis at %s: %v", addr, err)
	}
	s.mu.Lock()
	s.addr = addr
	s.mu.Unlock()
}

// bindLoopback publishes the Redis port on 127.0.0.1 only, on a port Docker
// picks.
func bindLoopback(hc *container.HostConfig) {
	p := network.MustParsePort(redisPort)
	hc.PortBindings = network.PortMap{
		p: {{HostIP: netip.AddrFrom4([4]byte{127, 0, 0, 1}), HostPort: "0"}},
	}
}

// waitPing pings addr, over TLS when tc is set, until it answers PONG
// (Redis answers LOADING while it replays its append-only file) or ctx ends.
func waitPing(ctx context.Context, addr string, tc *tls.Config) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second, TLSConfig: tc})
	defer func() { _ = c.Close() }()
	var err error
	for {
		if err = c.Ping(ctx).Err(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no PONG: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Main runs a test binary whose tests start containers: it sets the
// testcontainers settings this package needs before any test runs (they are
// read once), then runs m and exits. Call it from TestMain.
func Main(m *testing.M) {
	setEnv()
	os.Exit(m.Run())
}

// setEnv sets the testcontainers settings this package needs: the loopback
// address as the host of every mapped port (ports are published on
// 127.0.0.1 only), and, unless the environment says otherwise, no Ryuk
// sidecar (its image cannot be pulled everywhere; every container here is
// terminated by its test).
func setEnv() {
	_ = os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}

var imageOnce struct {
	sync.Mutex
	ok map[string]bool
}

// ensureImage makes sure a guardian-redis image exists, building it with
// scripts/redis-image.sh when it does not. Other images are left to
// testcontainers to pull.
func ensureImage(tb testing.TB, image string) {
	tb.Helper()
	imageOnce.Lock()
	defer imageOnce.Unlock()
	if imageOnce.ok[image] {
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*startTimeout)
	defer cancel()
	c, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		tb.Fatalf("redistest: Docker is not available: %v (guardian's Redis tests need a Docker engine)", err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.ImageInspect(ctx, image); err != nil {
		if !strings.HasPrefix(image, "guardian-redis") {
			// testcontainers pulls it.
			return
		}
		if err := buildImage(ctx, image); err != nil {
			tb.Fatalf("redistest: image %s is missing and could not be built: %v", image, err)
		}
	}
	if imageOnce.ok == nil {
		imageOnce.ok = make(map[string]bool)
	}
	imageOnce.ok[image] = true
}

// buildImage runs scripts/redis-image.sh, found from the module root above
// the working directory.
func buildImage(ctx context.Context, image string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "redis-image.sh"))
	cmd.Env = append(os.Environ(), "GUARDIAN_REDIS_IMAGE="+image)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("scripts/redis-image.sh: %w: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// moduleRoot walks up from the working directory to the directory holding
// go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}
