// Command guardian is the authentication-abuse protection service: `guardian
// serve` runs it, `guardian token` prints a service token, `guardian rules
// check` validates a rules file, `guardian rules explain` says what each rule
// bounds, `guardian replay` runs recorded traffic through rules
// offline, `guardian simulate` runs built-in attacks against rules,
// `guardian version` prints the version. README.md describes every
// command and flag.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/guardian-sec/guardian/internal/gateway"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/store/redisstore"
	"github.com/guardian-sec/guardian/internal/tokens"
	"github.com/guardian-sec/guardian/internal/version"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

const usage = `guardian protects logins, password resets and one-time codes from guessing
and flooding: ask it before verifying a credential, tell it afterwards.

Usage:
  guardian [serve] [flags]                      run the service
  guardian token --scope check|admin [flags]    print a service token
  guardian rules check FILE                     validate a rules file
  guardian rules explain [FILE]                 what each rule bounds, shadow rules too
  guardian replay --rules FILE EVENTS.jsonl...  what each rule would do to recorded traffic
  guardian replay --compare OLD NEW EVENTS...   what NEW would decide differently from OLD
  guardian simulate [--rules FILE]              what rules do to built-in attacks, and cost users
  guardian breached build --out FILE [INPUT…]   a breached-password filter for serve --breached
  guardian pseudonym [--kind KIND] VALUE        the pseudonym logs and the console name VALUE by
  guardian version                              print the version

Run 'guardian COMMAND --help' for a command's flags. The flags of serve, and
the key flags token and pseudonym share with it, also read GUARDIAN_<FLAG> from
the environment (--redis-url: GUARDIAN_REDIS_URL); a flag given on the command
line wins. No other command reads the environment.
`

// run is guardian's command line, with its environment passed in for tests.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd, implicit := "serve", true
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help", "help":
			fmt.Fprint(stdout, usage)
			return exitOK
		case "-version", "--version":
			return versionCmd(args[1:], stdout, stderr)
		}
		if !strings.HasPrefix(args[0], "-") {
			cmd, args, implicit = args[0], args[1:], false
		}
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, getenv, stdout, stderr, implicit)
	case "token":
		return token(args, getenv, stdout, stderr)
	case "rules":
		return rulesCmd(args, stdout, stderr)
	case "replay":
		return replayCmd(ctx, args, stdout, stderr)
	case "simulate":
		return simulateCmd(ctx, args, stdout, stderr)
	case "breached":
		return breachedCmd(ctx, args, stdout, stderr)
	case "pseudonym":
		return pseudonymCmd(args, getenv, stdout, stderr)
	case "version":
		return versionCmd(args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "guardian: unknown command %q; run 'guardian --help' for the commands\n", cmd)
	return exitUsage
}

const versionHelp = `Usage: guardian version

Prints the version and revision guardian was built as (also guardian
--version), the same as the guardian_build_info metric.
`

// versionCmd is `guardian version`.
func versionCmd(args []string, stdout, stderr io.Writer) int {
	c := newCommand("guardian version", versionHelp)
	pos, code, ok := c.parse(args, nil, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		c.fail(stderr, "unexpected argument %q", pos[0])
		return exitUsage
	}
	fmt.Fprintln(stdout, version.Get())
	return exitOK
}

// command is one subcommand's flags and help. A flag is declared on fs, one
// line each; which flags also read the environment is the command's choice:
// every flag of serve (its settings), only the key flags elsewhere.
type command struct {
	name string // "guardian serve"
	help string // what comes before the flags in --help
	fs   *flag.FlagSet
	// envAll makes every flag read GUARDIAN_<FLAG>; otherwise only the
	// flags in env do.
	envAll bool
	env    map[string]bool
	// fromEnv names, per flag, the variable that set it.
	fromEnv map[string]string
	// implicit: the command was not named on the command line (guardian
	// with flags alone runs serve).
	implicit bool
}

func newCommand(name, help string) *command {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // every message is printed once, by parse
	fs.Usage = func() {}
	return &command{name: name, help: help, fs: fs, env: map[string]bool{}, fromEnv: map[string]string{}}
}

