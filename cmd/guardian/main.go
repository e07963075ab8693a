// Command guardian is the authentication-abuse protection service: `guardian
// serve` runs it, `guardian token` prints a service token, `guardian rules
// check` validates a rules file, `guardian replay` runs recorded traffic
// through rules offline. See CONTRACT.md section 1.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/tokens"
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

const usage = `usage:
  guardian [serve] [flags]                      run the service
  guardian token --scope check|admin [flags]    print a service token
  guardian rules check FILE                     validate a rules file
  guardian replay --rules FILE EVENTS.jsonl     what each rule would do to recorded traffic
  guardian replay --compare OLD NEW EVENTS      what NEW would decide differently from OLD
Run 'guardian serve -h', 'guardian token -h' or 'guardian replay -h' for the flags.
`

// run is guardian's command line, with its environment passed in for tests.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, getenv, stdout, stderr)
	case "token":
		return token(args, getenv, stdout, stderr)
	case "rules":
		return rulesCmd(args, stdout, stderr)
	case "replay":
		return replayCmd(ctx, args, getenv, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "guardian: unknown command %q\n%s", cmd, usage)
	return exitUsage
}

// keyFlags are a secret's pair of flags, --NAME and --NAME-file.
type keyFlags struct {
	name, key, keyFile string
}

func (k *keyFlags) register(fs *flag.FlagSet, name, usage string) {
	k.name = name
	fs.StringVar(&k.key, name, "", usage)
	fs.StringVar(&k.keyFile, name+"-file", "", "file holding the "+strings.ReplaceAll(name, "-", " "))
}

// load returns the configured key, or ok=false when none is configured.
func (k *keyFlags) load() (key secret.Key, ok bool, err error) {
	raw := k.key
	if k.keyFile != "" {
		if raw != "" {
			return secret.Key{}, false, fmt.Errorf("set --%s or --%s-file, not both", k.name, k.name)
		}
		b, err := os.ReadFile(k.keyFile)
		if err != nil {
			return secret.Key{}, false, err
		}
		raw = strings.TrimRight(string(b), "\r\n")
	}
	if raw == "" {
		return secret.Key{}, false, nil
	}
	key, err = secret.New([]byte(raw))
	if err != nil {
		return secret.Key{}, false, fmt.Errorf("--%s: %w", k.name, err)
	}
	return key, true, nil
}

const signingKeyUsage = "secret (at least 32 bytes) for service tokens, attempt ids and device tokens; empty: development mode with an ephemeral key"

// parse parses args into fs, then fills every flag not given on the command
// line from its environment variable (--redis-url ⇔ GUARDIAN_REDIS_URL): a
// flag wins over the environment.
func parse(fs *flag.FlagSet, args []string, getenv func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		env := "GUARDIAN_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(env); v != "" {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", env, e)
			}
		}
	})
	return err
}

func newLogger(format string, w io.Writer) (*slog.Logger, error) {
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not json or text", format)
}

