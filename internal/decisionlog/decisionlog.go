// Package decisionlog writes guardian's decision log: one line per check and
// per report, in the replay format (package event, docs/operations.md), so that
// production traffic can be replayed through candidate rules with guardian
// replay. It is opt-in (guardian serve --decision-log).
//
// No identifier is ever written in clear. Each is replaced by a pseudonym
// keyed from the signing key, which keeps the grouping the rules count by,
// so a replay of the log limits the same keys production did:
//   - an account becomes its pseudonym (keys.Hasher.Pseudonym), "h-" and
//     22 base64url characters, the one audit lines, the console and webhooks
//     name it by: "Alice" and "alice" are one account in the log as in
//     production, and a replay keeps a pseudonym as it is (no case folding);
//   - a recipient, phone or e-mail, becomes its pseudonym of kind
//     recipient, which a replay accepts where a recipient is expected;
//   - an address becomes another address of its family under a keyed
//     prefix-preserving permutation: two addresses share exactly as many
//     leading bits as their pseudonyms, so an IPv6 /64 stays one /64, an
//     IPv4 /24 one /24, whatever prefix a rule replayed later uses. The
//     pseudonym looks like an address but is not the client's.
//
// Pseudonyms depend on the signing key only: the logs of a fleet's
// instances can be merged, and rotating the key starts new pseudonyms. What
// a reader of the log can still learn is the structure: how often one
// pseudonym appears, which addresses share a network.
//
// A check's event id is a keyed hash of its attempt id, and a report names
// the same hash, so the two meet in a replay; a check without an attempt id
// (slowed or blocked) gets a random id. A report line names its check's
// event id and the outcome reported, so a replay knows how each attempt
// went. Only what guardian decided is logged: a request it refused with an
// error is not, nor is a report it refused. Device tokens are not logged: a
// replay treats every check as from an untrusted device.
//
// A check's secret fingerprint is never logged. Its pseudonym is:
// "h-" and 32 hex digits of a keyed hash of the guess guardian counts the
// fingerprint by (itself a keyed hash of the fingerprint, package keys),
// the same for equal fingerprints whatever the account, so that a replay
// applies key: secret rules and sees repeated guesses as production did.
// It lets a reader of the log see which checks guessed the same secret,
// not test a password: that takes the auth service's fingerprint key and
// guardian's hash key both. A line's ts is when it was logged, to the
// millisecond, just after the decision.
//
// Lines are buffered in memory and written by a background goroutine every
// second, when 64 KiB are waiting, and on Close. A check never waits for the
// output: while it is slow, up to 8 MiB wait; beyond that, and after a write
// error, lines are dropped and counted (guardian_decision_log_dropped_total),
// and the first write error is logged. A decision log never fails a check.
package decisionlog

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/requestid"
	"github.com/guardian-sec/guardian/internal/secret"
)

const (
	// flushAt is how many buffered bytes wake the writer before its tick.
	flushAt = 64 << 10
	// maxBuffered is how many bytes may wait for the output; lines beyond
	// it are dropped.
	maxBuffered = 8 << 20
	// defaultFlushEvery is Config.FlushEvery when it is not set.
	defaultFlushEvery = time.Second
)

// Config configures a Log. Out and Key are required.
type Config struct {
	// Out receives the lines. It is written by one goroutine at a time.
	Out io.Writer
	// Key keys the pseudonyms: the instance's hash key, so that every
	// instance of a fleet writes the same ones.
	Key secret.Key
	// Hasher is the instance's one Hasher of Key, which the pseudonyms of
	// accounts, recipients and events are hashed with. Nil: one of the
	// Log's own.
	Hasher *keys.Hasher
	// Normalizer normalises accounts and recipients before they are
	// pseudonymised, as the engine does (nil: the defaults).
	Normalizer *keys.Normalizer
	// Logger receives the first write error (default slog.Default()).
	Logger *slog.Logger
	// Registerer, when set, registers guardian_decision_log_dropped_total.
	Registerer prometheus.Registerer
	// FlushEvery is how often buffered lines are written (default 1s).
	FlushEvery time.Duration
	// Now stamps the lines (default time.Now).
	Now func() time.Time
}

// Log is a decision log. Lines are stamped and buffered in the order their
// calls take the log's lock, so timestamps never go backwards within a
// log (as long as the clock does not). A Log is safe for concurrent use;
// build one with New and Close it when done.
type Log struct {
	out     io.Writer
	log     *slog.Logger
	now     func() time.Time
	names   *pseudonyms
	norm    *keys.Normalizer
	dropped atomic.Uint64
	metric  prometheus.Counter

	// mu guards the buffer, which checks append to.
	mu     sync.Mutex
	buf    []byte
	lines  int
	closed bool

	// wmu serialises writes to out, so buffers go out in order; spare and
	// failed are its.
	wmu    sync.Mutex
	spare  []byte
	failed bool

	kick      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a Log writing to cfg.Out, and starts its writer.
func New(cfg Config) *Log {
	l := &Log{
		out:   cfg.Out,
		log:   cfg.Logger,
		now:   cfg.Now,
		names: newPseudonyms(cfg.Key, cfg.Hasher),
		norm:  cfg.Normalizer,
		kick:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.now == nil {
		l.now = time.Now
	}
	if cfg.Registerer != nil {
		l.metric = promauto.With(cfg.Registerer).NewCounter(prometheus.CounterOpts{
			Name: "guardian_decision_log_dropped_total",
			Help: "Decision-log lines lost to a write error, a full buffer or a closed log.",
		})
	}
	every := cfg.FlushEvery
	if every <= 0 {
		every = defaultFlushEvery
	}
	go l.run(every)
	return l
}

func (l *Log) run(every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-l.kick:
		}
		_ = l.Flush() // Flush logs and counts its errors.
	}
}