// readsEnv reports whether flag name also reads its environment variable.
func (c *command) readsEnv(name string) bool { return c.envAll || c.env[name] }

// source is how the user set flag name: "--name", or the variable that
// set it followed by the flag it stands for.
func (c *command) source(name string) string {
	if v := c.fromEnv[name]; v != "" {
		return v + " (--" + name + ")"
	}
	return "--" + name
}

// parse parses args, flags and positional arguments in any order, then
// fills every flag that reads the environment and was not given on the
// command line from its variable (getenv may be nil when none does). It
// returns the positional arguments, or ok=false with the exit code when the
// command is done: --help printed (0), or a usage error printed once to
// stderr (2).
func (c *command) parse(args []string, getenv func(string) string, stdout, stderr io.Writer) (pos []string, code int, ok bool) {
	pos, err := c.parseInterspersed(args, getenv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.printHelp(stdout)
		return nil, exitOK, false
	case err != nil && strings.HasPrefix(err.Error(), undefinedPrefix):
		typed := undefinedFlag(args, strings.TrimPrefix(err.Error(), undefinedPrefix))
		if c.implicit {
			// guardian -v: not a serve flag, and most likely not meant as one.
			fmt.Fprintf(stderr, "guardian: unknown flag %s%s\nRun 'guardian --help' for the commands, 'guardian serve --help' for the service's flags.\n", typed, didYouMean(typed))
		} else {
			c.fail(stderr, "unknown flag %s", typed)
		}
		return nil, exitUsage, false
	case err != nil:
		c.fail(stderr, "%s", dashes(err.Error()))
		return nil, exitUsage, false
	}
	return pos, exitOK, true
}

// undefinedPrefix starts the flag package's error for an undefined flag.
const undefinedPrefix = "flag provided but not defined: -"

// undefinedFlag returns the argument as the user typed it for the flag
// package's name of an undefined flag ("v" for -v, --v or -v=1).
func undefinedFlag(args []string, name string) string {
	for _, a := range args {
		bare, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && bare == name {
			return a
		}
	}
	return "--" + name
}

// didYouMean suggests the flag a mistyped top-level flag most likely meant.
func didYouMean(typed string) string {
	switch strings.TrimLeft(typed, "-") {
	case "v", "V", "ver", "vers", "verison":
		return " (did you mean --version?)"
	case "?", "usage":
		return " (did you mean --help?)"
	}
	return ""
}

// parseInterspersed parses args into fs, letting flags and positional
// arguments come in any order, then fills from the environment every flag
// that reads it and was not given on the command line: a flag wins over
// the environment (--redis-url ⇔ GUARDIAN_REDIS_URL).
func (c *command) parseInterspersed(args []string, getenv func(string) string) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			return nil, err
		}
		args = c.fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if getenv == nil {
		return pos, nil
	}
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	c.fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil || !c.readsEnv(f.Name) {
			return
		}
		env := envName(f.Name)
		if v := getenv(env); v != "" {
			if e := c.fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", env, e)
				return
			}
			c.fromEnv[f.Name] = env
		}
	})
	return pos, err
}

// fail prints one usage error, and where to read the usage.
func (c *command) fail(stderr io.Writer, format string, args ...any) {
	fmt.Fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", c.name, fmt.Sprintf(format, args...), c.name)
}

// printHelp prints the command's help and its flags, each with its default
// and, for those that read one, its environment variable.
func (c *command) printHelp(w io.Writer) {
	fmt.Fprint(w, c.help)
	n := 0
	c.fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprint(w, "\nFlags:\n")
	c.fs.VisitAll(func(f *flag.Flag) {
		name, text := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n      %s", line, text)
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		if c.readsEnv(f.Name) {
			fmt.Fprintf(w, " [%s]", envName(f.Name))
		}
		fmt.Fprintln(w)
	})
}

// dashes writes the flag package's "-name" as "--name", the form the README
// and --help use.
func dashes(msg string) string {
	for _, p := range []string{"for flag -", "flag needs an argument: -"} {
		msg = strings.ReplaceAll(msg, p, p+"-")
	}
	return msg
}