func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("guardian serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg server.Config
	var keys, previousKey, hashKey keyFlags
	var logFormat, decisionLog string
	fs.StringVar(&cfg.Addr, "addr", ":8080", "listen address")
	fs.StringVar(&cfg.RulesPath, "rules", "", "rules file (YAML); empty: the built-in default rules")
	fs.StringVar(&cfg.RedisURL, "redis-url", "", "the security store: redis://host:port/db, rediss://…, or host:port,host:port,… for Redis Cluster; empty: embedded in-memory store (one instance only)")
	fs.StringVar(&cfg.Redis.CAFile, "redis-ca-file", "", "PEM file of the CAs that sign the Redis server's certificate (rediss:// only); empty: the system roots")
	fs.StringVar(&cfg.Redis.CertFile, "redis-cert-file", "", "PEM client certificate to present to Redis (rediss:// only; with --redis-key-file)")
	fs.StringVar(&cfg.Redis.KeyFile, "redis-key-file", "", "PEM key of --redis-cert-file")
	fs.StringVar(&cfg.Redis.PasswordFile, "redis-password-file", "", "file whose first line is the Redis password, in place of one in --redis-url (the user stays the URL's)")
	keys.register(fs, "signing-key", signingKeyUsage)
	previousKey.register(fs, "previous-signing-key", "during a key rotation, the signing key being replaced: what it signed still verifies; never used to sign")
	hashKey.register(fs, "hash-key", "secret (at least 32 bytes) that keys the hashes of accounts, addresses and recipients; empty: derived from the signing key. Set it to rotate the signing key without resetting every limit")
	fs.DurationVar(&cfg.StoreTimeout, "store-timeout", 5*time.Millisecond, "deadline of one store call")
	fs.IntVar(&cfg.FleetSize, "fleet-size", 1, "how many guardian instances share the store; the local fallback divides limits by it")
	fs.StringVar(&logFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&cfg.PprofAddr, "pprof", "", "serve Go pprof profiles on this address (e.g. 127.0.0.1:6060), apart from the API; empty: off")
	fs.StringVar(&decisionLog, "decision-log", "", "append a decision log (one JSON line per check and report, in the replay format, identifiers pseudonymised) to this file, or - for stdout; empty: none")
	if err := parse(fs, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintln(stderr, "guardian:", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "guardian: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	log, err := newLogger(logFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "guardian:", err)
		return exitUsage
	}
	if cfg.FleetSize < 1 {
		fmt.Fprintln(stderr, "guardian: --fleet-size must be at least 1")
		return exitUsage
	}
	if cfg.StoreTimeout <= 0 {
		fmt.Fprintln(stderr, "guardian: --store-timeout must be positive")
		return exitUsage
	}
	key, ok, err := keys.load()
	if err != nil {
		fmt.Fprintln(stderr, "guardian:", err)
		return exitUsage
	}
	if !ok {
		key = secret.Generate()
		tok, err := tokens.NewService(key).Issue(tokens.ScopeAdmin, "dev", 24*time.Hour, time.Now())
		if err != nil {
			fmt.Fprintln(stderr, "guardian:", err)
			return exitFailure
		}
		log.Warn("DEVELOPMENT MODE: no --signing-key; using an ephemeral key. Tokens, attempt ids and device tokens die with this process and no other instance can verify them. Never run this in production.")
		fmt.Fprintf(stderr, "\n  development token (scope admin, also valid for check, 24h):\n  %s\n\n", tok)
	}
	cfg.SigningKey = key
	if prev, ok, err := previousKey.load(); err != nil {
		fmt.Fprintln(stderr, "guardian:", err)
		return exitUsage
	} else if ok {
		cfg.PreviousSigningKeys = []secret.Key{prev}
	}
	if hk, ok, err := hashKey.load(); err != nil {
		fmt.Fprintln(stderr, "guardian:", err)
		return exitUsage
	} else if ok {
		cfg.HashKey = hk
	}
	cfg.Logger = log
	switch decisionLog {
	case "":
	case "-":
		cfg.DecisionLog = stdout
	default:
		f, err := os.OpenFile(decisionLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(stderr, "guardian: --decision-log:", err)
			return exitFailure
		}
		defer f.Close()
		cfg.DecisionLog = f
	}
	return serveUntilSignalled(ctx, cfg, log)
}

// serveUntilSignalled runs the instance until SIGTERM or SIGINT (drain, exit
// 0), reloading the rules on SIGHUP.
func serveUntilSignalled(ctx context.Context, cfg server.Config, log *slog.Logger) int {
	srv, err := server.New(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		return exitFailure
	}
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
				_, _ = srv.Reload() // Reload logs both outcomes.
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

func token(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("guardian token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var keys keyFlags
	var scope, subject string
	var ttl time.Duration
	keys.register(fs, "signing-key", signingKeyUsage)
	fs.StringVar(&scope, "scope", "", "token scope: check or admin (required)")
	fs.DurationVar(&ttl, "ttl", 24*time.Hour, "how long the token is valid")
	fs.StringVar(&subject, "subject", "guardian-cli", "who the token is for (shown in admin audit logs)")
	if err := parse(fs, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintln(stderr, "guardian token:", err)
		return exitUsage
	}
	sc := tokens.Scope(scope)
	if sc != tokens.ScopeCheck && sc != tokens.ScopeAdmin {
		fmt.Fprintln(stderr, "guardian token: --scope must be check or admin")
		return exitUsage
	}
	if ttl <= 0 {
		fmt.Fprintln(stderr, "guardian token: --ttl must be positive")
		return exitUsage
	}
	key, ok, err := keys.load()
	if err != nil {
		fmt.Fprintln(stderr, "guardian token:", err)
		return exitUsage
	}
	if !ok {
		fmt.Fprintln(stderr, "guardian token: a signing key is required (--signing-key, --signing-key-file or GUARDIAN_SIGNING_KEY)")
		return exitUsage
	}
	tok, err := tokens.NewService(key).Issue(sc, subject, ttl, time.Now())
	if err != nil {
		fmt.Fprintln(stderr, "guardian token:", err)
		return exitFailure
	}
	fmt.Fprintln(stdout, tok)
	return exitOK
}

func rulesCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "check" {
		fmt.Fprint(stderr, "usage: guardian rules check FILE\n")
		return exitUsage
	}
	set, err := rules.Load(args[1], time.Now())
	if err != nil {
		var errs rules.Errors
		if errors.As(err, &errs) {
			for _, e := range errs {
				fmt.Fprintln(stderr, e.Error())
			}
		} else {
			fmt.Fprintf(stderr, "%s:0: %v\n", args[1], err)
		}
		return exitUsage
	}
	fmt.Fprintf(stdout, "%s: %d rules, valid\n", args[1], len(set.Rules))
	return exitOK
}