// Check logs a check that the engine decided as d, with its decision, the
// rule that decided and the request id ctx carries, its identifiers
// normalised with the Log's Normalizer, in the tenant ctx carries
// (keys.TenantOf): the line names the tenant, and its account, recipient
// and secret pseudonyms are the tenant's own.
func (l *Log) Check(ctx context.Context, req engine.CheckRequest, d engine.Decision) {
	ids, err := req.Normalise(l.norm)
	if err != nil {
		return // The engine refuses such a check; it was not decided.
	}
	l.Checked(ctx, &req, &ids, d)
}

// Checked is Check of a check whose identifiers ids the engine normalised
// already (engine.Engine.Normalise): a check is normalised once.
func (l *Log) Checked(ctx context.Context, req *engine.CheckRequest, ids *engine.Identifiers, d engine.Decision) {
	tenant := keys.TenantOf(ctx)
	ev := event.Event{Kind: event.Check, Flow: req.Flow, IP: l.names.ip(ids.IP).String(), Cost: req.Cost, Tenant: tenant,
		Decision: d.Action, Rule: d.Rule, RequestID: requestid.From(ctx), Route: RouteFrom(ctx)}
	if d.AttemptID != "" {
		ev.ID = l.names.event(d.AttemptID)
	} else {
		ev.ID = randomID()
	}
	names := l.names.forTenant(tenant)
	if ids.Account != "" {
		ev.Account = names.account(ids.Account)
	}
	if ids.Recipient != "" {
		ev.Recipient = names.recipient(ids.Recipient)
	}
	if req.SecretFingerprint != "" {
		ev.SecretFingerprint = names.secret(req.SecretFingerprint)
	}
	l.append(&ev)
}

// Report logs a report of attemptID that the engine recorded, with the
// request id ctx carries.
func (l *Log) Report(ctx context.Context, attemptID string, outcome engine.Outcome) {
	l.append(&event.Event{Kind: event.Report, ID: l.names.event(attemptID), Outcome: outcome, RequestID: requestid.From(ctx)})
}

type routeKey struct{}

// WithRoute returns ctx carrying the gateway route a check came through,
// which the check's line names (route).
func WithRoute(ctx context.Context, route string) context.Context {
	return context.WithValue(ctx, routeKey{}, route)
}

// RouteFrom returns the route ctx carries (WithRoute), or "".
func RouteFrom(ctx context.Context) string {
	r, _ := ctx.Value(routeKey{}).(string)
	return r
}

// randomID returns 16 random bytes in unpadded base64url, the form of every
// event id the log writes.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// append stamps ev and buffers its line.
func (l *Log) append(ev *event.Event) {
	l.mu.Lock()
	if l.closed || len(l.buf) >= maxBuffered {
		l.mu.Unlock()
		l.drop(1)
		return
	}
	ev.Time = l.now()
	l.buf = ev.AppendJSON(l.buf)
	l.lines++
	full := len(l.buf) >= flushAt
	l.mu.Unlock()
	if full {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

func (l *Log) drop(n int) {
	l.dropped.Add(uint64(n))
	if l.metric != nil {
		l.metric.Add(float64(n))
	}
}

// Dropped returns how many lines were lost so far.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// Flush writes every buffered line now. On a write error the lines are
// dropped and counted, the first error is logged, and the error returned.
func (l *Log) Flush() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	l.mu.Lock()
	out, n := l.buf, l.lines
	l.buf, l.lines = l.spare[:0], 0
	l.mu.Unlock()
	var err error
	if len(out) > 0 {
		if _, err = l.out.Write(out); err != nil {
			l.drop(n)
			if !l.failed {
				l.failed = true
				l.log.LogAttrs(context.Background(), slog.LevelError, "decision log: write failed; lines are dropped and counted in guardian_decision_log_dropped_total",
					slog.String("err", err.Error()))
			}
		}
	}
	if cap(out) <= 2*flushAt {
		l.spare = out[:0]
	} else {
		l.spare = nil // a burst's buffer is not kept
	}
	return err
}

// Close stops the writer and writes what is buffered. Lines logged after
// Close are dropped. It does not close Out.
func (l *Log) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.stop)
		<-l.done
		l.mu.Lock()
		l.closed = true
		l.mu.Unlock()
		err = l.Flush()
	})
	return err
}

// Engine is an engine whose checks and reports are written to a Log. It
// has every method of *engine.Engine; Check and Report log what they
// decided and recorded.
type Engine struct {
	*engine.Engine
	log *Log
}

// Wrap returns e logging to l.
func Wrap(e *engine.Engine, l *Log) *Engine {
	return &Engine{Engine: e, log: l}
}

// Check decides req as engine.Engine.Check does, and logs it when decided,
// normalising it once for both.
func (e *Engine) Check(ctx context.Context, req engine.CheckRequest) (engine.Decision, error) {
	ids, err := e.Engine.Normalise(&req)
	if err != nil {
		return engine.Decision{}, err
	}
	d, err := e.Engine.Decide(ctx, &req, &ids)
	if err == nil {
		e.log.Checked(ctx, &req, &ids, d)
	}
	return d, err
}

// Report records a report as engine.Engine.Report does, and logs it when
// recorded.
func (e *Engine) Report(ctx context.Context, attemptID string, outcome engine.Outcome) (engine.ReportResult, error) {
	res, err := e.Engine.Report(ctx, attemptID, outcome)
	if err == nil {
		e.log.Report(ctx, attemptID, outcome)
	}
	return res, err
}