// envName is the environment variable of a flag: --redis-url is
// GUARDIAN_REDIS_URL.
func envName(flagName string) string {
	return "GUARDIAN_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// keyFlags are a secret's pair of flags, --NAME and --NAME-file. Both read
// their environment variables, on every command that has them.
type keyFlags struct {
	name, key, keyFile string
	cmd                *command
}

func (k *keyFlags) register(c *command, name, usage string) {
	k.name, k.cmd = name, c
	c.fs.StringVar(&k.key, name, "", usage)
	c.fs.StringVar(&k.keyFile, name+"-file", "", "file holding the "+strings.ReplaceAll(name, "-", " "))
	c.env[name], c.env[name+"-file"] = true, true
}

// load returns the configured key, or ok=false when none is configured. An
// error names the flag (or variable) the unusable key came from.
func (k *keyFlags) load() (key secret.Key, ok bool, err error) {
	raw, from := k.key, k.source(k.name)
	if k.keyFile != "" {
		if raw != "" {
			return secret.Key{}, false, fmt.Errorf("set %s or %s, not both", from, k.source(k.name+"-file"))
		}
		from = k.source(k.name + "-file")
		b, err := os.ReadFile(k.keyFile)
		if err != nil {
			return secret.Key{}, false, fmt.Errorf("%s: %w", from, err)
		}
		raw = strings.TrimRight(string(b), "\r\n")
		if raw == "" {
			return secret.Key{}, false, fmt.Errorf("%s: %s is empty", from, k.keyFile)
		}
	}
	if raw == "" {
		return secret.Key{}, false, nil
	}
	key, err = secret.New([]byte(raw))
	if err != nil {
		return secret.Key{}, false, fmt.Errorf("%s: %w", from, err)
	}
	return key, true, nil
}

// source names where flag came from, for an error.
func (k *keyFlags) source(flag string) string {
	if k.cmd == nil {
		return "--" + flag
	}
	return k.cmd.source(flag)
}

// loadAll returns the configured keys, one a line (the file's, or the
// value's): the first is the signing key. ok is false when none is
// configured; a file given that holds no key is an error. An error names
// the flag (or variable) the unusable keys came from.
func (k *keyFlags) loadAll() (keys []secret.Key, ok bool, err error) {
	from := k.source(k.name)
	switch {
	case k.keyFile != "" && k.key != "":
		return nil, false, fmt.Errorf("set %s or %s, not both", from, k.source(k.name+"-file"))
	case k.keyFile != "":
		from = k.source(k.name + "-file")
		b, rerr := os.ReadFile(k.keyFile)
		if rerr != nil {
			return nil, false, fmt.Errorf("%s: %w", from, rerr)
		}
		if keys, err = secret.ParseKeys(b); errors.Is(err, secret.ErrNoKey) {
			return nil, false, fmt.Errorf("%s: %s is empty", from, k.keyFile)
		}
	case strings.Contains(k.key, "\n"):
		keys, err = secret.ParseKeys([]byte(k.key))
	case k.key != "":
		var key secret.Key
		key, err = secret.New([]byte(k.key))
		keys = []secret.Key{key}
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", from, err)
	}
	return keys, true, nil
}

const signingKeyUsage = "secret (at least 32 bytes) for service tokens, attempt ids and device tokens; several, one a line: the first signs, every one verifies; empty: development mode with an ephemeral key"

// signingKeyFileUsage is --signing-key-file's usage.
const signingKeyFileUsage = "file holding the signing keys, one a line: the first signs, every one verifies; serve reads it again on SIGHUP and whenever it changes"

// newLogger is the log of --log-format and --log-level. Durations are
// written one way in both formats, as Go writes them ("24h0m0s", "1.5ms"),
// never as JSON's nanoseconds.
func newLogger(format, level string, w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: durationString}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not json or text", format)
}

// durationString writes a duration attribute as its String.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

const serveHelp = `Usage: guardian serve [flags]

Runs the HTTP service (also what 'guardian' with no command does). SIGHUP
reloads the rules file, the signing key file, the TLS certificate and the
--breached filter; SIGTERM drains in-flight requests and exits 0.
`

