package deploy_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/guardian-sec/guardian/internal/replay"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/tokens"
	versionpkg "github.com/guardian-sec/guardian/internal/version"
)

// release is guardian's version, the image's tag and label.
var release = versionpkg.Release

// composeFile is the part of deploy/docker-compose.yaml the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	Networks map[string]struct {
		Internal bool `yaml:"internal"`
	} `yaml:"networks"`
	Secrets map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Ports       []string          `yaml:"ports"`
	Volumes     []string          `yaml:"volumes"`
	User        string            `yaml:"user"`
	ReadOnly    bool              `yaml:"read_only"`
	CapDrop     []string          `yaml:"cap_drop"`
	Secrets     []string          `yaml:"secrets"`
	Networks    []string          `yaml:"networks"`
	Profiles    []string          `yaml:"profiles"`
}

func loadCompose(t *testing.T) *composeFile {
	t.Helper()
	var c composeFile
	if err := yaml.Unmarshal(repoFile(t, "deploy/docker-compose.yaml"), &c); err != nil {
		t.Fatalf("deploy/docker-compose.yaml: %v", err)
	}
	return &c
}

// guardianServices are the services that run the guardian image, sorted.
func (c *composeFile) guardianServices() []string {
	var out []string
	for name, s := range c.Services {
		if strings.Contains(s.Image, "${GUARDIAN_IMAGE") {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// containerPort is the port a guardian service listens on, from its
// GUARDIAN_ADDR.
func (c *composeFile) containerPort(t *testing.T, service string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(c.Services[service].Environment["GUARDIAN_ADDR"])
	if err != nil {
		t.Fatalf("%s: GUARDIAN_ADDR: %v", service, err)
	}
	return port
}

// TestComposeFile checks the compose fleet's configuration without running
// it: the shared store, the fleet size, the published ports, the secret and
// the Redis persistence.
func TestComposeFile(t *testing.T) {
	c := loadCompose(t)
	fleet := c.guardianServices()
	if len(fleet) != 2 {
		t.Fatalf("guardian services %v, want two", fleet)
	}
	redis, ok := c.Services["redis"]
	if !ok {
		t.Fatal("no redis service")
	}
	decisionVolumes := map[string]string{}
	for _, name := range fleet {
		s := c.Services[name]
		env := s.Environment
		if got, want := env["GUARDIAN_FLEET_SIZE"], fmt.Sprint(len(fleet)); got != want {
			t.Errorf("%s: GUARDIAN_FLEET_SIZE %q, the fleet has %s", name, got, want)
		}
		if env["GUARDIAN_REDIS_URL"] != "redis://guardian@redis:6379/0" {
			t.Errorf("%s: GUARDIAN_REDIS_URL %q, want the redis service, as the user guardian", name, env["GUARDIAN_REDIS_URL"])
		}
		pwName, ok := strings.CutPrefix(env["GUARDIAN_REDIS_PASSWORD_FILE"], "/run/secrets/")
		if !ok || !slices.Contains(s.Secrets, pwName) || c.Secrets[pwName].File == "" {
			t.Errorf("%s: GUARDIAN_REDIS_PASSWORD_FILE %q is not a compose secret read from a file", name, env["GUARDIAN_REDIS_PASSWORD_FILE"])
		}
		if env["GUARDIAN_SIGNING_KEY"] != "" {
			t.Errorf("%s: the signing key is written into the compose file", name)
		}
		keyFile := env["GUARDIAN_SIGNING_KEY_FILE"]
		secretName, ok := strings.CutPrefix(keyFile, "/run/secrets/")
		if !ok || !slices.Contains(s.Secrets, secretName) || c.Secrets[secretName].File == "" {
			t.Errorf("%s: GUARDIAN_SIGNING_KEY_FILE %q is not a compose secret read from a file", name, keyFile)
		}
		// A hash key of its own, so the signing key rotates without
		// resetting a limit.
		hashName, ok := strings.CutPrefix(env["GUARDIAN_HASH_KEY_FILE"], "/run/secrets/")
		if !ok || hashName == secretName || !slices.Contains(s.Secrets, hashName) || c.Secrets[hashName].File == "" || c.Secrets[hashName].File == c.Secrets[secretName].File {
			t.Errorf("%s: GUARDIAN_HASH_KEY_FILE %q is not a compose secret of its own read from a file", name, env["GUARDIAN_HASH_KEY_FILE"])
		}
		// The decision log, on, in a volume of the instance's own.
		logDir := filepath.Dir(env["GUARDIAN_DECISION_LOG"])
		var logVolume string
		for _, v := range s.Volumes {
			if vol, mount, _ := strings.Cut(v, ":"); mount == logDir {
				if _, named := c.Volumes[vol]; named {
					logVolume = vol
				}
			}
		}
		if env["GUARDIAN_DECISION_LOG"] == "" || logVolume == "" || decisionVolumes[logVolume] != "" {
			t.Errorf("%s: GUARDIAN_DECISION_LOG %q is not a file on a named volume of its own (volumes %v)", name, env["GUARDIAN_DECISION_LOG"], s.Volumes)
		}
		decisionVolumes[logVolume] = name
		if !slices.ContainsFunc(s.Volumes, func(v string) bool { return strings.Contains(v, ":"+env["GUARDIAN_RULES"]+":ro") }) {
			t.Errorf("%s: GUARDIAN_RULES %q is not mounted read-only", name, env["GUARDIAN_RULES"])
		}
		if s.User == "" || strings.HasPrefix(s.User, "0") || !s.ReadOnly || !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("%s: want a non-root user, a read-only root filesystem and no capabilities", name)
		}
		if len(s.Ports) != 1 || !strings.HasPrefix(s.Ports[0], "127.0.0.1:") || !strings.HasSuffix(s.Ports[0], ":"+c.containerPort(t, name)) {
			t.Errorf("%s: ports %v, want guardian's port published on 127.0.0.1 only", name, s.Ports)
		}
		if !slices.ContainsFunc(s.Networks, func(n string) bool { return slices.Contains(redis.Networks, n) }) {
			t.Errorf("%s shares no network with redis", name)
		}
	}

	// Every default image is one built here: nothing needs a registry.
	if redis.Image != "${GUARDIAN_REDIS_IMAGE:-"+defaultRedisImage+"}" {
		t.Errorf("redis image %q: want ${GUARDIAN_REDIS_IMAGE:-%s}, the image of scripts/redis-image.sh", redis.Image, defaultRedisImage)
	}
	if got := c.Services["prometheus"].Image; got != "${PROMETHEUS_IMAGE:-"+defaultPrometheusImage+"}" {
		t.Errorf("prometheus image %q: want ${PROMETHEUS_IMAGE:-%s}, the image of scripts/prometheus-image.sh", got, defaultPrometheusImage)
	}
	for _, script := range []string{"scripts/redis-image.sh", "scripts/prometheus-image.sh"} {
		img := map[string]string{"scripts/redis-image.sh": defaultRedisImage, "scripts/prometheus-image.sh": defaultPrometheusImage}[script]
		if !strings.Contains(string(repoFile(t, script)), ":-"+img+"}") {
			t.Errorf("%s does not build %s by default", script, img)
		}
	}
	// Nothing to export: a compose command with no variables set parses.
	for name, sec := range c.Secrets {
		if strings.Contains(sec.File, ":?") || !strings.Contains(sec.File, ":-") {
			t.Errorf("secret %s: file %q must have a default, or every compose command needs it exported", name, sec.File)
		}
	}
	// The reference login service must not collide with the fleet's ports.
	published := map[string]bool{}
	for _, svc := range c.Services {
		for _, p := range svc.Ports {
			if m := regexp.MustCompile(`:-(\d+)\}`).FindStringSubmatch(p); m != nil {
				published[m[1]] = true
			}
		}
	}
	m := regexp.MustCompile(`"addr", "localhost:(\d+)"`).FindSubmatch(repoFile(t, "examples/loginservice/main.go"))
	if m == nil {
		t.Fatal("examples/loginservice/main.go: no default --addr")
	}
	if published[string(m[1])] || len(published) < 3 {
		t.Errorf("the login service's default port %s is among compose's %v", m[1], published)
	}
	args := strings.Join(redis.Command, " ")
	for _, want := range []string{"--appendonly yes", "--appendfsync everysec", "--maxmemory-policy volatile-ttl", "--maxmemory-samples 10", "--dir /data", "--aclfile /run/secrets/guardian_redis_acl"} {
		if !strings.Contains(args, want) {
			t.Errorf("redis command %q lacks %q", args, want)
		}
	}
	if len(redis.Ports) != 0 {
		t.Errorf("redis publishes %v: only guardian may reach it", redis.Ports)
	}
	dataVolume := false
	for _, v := range redis.Volumes {
		name, mount, _ := strings.Cut(v, ":")
		if _, named := c.Volumes[name]; named && mount == "/data" {
			dataVolume = true
		}
	}
	if !dataVolume {
		t.Errorf("redis volumes %v: want a named volume of its own on /data", redis.Volumes)
	}
	for _, n := range redis.Networks {
		if !c.Networks[n].Internal {
			t.Errorf("redis is on network %s, which is not internal", n)
		}
	}
	for name, s := range c.Services {
		if !slices.Contains(fleet, name) && name != "redis" && len(s.Profiles) == 0 {
			t.Errorf("service %s starts by default: extras belong in a profile", name)
		}
	}
}

var (
	imagesOnce sync.Once
	imagesErr  error
)

// Images the tests build: guardian's under a tag of its own, so the tests
// never replace what `make image` built; Redis's as `make test` does.
const guardianImage = "guardian:deploy-test"

// The images compose uses by default, built by scripts/redis-image.sh and
// scripts/prometheus-image.sh.
const (
	defaultRedisImage      = "guardian-redis:7"
	defaultPrometheusImage = "guardian-prometheus:2"
)

// buildImages builds the guardian image with deploy/image.sh, the recipe of
// `make image`, and the Redis image with scripts/redis-image.sh, once per
// test binary.
func buildImages(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs containers; run without -short (make test)")
	}
	imagesOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if _, err := runErr(ctx, []string{"GUARDIAN_IMAGE=" + guardianImage}, "bash", "deploy/image.sh"); err != nil {
			imagesErr = fmt.Errorf("deploy/image.sh: %w", err)
			return
		}
		if _, err := runErr(ctx, nil, "bash", "scripts/redis-image.sh"); err != nil {
			imagesErr = fmt.Errorf("scripts/redis-image.sh: %w", err)
		}
	})
	if imagesErr != nil {
		t.Fatal(imagesErr)
	}
}