// serve is `guardian serve`, also what `guardian` with flags alone runs
// (implicit). Every flag of serve is a setting of the service and also
// reads GUARDIAN_<FLAG>: declare a new one on fs, one line, and it does.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, implicit bool) int {
	c := newCommand("guardian serve", serveHelp)
	c.envAll, c.implicit = true, implicit
	fs := c.fs
	var cfg server.Config
	var keys, previousKey, hashKey keyFlags
	var logFormat, logLevel, decisionLog, accountFold, region, tenantMetrics string
	fs.StringVar(&cfg.Addr, "addr", ":8080", "listen `address`")
	fs.StringVar(&cfg.RulesPath, "rules", "", "rules `file` (YAML); empty: the built-in default rules")
	fs.StringVar(&cfg.RedisURL, "redis-url", "", "the security store: redis://host:port/db, rediss://…, or host:port,host:port,… for Redis Cluster; empty: embedded in-memory store (one instance only)")
	fs.StringVar(&cfg.Redis.CAFile, "redis-ca-file", "", "PEM file of the CAs that sign the Redis server's certificate (rediss:// only); empty: the system roots")
	fs.StringVar(&cfg.Redis.CertFile, "redis-cert-file", "", "PEM client certificate to present to Redis (rediss:// only; with --redis-key-file)")
	fs.StringVar(&cfg.Redis.KeyFile, "redis-key-file", "", "PEM key of --redis-cert-file")
	fs.StringVar(&cfg.Redis.PasswordFile, "redis-password-file", "", "file whose first line is the Redis password, in place of one in --redis-url (the user stays the URL's)")
	keys.register(c, "signing-key", signingKeyUsage)
	fs.Lookup("signing-key-file").Usage = signingKeyFileUsage
	previousKey.register(c, "previous-signing-key", "during a key rotation, the signing key being replaced: what it signed still verifies; never used to sign (read at start; the lines of --signing-key-file rotate without a restart)")
	hashKey.register(c, "hash-key", "secret (at least 32 bytes) that keys the hashes of accounts, addresses and recipients; empty: derived from the signing key. Set it to rotate the signing key without resetting every limit")
	fs.DurationVar(&cfg.StoreTimeout, "store-timeout", 5*time.Millisecond, "deadline of one store call")
	fs.DurationVar(&cfg.AttemptTTL, "attempt-ttl", tokens.AttemptTTL, "how long an attempt id can be reported; a count only unreported checks made is kept twice as long at most")
	fs.IntVar(&cfg.FleetSize, "fleet-size", 1, "how many guardian instances share the store; the local fallback divides limits by it")
	fs.StringVar(&logFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&logLevel, "log-level", "info", "least severe log level written: debug, info, warn or error")
	fs.StringVar(&cfg.PprofAddr, "pprof", "", "serve Go pprof profiles on this `address` (e.g. 127.0.0.1:6060), apart from the API; empty: off")
	fs.StringVar(&accountFold, "account-fold", "", "`accents`: accounts also compare without accents (combining marks removed), for auth services whose user lookup ignores them; empty: accents count")
	fs.StringVar(&region, "default-region", "", "ISO 3166-1 alpha-2 `region` (e.g. GB) a phone number without an international prefix is dialled in; empty: such a number is read as international without its +")
	fs.StringVar(&decisionLog, "decision-log", "", "append a decision log (one JSON line per check and report, in the replay format, identifiers pseudonymised) to this `file`, or - for stdout; empty: none")
	fs.StringVar(&cfg.BreachedPath, "breached", "", "breached-password filter `file` (guardian breached build) for POST /v1/passwords/check and a check's password_sha1; reloaded on SIGHUP; empty: none")
	fs.StringVar(&cfg.OTLPEndpoint, "otlp-endpoint", "", "trace checks and reports to this OTLP/HTTP collector `URL` (e.g. http://collector:4318); empty: no tracing")
	fs.StringVar(&cfg.AdminAddr, "admin-addr", "", "serve the admin API and the console on a listener of their own at this `address` (the main one then answers 404 for them); empty: on --addr")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "PEM certificate (its chain after it) to serve TLS with on every listener but --pprof's, with --tls-key-file; read again on SIGHUP and whenever it changes")
	fs.StringVar(&cfg.TLSKeyFile, "tls-key-file", "", "PEM key of --tls-cert-file")
	fs.StringVar(&cfg.ProxyPath, "proxy", "", "proxy `file` (YAML, docs/gateway.md): also run reverse proxies in front of logins that do not call guardian, each on its own listener; empty: none")
	fs.Var((*urlList)(&cfg.WebhookURLs), "webhook-url", "send guardian's events (hard stops, resets, the global challenge, the fallback, reloads, list changes) to this `URL` as signed JSON POSTs (Standard Webhooks); repeat it for several receivers (GUARDIAN_WEBHOOK_URL holds one)")
	fs.StringVar(&cfg.WebhookSecretFile, "webhook-secret-file", "", "`file` holding the webhooks' signing secret, whsec_ and base64 (required with --webhook-url)")
	fs.StringVar(&tenantMetrics, "tenant-metrics", "", "comma-separated `tenants` (at most 64) that guardian_tenant_decisions_total counts under their own name; every other tenant counts as _other")
	pos, code, ok := c.parse(args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		c.fail(stderr, "unexpected argument %q", pos[0])
		return exitUsage
	}
	log, err := newLogger(logFormat, logLevel, stderr)
	if err != nil {
		c.fail(stderr, "%v", err)
		return exitUsage
	}
	if cfg.FleetSize < 1 {
		c.fail(stderr, "--fleet-size must be at least 1")
		return exitUsage
	}
	if cfg.StoreTimeout <= 0 {
		c.fail(stderr, "--store-timeout must be positive")
		return exitUsage
	}
	if cfg.AttemptTTL <= 0 {
		c.fail(stderr, "--attempt-ttl must be positive")
		return exitUsage
	}
	if cfg.Normalizer, err = normalizer(accountFold, region); err != nil {
		c.fail(stderr, "%v", err)
		return exitUsage
	}
	if cfg.TenantMetrics, err = tenantList(tenantMetrics); err != nil {
		c.fail(stderr, "--tenant-metrics: %v", err)
		return exitUsage
	}
	signing, haveKey, err := keys.loadAll()
	if err != nil {
		c.fail(stderr, "%v", err)
		return exitUsage
	}
	if !haveKey {
		signing = []secret.Key{secret.Generate()}
	}
	key := signing[0]
	cfg.SigningKey, cfg.SigningKeyFile = key, keys.keyFile
	if keys.keyFile == "" {
		// The server reads a key file itself, again on every reload.
		cfg.PreviousSigningKeys = signing[1:]
	}
	if prev, ok, err := previousKey.loadAll(); err != nil {
		c.fail(stderr, "%v", err)
		return exitUsage
	} else if ok {
		cfg.PreviousSigningKeys = append(cfg.PreviousSigningKeys, prev...)
	}
	if hk, ok, err := hashKey.load(); err != nil {
		c.fail(stderr, "%v", err)
		return exitUsage
	} else if ok {
		cfg.HashKey = hk
	}
	cfg.Logger = log
	redisstore.RouteLogs(log)
	switch decisionLog {
	case "":
	case "-":
		cfg.DecisionLog = stdout
	default:
		f, err := os.OpenFile(decisionLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(stderr, "guardian serve: --decision-log:", err)
			return exitFailure
		}
		defer f.Close()
		cfg.DecisionLog = f
	}
	srv, err := server.New(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitFailure
	}
	if !haveKey {
		// Only once the rules loaded: a start that fails prints no token.
		tok, err := tokens.NewService(key).Issue(tokens.ScopeAdmin, "dev", 24*time.Hour, time.Now())
		if err != nil {
			log.Error("cannot start", "err", err)
			return exitFailure
		}
		log.Warn("DEVELOPMENT MODE: no --signing-key or --signing-key-file (GUARDIAN_SIGNING_KEY); using an ephemeral key. Tokens, attempt ids and device tokens die with this process and no other instance can verify them. Never run this in production.")
		fmt.Fprintf(stderr, "\n  development token (scope admin, also valid for check, 24h):\n  %s\n\n", tok)
	}
	return serveUntilSignalled(ctx, srv, log)
}

// urlList is a repeatable flag of URLs.
type urlList []string

func (u *urlList) String() string { return strings.Join(*u, " ") }

// Set adds one URL.
func (u *urlList) Set(v string) error {
	*u = append(*u, v)
	return nil
}

// normalizer builds the key normaliser of --account-fold and
// --default-region.
func normalizer(fold, region string) (*keys.Normalizer, error) {
	if fold != "" && fold != "accents" {
		return nil, fmt.Errorf("--account-fold: %q is not accents", fold)
	}
	n, err := keys.NewNormalizer(keys.Options{FoldAccents: fold == "accents", DefaultRegion: region})
	if err != nil {
		return nil, fmt.Errorf("--default-region: %w", err)
	}
	return n, nil
}

// serveUntilSignalled runs the instance until SIGTERM or SIGINT (drain, exit
// 0), reloading the rules, the signing keys, the certificate and the
// breached-password filter on SIGHUP.
func serveUntilSignalled(ctx context.Context, srv *server.Server, log *slog.Logger) int {
	if err := srv.Start(); err != nil {
		log.Error("cannot start", "err", err)
		return exitFailure
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				srv.Hangup() // logs what it reloaded and what it refused
				continue
			}
			log.Info("draining", "signal", sig.String())
		case <-ctx.Done():
		}
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil {
			log.Error("shutdown", "err", err)
			return exitFailure
		}
		return exitOK
	}
}