// TestImage checks the guardian image: built FROM scratch with the static,
// trimmed binary alone, run as a non-root user, with no shell and no
// HEALTHCHECK.
func TestImage(t *testing.T) {
	buildImages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var inspect []struct {
		Config struct {
			User        string
			Entrypoint  []string
			Healthcheck any
			Labels      map[string]string
		}
		RootFS struct{ Layers []string }
	}
	if err := json.Unmarshal([]byte(run(t, ctx, nil, "docker", "image", "inspect", guardianImage)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("docker image inspect: %v", err)
	}
	cfg := inspect[0].Config
	if cfg.User != "65532:65532" {
		t.Errorf("image user %q, want 65532:65532", cfg.User)
	}
	if cfg.Healthcheck != nil {
		t.Errorf("image has a HEALTHCHECK %v: orchestrators probe /healthz and /readyz", cfg.Healthcheck)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/usr/bin/guardian"}) {
		t.Errorf("entrypoint %v", cfg.Entrypoint)
	}
	// The OCI labels say what the image is; its version is the one the
	// binary reports.
	labels := cfg.Labels
	revision := strings.TrimSpace(run(t, ctx, nil, "git", "rev-parse", "HEAD"))
	for k, want := range map[string]string{
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.source":   "https://github.com/guardian-sec/guardian",
		"org.opencontainers.image.licenses": "Apache-2.0",
	} {
		if labels[k] != want {
			t.Errorf("image label %s = %q, want %q", k, labels[k], want)
		}
	}
	version := labels["org.opencontainers.image.version"]
	if version != release {
		t.Errorf("image label org.opencontainers.image.version = %q, want %q, internal/version/VERSION", version, release)
	}
	printed := run(t, ctx, nil, "docker", "run", "--rm", guardianImage, "version")
	if !strings.HasPrefix(printed, "guardian "+version+" (revision ") {
		t.Errorf("guardian version in the image prints %q, want it to start %q: the binary's version is not the label's", printed, "guardian "+version+" (revision ")
	}

	dockerfile := string(repoFile(t, "deploy/Dockerfile"))
	for _, line := range strings.Split(dockerfile, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.EqualFold(f[0], "FROM") && f[1] != "scratch" {
			t.Errorf("deploy/Dockerfile: %q: every stage must be FROM scratch (no registry)", line)
		}
	}

	// Every file in the image: the binary and the CA bundle, nothing else
	// (docker adds empty mount points and its own /etc files to a
	// container).
	id := strings.TrimSpace(run(t, ctx, nil, "docker", "create", guardianImage))
	t.Cleanup(func() { _, _ = runErr(context.Background(), nil, "docker", "rm", "-f", id) })
	export := exec.CommandContext(ctx, "docker", "export", id)
	out, err := export.Output()
	if err != nil {
		t.Fatalf("docker export: %v", err)
	}
	var files []string
	var binary []byte
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeSymlink {
			continue
		}
		switch name := strings.TrimPrefix(h.Name, "./"); name {
		case ".dockerenv", "dev/console", "etc/hostname", "etc/hosts", "etc/resolv.conf", "etc/mtab":
		default:
			files = append(files, name)
			if name == "usr/bin/guardian" {
				binary, err = io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	slices.Sort(files)
	if want := []string{"etc/ssl/certs/ca-certificates.crt", "usr/bin/guardian"}; !slices.Equal(files, want) {
		t.Errorf("image files %v, want %v (no shell, nothing else)", files, want)
	}

	// The binary's own record of how it was built.
	bin := filepath.Join(t.TempDir(), "guardian")
	if err := os.WriteFile(bin, binary, 0o600); err != nil {
		t.Fatal(err)
	}
	info := run(t, ctx, nil, "go", "version", "-m", bin)
	for _, want := range []string{"\tpath\tgithub.com/guardian-sec/guardian/cmd/guardian\n", "\tbuild\t-trimpath=true\n", "\tbuild\tCGO_ENABLED=0\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("go version -m: no %q in\n%s", strings.TrimSpace(want), info)
		}
	}
}

// fleet is a running compose project, driven through deploy/compose.sh as
// docs/operations.md says, with the project's name and ports in the
// environment compose reads.
type fleet struct {
	t   *testing.T
	env []string
}

func (f *fleet) run(ctx context.Context, args ...string) (string, error) {
	return runErr(ctx, f.env, "bash", append([]string{"deploy/compose.sh"}, args...)...)
}

// shell runs one line of docs/operations.md as written, from the repository
// root.
func (f *fleet) shell(ctx context.Context, line string) string {
	f.t.Helper()
	out, err := runErr(ctx, f.env, "bash", "-euo", "pipefail", "-c", line)
	if err != nil {
		f.t.Fatalf("docs/operations.md: %s: %v\n%s", line, err, out)
	}
	return out
}

// composeCommands returns the lines of docs/operations.md's compose command
// block, comments left out.
func composeCommands(t *testing.T) []string {
	t.Helper()
	doc := string(repoFile(t, "docs/operations.md"))
	_, block, ok := strings.Cut(doc, "<!-- compose commands:")
	if !ok {
		t.Fatal("docs/operations.md has no compose command block")
	}
	_, block, _ = strings.Cut(block, "```sh\n")
	block, _, _ = strings.Cut(block, "```")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

func (f *fleet) must(ctx context.Context, args ...string) string {
	f.t.Helper()
	out, err := f.run(ctx, args...)
	if err != nil {
		f.t.Fatalf("compose %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// url returns the base URL of a guardian service, from the host port
// docker published, which must be on 127.0.0.1.
func (f *fleet) url(ctx context.Context, service string) string {
	f.t.Helper()
	addr := strings.TrimSpace(f.must(ctx, "port", service, "8080"))
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		f.t.Fatalf("%s is published on %q, want 127.0.0.1 only", service, addr)
	}
	return "http://" + addr
}

// checkResult is what the tests read of a /v1/check answer.
type checkResult struct {
	status       int
	Decision     string `json:"decision"`
	Rule         string `json:"rule"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	Degraded     bool   `json:"degraded"`
	Limits       []struct {
		Rule      string `json:"rule"`
		Remaining int64  `json:"remaining"`
	} `json:"limits"`
}

func (r checkResult) String() string {
	return fmt.Sprintf("%d %s (rule %q, degraded %v, limits %+v)", r.status, r.Decision, r.Rule, r.Degraded, r.Limits)
}

var client = &http.Client{Timeout: 5 * time.Second}

func post(t *testing.T, url, token string, body any, into any) int {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode >= 500 {
		t.Fatalf("POST %s: %d %s: guardian must not answer 5xx, even without its store", url, resp.StatusCode, data)
	}
	if into != nil {
		if err := json.Unmarshal(data, into); err != nil {
			t.Fatalf("POST %s: %d %s: %v", url, resp.StatusCode, data, err)
		}
	}
	return resp.StatusCode
}

func check(t *testing.T, base, token, account string) checkResult {
	t.Helper()
	var r checkResult
	r.status = post(t, base+"/v1/check", token, map[string]any{"flow": "login", "account": account, "ip": "203.0.113.7"}, &r)
	return r
}

// eventually polls cond every 100 ms until it holds or d has passed.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readyz returns the store state /readyz reports, or "" when it does not
// answer 200.
func readyz(base string) string {
	resp, err := client.Get(base + "/readyz")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var body struct {
		Store string `json:"store"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
		return ""
	}
	return body.Store
}

// e2eRules is the rules file the fleet runs: a budget of 4 checks an hour
// per account, small enough to spend through both instances, decided by
// the strict local fallback when Redis is gone.
const e2eRules = `version: 1
rules:
  - name: e2e-account
    flows: [login]
    key: account
    type: rate
    count: attempts
    limit: 4
    per: 1h
    burst: 4
    action: slow
    on_store_error: local
`

// e2eShadowRule is added to e2eRules by a reload.
const e2eShadowRule = `  - name: e2e-account-shadow
    flows: [login]
    key: account
    type: rate
    limit: 1
    per: 1h
    mode: shadow
`

// ruleNames returns the names of the rules an instance runs (GET /v1/rules).
func ruleNames(t *testing.T, base, adminToken string) []string {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/v1/rules", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Rules []struct {
			Name string `json:"name"`
		} `json:"rules"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/v1/rules: %d %v", base, resp.StatusCode, err)
	}
	var names []string
	for _, r := range body.Rules {
		names = append(names, r.Name)
	}
	return names
}

// TestComposeFleet brings up deploy/docker-compose.yaml with the locally
// built images and checks, through both instances, that they share one
// store, that they keep deciding (degraded, with the limits divided by the
// fleet size) when the Redis container is killed, that the spent budget
// survives the Redis restart (AOF on its volume), that SIGHUP reloads the
// mounted rules, and what they log.
func TestComposeFleet(t *testing.T) {
	buildImages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// docs/operations.md's commands, run as written: up, ps, a token,
	// the reload, the monitoring profile, and down last.
	cmds := composeCommands(t)
	find := func(prefix string) string {
		t.Helper()
		for _, c := range cmds {
			if strings.HasPrefix(c, prefix) {
				return c
			}
		}
		t.Fatalf("docs/operations.md's compose commands %q have no %q", cmds, prefix)
		return ""
	}
	up, ps, tokenCmd := find("make compose-up"), find("deploy/compose.sh ps"), find("deploy/compose.sh run")
	reload, monitoring, down := find("deploy/compose.sh kill -s SIGHUP"), find("make prometheus-image"), find("make compose-down")
	if cmds[0] != up || cmds[len(cmds)-1] != down || len(cmds) != 6 {
		t.Fatalf("docs/operations.md's compose commands %q: want up first, down last, and only what this test runs", cmds)
	}

	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesFile, []byte(e2eRules), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rulesFile, 0o644); err != nil { // past the umask; read by uid 65532
		t.Fatal(err)
	}

	// Only what the documented variables offer: a project of its own, free
	// ports, the test's images and rules. No GUARDIAN_KEY_FILE and no Redis
	// password or ACL file: the defaults are those `make compose-up` makes.
	f := &fleet{
		t: t,
		env: []string{
			"COMPOSE_PROJECT_NAME=guardiandeploy" + randomHex(t, 4),
			"GUARDIAN_IMAGE=" + guardianImage,
			"GUARDIAN_RULES_FILE=" + rulesFile,
			"GUARDIAN_A_PORT=0",
			"GUARDIAN_B_PORT=0",
			"PROMETHEUS_PORT=0",
			// Generous: this test is about sharing and falling back, and
			// shares the machine with other tests run under -race.
			"GUARDIAN_STORE_TIMEOUT=100ms",
		},
	}
	for _, e := range os.Environ() {
		if name, _, _ := strings.Cut(e, "="); name == "GUARDIAN_KEY_FILE" || name == "GUARDIAN_REDIS_SECRET_FILE" || name == "GUARDIAN_REDIS_ACL_FILE" || name == "GUARDIAN_REDIS_IMAGE" || name == "PROMETHEUS_IMAGE" {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	downDone := false
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			logs, _ := f.run(ctx, "logs", "--no-color")
			t.Logf("compose logs:\n%s", logs)
		}
		if !downDone {
			f.shell(ctx, down)
		}
		// The test's own volumes too, which the documented down keeps.
		if out, err := f.run(ctx, "--profile", "monitoring", "down", "-v", "--remove-orphans", "-t", "5"); err != nil {
			t.Errorf("compose down -v: %v\n%s", err, out)
		}
	})
	f.shell(ctx, up)
	if out := f.shell(ctx, ps); !strings.Contains(out, "guardian-a") || !strings.Contains(out, "guardian-b") || !strings.Contains(out, "redis") {
		t.Fatalf("%s:\n%s", ps, out)
	}

	a, b := f.url(ctx, "guardian-a"), f.url(ctx, "guardian-b")
	for _, base := range []string{a, b} {
		if !eventually(60*time.Second, func() bool { return readyz(base) == "ok" }) {
			t.Fatalf("%s/readyz never answered {\"store\": \"ok\"}", base)
		}
	}

	rawKey := strings.TrimSpace(string(repoFile(t, "deploy/.secrets/signing-key")))
	key, err := secret.New([]byte(rawKey))
	if err != nil {
		t.Fatal(err)
	}
	svc := tokens.NewService(key)
	// The documented token command mints a check token the fleet accepts.
	checkTok := strings.TrimSpace(f.shell(ctx, tokenCmd))
	if r := check(t, a, checkTok, "token-"+randomHex(t, 4)+"@example.com"); r.status != 200 {
		t.Fatalf("a check with the token of %q: %s", tokenCmd, r)
	}
	if cl, err := svc.Verify(checkTok, time.Now()); err != nil || cl.ExpiresAt.Sub(cl.IssuedAt) != 720*time.Hour || cl.ID == "" {
		t.Errorf("the documented token: %+v, %v; want 720h and a jti", cl, err)
	}
	const admin = "deploy-e2e-oncall"
	adminTok, err := svc.Issue(tokens.ScopeAdmin, admin, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	suffix := randomHex(t, 6)
	shared := "shared-" + suffix + "@example.com"

	// The first store calls of an instance dial Redis and load the
	// scripts; one that overruns the store timeout is decided by the
	// fallback. Warm both up first.
	settle(t, checkTok, "warmup-"+suffix, a, b)

	t.Run("one budget across both instances", func(t *testing.T) {
		// 4 checks alternately through a and b spend the account's one
		// budget; the fifth and sixth are slowed, whichever instance asks.
		for i, base := range []string{a, b, a, b} {
			r := check(t, base, checkTok, shared)
			if r.status != 200 || r.Decision != "allow" || r.Degraded {
				t.Fatalf("check %d: %s, want 200 allow, not degraded", i+1, r)
			}
			if len(r.Limits) != 1 || r.Limits[0].Remaining != int64(3-i) {
				t.Fatalf("check %d: limits %+v, want e2e-account remaining %d: the instances do not share the budget", i+1, r.Limits, 3-i)
			}
		}
		for _, base := range []string{a, b} {
			r := check(t, base, checkTok, shared)
			if r.status != 429 || r.Decision != "slow" || r.Rule != "e2e-account" || r.RetryAfterMS <= 0 || r.Degraded {
				t.Fatalf("over budget through %s: %s, want 429 slow by e2e-account with a wait", base, r)
			}
		}
	})
	if t.Failed() {
		return
	}

	t.Run("decision log for replay", func(t *testing.T) {
		// Written every second, to the instance's own volume; copied out
		// as docs/operations.md says, it replays as it is.
		time.Sleep(1500 * time.Millisecond)
		out := filepath.Join(t.TempDir(), "decisions-a.jsonl")
		id := strings.TrimSpace(f.must(ctx, "ps", "-q", "guardian-a"))
		run(t, ctx, nil, "docker", "cp", id+":/var/lib/guardian/decisions.jsonl", out)
		set, err := rules.Parse("rules.yaml", []byte(e2eRules), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		file, err := os.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		sum, err := replay.Run(ctx, set, file, replay.Config{})
		// guardian-a decided at least its warm-up checks and 3 of the
		// shared account's (two allowed, one slowed).
		if err != nil || sum.Input.Checks < 3 || sum.Input.Malformed != 0 {
			t.Fatalf("replay of guardian-a's decision log: %+v, %v", sum, err)
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), suffix) || strings.Contains(string(raw), "@example.com") {
			t.Error("the decision log holds an account in clear")
		}
	})

	// AOF is fsynced every second: let the spends reach the disk.
	time.Sleep(1500 * time.Millisecond)
	f.must(ctx, "kill", "redis")

	t.Run("degraded answers without Redis", func(t *testing.T) {
		// Each instance's local fallback allows 4 / 2 = 2 checks of a new
		// account, then slows it; every answer says it is degraded.
		for name, base := range map[string]string{"a": a, "b": b} {
			account := "outage-" + name + "-" + suffix + "@example.com"
			var got []string
			for range 3 {
				r := check(t, base, checkTok, account)
				if !r.Degraded {
					t.Errorf("guardian-%s without Redis: %s, want degraded", name, r)
				}
				got = append(got, r.Decision)
			}
			if want := []string{"allow", "allow", "slow"}; !slices.Equal(got, want) {
				t.Errorf("guardian-%s without Redis: decisions %v, want %v (budget 4 divided by fleet size 2)", name, got, want)
			}
		}
		for _, base := range []string{a, b} {
			if got := readyz(base); got != "degraded" {
				t.Errorf("%s/readyz without Redis: store %q, want 200 and \"degraded\"", base, got)
			}
			if status, _ := get(t, base+"/healthz"); status != 200 {
				t.Errorf("%s/healthz without Redis: %d, want 200", base, status)
			}
			_, body := get(t, base+"/metrics")
			if !bytes.Contains(body, []byte("\nguardian_fallback_active 1\n")) {
				t.Errorf("%s/metrics without Redis: guardian_fallback_active is not 1", base)
			}
		}
	})

	f.must(ctx, "start", "redis")

	t.Run("state survives a Redis restart", func(t *testing.T) {
		// Connections pooled before the kill lead nowhere; each instance
		// may fall back again once per stale connection before it settles.
		settle(t, checkTok, "probe-"+suffix, a, b)
		for _, base := range []string{a, b} {
			if got := readyz(base); got != "ok" {
				t.Errorf("%s/readyz after Redis came back: store %q, want \"ok\"", base, got)
			}
		}
		for _, base := range []string{a, b} {
			r := check(t, base, checkTok, shared)
			if r.status != 429 || r.Decision != "slow" || r.Degraded {
				t.Errorf("the spent account after the restart, through %s: %s, want slow: the budget was lost", base, r)
			}
		}
	})

	t.Run("admin reset", func(t *testing.T) {
		var out struct {
			Reset bool `json:"reset"`
		}
		if status := post(t, a+"/v1/accounts/reset", adminTok, map[string]string{"account": shared}, &out); status != 200 || !out.Reset {
			t.Fatalf("reset: %d %+v", status, out)
		}
		if r := check(t, b, checkTok, shared); r.Decision != "allow" {
			t.Errorf("after a reset through a, a check through b: %s, want allow", r)
		}
	})

	t.Run("rules reload on SIGHUP", func(t *testing.T) {
		// In place, as docs/operations.md says: the containers see the
		// bind-mounted file change.
		if err := os.WriteFile(rulesFile, []byte(e2eRules+e2eShadowRule), 0o644); err != nil {
			t.Fatal(err)
		}
		f.shell(ctx, reload)
		for _, base := range []string{a, b} {
			var got []string
			if !eventually(10*time.Second, func() bool {
				got = ruleNames(t, base, adminTok)
				return slices.Equal(got, []string{"e2e-account", "e2e-account-shadow"})
			}) {
				t.Errorf("%s: rules %v after SIGHUP, want the new file's", base, got)
			}
		}
	})

	t.Run("logs", func(t *testing.T) {
		logs := f.must(ctx, "logs", "--no-color", "guardian-a", "guardian-b")
		for _, l := range strings.Split(logs, "\n") {
			for _, secret := range []string{suffix, "@example.com", "203.0.113.7", rawKey} {
				if strings.Contains(l, secret) {
					t.Errorf("logged %q in clear: %s", secret, l)
				}
			}
		}
		lines := jsonLines(t, logs)
		has := func(svc string, match func(map[string]any) bool) bool {
			return slices.ContainsFunc(lines[svc], match)
		}
		msg := func(m map[string]any) string { s, _ := m["msg"].(string); return strings.ToLower(s) }
		for _, svc := range []string{"guardian-a", "guardian-b"} {
			episodes := 0
			for _, m := range lines[svc] {
				if strings.Contains(msg(m), "fallback") && strings.Contains(msg(m), "end") {
					episodes++
				}
			}
			t.Logf("%s: %d fallback episodes", svc, episodes)
			if !has(svc, func(m map[string]any) bool { return strings.Contains(msg(m), "start") && m["level"] == "INFO" }) {
				t.Errorf("%s: no start line", svc)
			}
			if !has(svc, func(m map[string]any) bool {
				return strings.Contains(msg(m), "fallback") && (strings.Contains(msg(m), "start") || strings.Contains(msg(m), "active"))
			}) {
				t.Errorf("%s: no line for the start of the fallback", svc)
			}
			if !has(svc, func(m map[string]any) bool {
				return strings.Contains(msg(m), "fallback") && strings.Contains(msg(m), "end")
			}) {
				t.Errorf("%s: no line for the end of the fallback", svc)
			}
		}
		for _, svc := range []string{"guardian-a", "guardian-b"} {
			if !has(svc, func(m map[string]any) bool { return strings.Contains(msg(m), "reload") && m["level"] == "INFO" }) {
				t.Errorf("%s: no line for the rules reload", svc)
			}
		}
		if !has("guardian-a", func(m map[string]any) bool {
			return m["audit"] == true && m["action"] == "reset" && m["subject"] == admin && m["result"] == "ok"
		}) {
			t.Errorf("guardian-a: no audit line for the account reset by %q", admin)
		}
	})

	t.Run("monitoring profile", func(t *testing.T) {
		f.shell(ctx, monitoring)
		prom := "http://" + strings.TrimSpace(f.must(ctx, "port", "prometheus", "9090"))
		var last string
		if !eventually(90*time.Second, func() bool {
			resp, err := client.Get(prom + "/api/v1/query?query=" + url.QueryEscape(`sum(up{job="guardian"})`))
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			last = string(body)
			return strings.Contains(last, `"value":[`) && strings.Contains(last, `,"2"]`)
		}) {
			t.Errorf("Prometheus never scraped both guardians up: %s", last)
		}
		if status, body := get(t, prom+"/api/v1/rules"); status != 200 || !bytes.Contains(body, []byte("GuardianFallbackActive")) {
			t.Errorf("Prometheus has not loaded the alert rules: %d %s", status, body)
		}
	})

	t.Run("down keeps the Redis volume", func(t *testing.T) {
		f.shell(ctx, down)
		downDone = true
		if out := f.must(ctx, "ps", "-q"); strings.TrimSpace(out) != "" {
			t.Errorf("after %q containers remain: %s", down, out)
		}
		project := strings.TrimPrefix(f.env[0], "COMPOSE_PROJECT_NAME=")
		vols := run(t, ctx, nil, "docker", "volume", "ls", "-q", "--filter", "label=com.docker.compose.project="+project)
		if !strings.Contains(vols, "redis-data") {
			t.Errorf("after %q the Redis volume is gone: %q", down, vols)
		}
	})
}

// settle waits until each instance answers 20 checks in a row from the
// store, not the fallback.
func settle(t *testing.T, token, prefix string, bases ...string) {
	t.Helper()
	for _, base := range bases {
		streak, n := 0, 0
		var last checkResult
		if !eventually(30*time.Second, func() bool {
			n++
			last = check(t, base, token, fmt.Sprintf("%s-%d@example.com", prefix, n))
			if last.Degraded {
				streak = 0
			} else {
				streak++
			}
			return streak == 20
		}) {
			t.Fatalf("%s: still degraded answers after 30 s with Redis up: %s", base, last)
		}
	}
}

// jsonLines parses the JSON log lines of compose logs by service: each
// line starts with the container's name ("guardian-a_1  | " or
// "project-guardian-a-1  | ").
func jsonLines(t *testing.T, logs string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(logs))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		container, line, ok := strings.Cut(sc.Text(), "| ")
		if !ok || !strings.HasPrefix(strings.TrimSpace(line), "{") {
			continue
		}
		var svc string
		for _, s := range []string{"guardian-a", "guardian-b"} {
			if strings.Contains(container, s) {
				svc = s
			}
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("a log line is not JSON: %s", line)
			continue
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := m[k]; !ok {
				t.Errorf("log line without %q: %s", k, line)
			}
		}
		out[svc] = append(out[svc], m)
	}
	return out
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