const tokenHelp = `Usage: guardian token --scope check|admin [flags]

Prints one service token, signed with the signing key serve uses (the first
of the key file): the token alone, one line on stdout. Scope check calls
/v1/check and /v1/report; scope admin also calls the admin API. Each token
has a jti of its own, what POST /v1/tokens/revoke names it by: --print-jti
writes it, with the expiry, to stderr. --tenant makes a tenant's token:
its checks, reports, status, resets, lists and pseudonyms see that tenant's
accounts, recipients and secrets alone (address and global rules are every
tenant's); a token without one sees the default tenant. The key flags read
the same environment variables as serve's; the others read none.
`

const tokenSigningKeyUsage = "the signing key serve uses, at least 32 bytes (required: this or --signing-key-file)"

func token(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c := newCommand("guardian token", tokenHelp)
	fs := c.fs
	var keys keyFlags
	var scope, subject, tenant string
	var ttl time.Duration
	var printJTI bool
	keys.register(c, "signing-key", tokenSigningKeyUsage)
	fs.Lookup("signing-key-file").Usage = signingKeyFileUsage
	fs.StringVar(&scope, "scope", "", "token scope: check or admin (required)")
	fs.DurationVar(&ttl, "ttl", 720*time.Hour, "how long the token is valid, at most 8760h; guardian warns once 10% of it (at most 72h) is left")
	fs.StringVar(&subject, "subject", "guardian-cli", "who the token is for (shown in admin audit logs)")
	fs.StringVar(&tenant, "tenant", "", "the tenant whose accounts the token sees: 1 to 32 of a-z, 0-9 and '-', not first or last (default: the default tenant)")
	fs.BoolVar(&printJTI, "print-jti", false, "also write \"jti=ID expires_at=RFC3339\" to stderr: what POST /v1/tokens/revoke takes")
	pos, code, ok := c.parse(args, getenv, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		c.fail(stderr, "unexpected argument %q", pos[0])
		return exitUsage
	}
	sc := tokens.Scope(scope)
	if sc != tokens.ScopeCheck && sc != tokens.ScopeAdmin {
		c.fail(stderr, "--scope must be check or admin")
		return exitUsage
	}
	if ttl <= 0 || ttl > tokens.MaxTTL {
		c.fail(stderr, "--ttl must be positive and at most 8760h")
		return exitUsage
	}
	if given(fs, "tenant") {
		if err := checkTenant(tenant); err != nil {
			c.fail(stderr, "--tenant: %v", err)
			return exitUsage
		}
	}
	signing, ok, err := keys.loadAll()
	if err != nil {
		c.fail(stderr, "%v", err)
		return exitUsage
	}
	if !ok {
		c.fail(stderr, "a signing key is required (--signing-key, --signing-key-file or GUARDIAN_SIGNING_KEY)")
		return exitUsage
	}
	svc := tokens.NewService(signing[0])
	now := time.Now()
	tok, err := svc.IssueTenant(sc, subject, tenant, ttl, now)
	if err == nil && printJTI {
		var cl tokens.Claims
		if cl, err = svc.Verify(tok, now); err == nil {
			fmt.Fprintf(stderr, "jti=%s expires_at=%s\n", cl.ID, cl.ExpiresAt.UTC().Format(time.RFC3339))
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "guardian token:", err)
		return exitFailure
	}
	fmt.Fprintln(stdout, tok)
	return exitOK
}

// maxTenantMetrics bounds --tenant-metrics, and so the tenant label's
// values.
const maxTenantMetrics = 64

// tenantList parses --tenant-metrics: tenants' names separated by commas,
// each valid (checkTenant), at most maxTenantMetrics; "" is none.
func tenantList(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	names := strings.Split(s, ",")
	if len(names) > maxTenantMetrics {
		return nil, fmt.Errorf("%d tenants, at most %d", len(names), maxTenantMetrics)
	}
	for _, n := range names {
		if err := checkTenant(n); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// given reports whether the flag name was set on the command line.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// checkTenant checks a tenant's name (keys.CheckTenant), its error without
// the package's prefix.
func checkTenant(name string) error {
	if err := keys.CheckTenant(name); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), keys.ErrInvalidTenant.Error()+": "))
	}
	return nil
}

const rulesHelp = `Usage: guardian rules check [FILE] [--proxy FILE]
       guardian rules explain [--format table|json] [FILE]

Validates a rules file, a proxy file given with --proxy, or both: prints
every error as FILE:LINE: message on stderr. Exit status: 0 valid, 2
invalid.
`

func rulesCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "explain" {
		return explainCmd(args[1:], stdout, stderr)
	}
	c := newCommand("guardian rules check", rulesHelp)
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			c.printHelp(stdout)
			return exitOK
		}
		c.fail(stderr, "want 'guardian rules check FILE'")
		return exitUsage
	}
	var proxyPath string
	c.fs.StringVar(&proxyPath, "proxy", "", "also validate this proxy `file` (guardian serve --proxy)")
	pos, code, ok := c.parse(args[1:], nil, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) > 1 || (len(pos) == 0 && proxyPath == "") {
		c.fail(stderr, "want one rules file, a --proxy file, or both")
		return exitUsage
	}
	valid := true
	if len(pos) == 1 {
		set := loadRulesFile(pos[0], stderr)
		if valid = set != nil; valid {
			fmt.Fprintf(stdout, "%s: %d rules, valid, hash %s\n", pos[0], len(set.Rules), set.Hash())
			if l := set.Lists; l.Len() > 0 {
				fmt.Fprintf(stdout, "%s: lists: %d deny and %d allow entries, valid\n", pos[0], len(l.Deny), len(l.Allow))
			}
		}
	}
	if proxyPath != "" {
		f := loadProxyFile(proxyPath, stderr)
		if f == nil {
			valid = false
		} else {
			routes := 0
			for _, p := range f.Proxies {
				routes += len(p.Routes)
			}
			fmt.Fprintf(stdout, "%s: %d proxies, %d routes, valid\n", proxyPath, len(f.Proxies), routes)
		}
	}
	if !valid {
		return exitUsage
	}
	return exitOK
}

// loadProxyFile loads a proxy file, printing its errors, FILE:LINE:
// message, on stderr; nil when it is not valid.
func loadProxyFile(path string, stderr io.Writer) *gateway.File {
	f, err := gateway.Load(path)
	if err == nil {
		return f
	}
	var errs gateway.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Fprintln(stderr, e.Error())
		}
	} else {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		fmt.Fprintf(stderr, "%s: cannot read the proxy file: %v\n", path, err)
	}
	return nil
}
