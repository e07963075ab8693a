// Package replay runs recorded traffic through a rule set offline: the
// events of the replay format (package event, written by guardian's
// decision log or by hand) go through the real engine on the embedded
// store, in file order, on a simulated clock that reads each event's own
// timestamp, so a day of traffic replays in seconds. The same rules and
// events always give the same output, byte for byte: the replay's own state
// is keyed with a fixed key (stateKey), so even its estimates of distinct
// counts are the same run after run.
//
// Several files (the decision logs of a fleet's instances, one per
// instance) are merged by timestamp as they are read: a k-way merge of the
// files, each read once, in order, holding the events of one instant (at
// most maxBatch of them), so memory grows with the number of files and
// never with their length. Of the events the files hold for one instant,
// all its checks go before its reports (a report cannot precede its check,
// and logs stamp to the millisecond), each kind in the order the files
// were given and each file's events in its own order.
//
// Run answers "what would each of these rules do to this traffic". It
// counts every rule on its own, as if it were the only rule: it replays the
// set with every rule in shadow mode, where a rule spends only its own state
// whenever it fits, exactly as it would were it alone and enforced. So a
// rule's counts do not depend on the rules beside it, and a rule that would
// never trip because another stops the traffic first still shows what it
// would catch. What the set decides as a whole, with its rules enforced
// together, is what Compare reports.
//
// Run also splits each rule's would-be decisions by how the attempt went,
// as the events report it: later_success (the check's attempt was
// reported a success: a user who got in, whom the rule would have stood in
// the way of), failure, and unreported (no report within the replay's
// memory of the check, including every check production itself slowed or
// blocked, which had no attempt to report).
//
// Compare answers "what changes if NEW replaces OLD". It replays both sets
// side by side, each as written (shadow rules stay shadow), and counts the
// checks whose final decision or deciding rule differs, by rule.
//
// Replay follows the production engine in everything but the clock:
//   - A report goes to the check whose id it names, with that check's
//     attempt id. A report naming no check seen in the last 20 minutes of
//     the replay's clock (twice the life of an attempt id; older entries are
//     forgotten to keep memory bounded), a check the rules slowed or
//     blocked (it had no attempt id), an expired attempt or one already
//     reported is counted in ReportStats and otherwise ignored. A check
//     never reported counts as a failure, as in production.
//   - The clock never runs backwards, as no store's does: an event older
//     than the one before it is replayed at the time of the one before it,
//     and counted as out of order.
//   - A line that is not an event of the format, or a check guardian would
//     have refused with a 400, is skipped, handed to Config.Malformed with
//     its line number, and counted as malformed. It is never fatal; only a
//     read error or a cancelled context stops a replay.
//   - Checks carry no device token, so every check is replayed as from an
//     untrusted device. A check's secret_fingerprint (in a decision log,
//     its pseudonym) is replayed as production received it, so key: secret
//     rules count it and an account's repeated guesses spend as they did.
//   - A check of a tenant (tenant in the event) counts in that tenant, as
//     production counted it (package keys), and its report settles there.
//
// Memory stays bounded whatever the length of the input: the store forgets
// keys once they are back to full, reports are matched within the window
// above, and distinct keys are counted exactly up to 65,536 per rule and
// estimated (HyperLogLog, about 1% error) beyond.
//
// Keys are shown as the events carry them, normalised (an account, an IP
// prefix, a recipient): events from the decision log carry pseudonyms
// only, never a clear identifier.
package replay

import (
	"bufio"
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/tokens"
)

const (
	// MaxLine is the longest line read, newline excluded; a longer line is
	// skipped as malformed.
	MaxLine = 64 << 10
	// defaultProgressEvery is Config.ProgressEvery when it is not set.
	defaultProgressEvery = 100_000
	// firstKeys is how many keys a RuleSummary lists in FirstLimited.
	firstKeys = 5
	// pendingFor is how long a check stays known to its report: twice the
	// life of an attempt id, so a late report is told apart as expired.
	pendingFor = 2 * tokens.AttemptTTL
	// maxPending bounds the checks waiting for a report, whatever the
	// traffic; the oldest are forgotten first.
	maxPending = 1 << 20
	// sweepEvery is how many checks pass between sweeps of the store.
	sweepEvery = 1 << 16
	// storeKeys is the store's bound: far above what a replay holds at
	// once, since keys leave as they come back to full, so that a replay
	// never meets the full store's wall, whose effect would depend on the
	// order keys happen to be swept in.
	storeKeys = 1 << 28
)

// stateKey keys every replay's state: attempt ids, and the subjects keys
// hash to. It only names state inside one replay, none of which is kept, so
// it needs no secrecy; it is fixed, derived from a constant, so that the same
// events hash to the same subjects every run, and what depends on those
// hashes (distinct-count estimates, which keys share a sketch register) is
// the same run after run: a replay's output is a function of its rules and
// events alone.
var stateKey = func() secret.Key {
	k, err := secret.New([]byte("guardian replay: the fixed key of a replay's own state, v1"))
	if err != nil {
		panic("replay: " + err.Error()) // a constant longer than secret.MinLen
	}
	return k
}()

// ErrRejected reports a check guardian would have answered with a 400 (see
// engine.CheckRequest.Validate): an unknown flow, an invalid ip, account or
// recipient, a cost out of range, otp_send without a recipient.
var ErrRejected = errors.New("replay: check rejected")

// Config tunes a replay. The zero value is ready to use.
type Config struct {
	// Malformed, when set, is called for every line skipped as malformed,
	// in line order. Its error wraps event.ErrMalformed,
	// event.ErrUnknownType or ErrRejected.
	Malformed func(*LineError)
	// Progress, when set, is called every ProgressEvery lines and after
	// the last one.
	Progress func(Progress)
	// ProgressEvery is how many lines pass between calls of Progress;
	// zero or less means 100,000.
	ProgressEvery int64
}

// LineError is a line a replay skipped.
type LineError struct {
	// Source is the Name of the Source the line is in.
	Source string
	// Line is the line's number in its source, from 1.
	Line int64
	Err  error
}

// Error returns "line N: reason", or "SOURCE:N: reason" for a named
// source.
func (e *LineError) Error() string {
	if e.Source != "" {
		return fmt.Sprintf("%s:%d: %v", e.Source, e.Line, e.Err)
	}
	return fmt.Sprintf("line %d: %v", e.Line, e.Err)
}

// Source is one input of a replay: a file of events, read once to its end.
type Source struct {
	// Name names the source in LineError and in read errors, a file's
	// path; it may be empty.
	Name string
	R    io.Reader
}

// Unwrap returns the reason the line was skipped.
func (e *LineError) Unwrap() error { return e.Err }

// Progress is how far a replay has read.
type Progress struct {
	// Lines and Bytes count what was read so far, from every source.
	Lines, Bytes int64
	// Time is the replay's clock.
	Time time.Time
}

// Run replays the events read from r through set, every rule counted on its
// own (see the package documentation), and returns what each rule would
// have done. Malformed lines never make it fail: it fails when r cannot be
// read or ctx ends.
func Run(ctx context.Context, set *rules.Set, r io.Reader, cfg Config) (*Summary, error) {
	return RunSources(ctx, set, []Source{{R: r}}, cfg)
}

// RunSources is Run over the events of several sources merged by
// timestamp (see the package documentation).
func RunSources(ctx context.Context, set *rules.Set, srcs []Source, cfg Config) (*Summary, error) {
	shadowed := set.InMode(rules.Shadow)
	d := newDriver(cfg, shadowed)
	tracks := make(map[string]*track, len(set.Rules))
	for i := range shadowed.Rules {
		tracks[shadowed.Rules[i].Name] = &track{rule: &shadowed.Rules[i]}
	}
	d.onCheck = func(ev *event.Event, ids *engine.Identifiers, ds []engine.Decision, trips []trip) []trip {
		for _, st := range ds[0].Shadow {
			t := tracks[st.Rule]
			if t == nil {
				continue
			}
			trips = append(trips, trip{track: t, action: st.Action})
			key := keyOf(t.rule, ev, ids)
			if t.keys.add(key) && len(t.first) < firstKeys {
				t.first = append(t.first, Hit{Key: key, At: d.clock.now, Decision: st.Action})
			}
		}
		return trips
	}
	d.onSettle = func(trips []trip, o Outcome) {
		for _, tr := range trips {
			tr.track.outcomes.of(o).add(tr.action)
		}
	}
	if err := d.run(ctx, srcs); err != nil {
		return nil, err
	}

	counts := make(map[string]shadow.RuleReport)
	for _, rr := range d.sims[0].book.Report() {
		counts[rr.Rule] = rr
	}
	s := &Summary{Input: d.input, Reports: d.sims[0].reports, Rules: make([]RuleSummary, 0, len(set.Rules))}
	for i := range set.Rules {
		r := &set.Rules[i]
		c, t := counts[r.Name], tracks[r.Name]
		n, exact := t.keys.count()
		first := t.first
		if first == nil {
			first = []Hit{}
		}
		s.Rules = append(s.Rules, RuleSummary{
			Rule:           r.Name,
			Mode:           r.Mode,
			Checks:         c.Evaluated,
			WouldSlow:      c.WouldSlow,
			WouldBlock:     c.WouldBlock,
			WouldChallenge: c.WouldChallenge,
			KeysHit:        n,
			KeysHitExact:   exact,
			FirstLimited:   first,
			ByOutcome:      t.outcomes,
		})
	}
	return s, nil
}

// keyOf is the key rule r counts a check by, as the events name it: the
// fingerprint's pseudonym for a key: secret rule, whose key the engine
// derives from the fingerprint itself, ids.Key otherwise.
func keyOf(r *rules.Rule, ev *event.Event, ids *engine.Identifiers) string {
	if r.Key == rules.KeySecret {
		return ev.SecretFingerprint
	}
	return ids.Key(r).String()
}

// Compare replays the events read from r through the sets before and after
// side by side, each as written, and returns the checks after decides
// differently. Malformed lines never make it fail: it fails when r cannot be
// read or ctx ends.
func Compare(ctx context.Context, before, after *rules.Set, r io.Reader, cfg Config) (*Comparison, error) {
	return CompareSources(ctx, before, after, []Source{{R: r}}, cfg)
}

// CompareSources is Compare over the events of several sources merged by
// timestamp (see the package documentation).
func CompareSources(ctx context.Context, before, after *rules.Set, srcs []Source, cfg Config) (*Comparison, error) {
	d := newDriver(cfg, before, after)
	changes := make(map[[2]Verdict]int64)
	byRule := make(map[string]*RuleChange)
	var order []string
	ruleChange := func(name string) *RuleChange {
		rc := byRule[name]
		if rc == nil {
			rc = &RuleChange{Rule: name}
			byRule[name] = rc
			order = append(order, name)
		}
		return rc
	}
	for _, set := range []*rules.Set{before, after} {
		for i := range set.Rules {
			ruleChange(set.Rules[i].Name)
		}
	}
	var changed int64
	d.onCheck = func(_ *event.Event, _ *engine.Identifiers, ds []engine.Decision, trips []trip) []trip {
		from := Verdict{Decision: ds[0].Action, Rule: ds[0].Rule}
		to := Verdict{Decision: ds[1].Action, Rule: ds[1].Rule}
		if from.Rule != "" {
			ruleChange(from.Rule).OldDecided++
		}
		if to.Rule != "" {
			ruleChange(to.Rule).NewDecided++
		}
		if from == to {
			return trips
		}
		changed++
		changes[[2]Verdict{from, to}]++
		if from.Rule != to.Rule {
			if to.Rule != "" {
				ruleChange(to.Rule).Gained++
			}
			if from.Rule != "" {
				ruleChange(from.Rule).Lost++
			}
		}
		return trips
	}
	if err := d.run(ctx, srcs); err != nil {
		return nil, err
	}
	c := &Comparison{
		Input:      d.input,
		OldReports: d.sims[0].reports,
		NewReports: d.sims[1].reports,
		Changed:    changed,
		Rules:      make([]RuleChange, 0, len(order)),
		Changes:    make([]Change, 0, len(changes)),
	}
	for _, name := range order {
		c.Rules = append(c.Rules, *byRule[name])
	}
	for k, n := range changes {
		c.Changes = append(c.Changes, Change{From: k[0], To: k[1], Checks: n})
	}
	sortChanges(c.Changes)
	return c, nil
}

// clock is the replay's simulated clock: it reads the time of the event
// being replayed. A replay runs on one goroutine, so it needs no lock.
type clock struct{ now time.Time }

// Now returns the clock's time.
func (c *clock) Now() time.Time { return c.now }

// sim is one rule set being replayed: a real engine on the embedded store,
// on the replay's clock.
type sim struct {
	store   *memstore.Store
	book    *shadow.Book
	eng     *engine.Engine
	reports ReportStats
}

func newSim(set *rules.Set, clk *clock, key secret.Key) *sim {
	var holder rules.Holder
	holder.Store(set)
	book := shadow.NewBook()
	book.Sync(set.ShadowNames())
	window := time.Hour
	for i := range set.Rules {
		if r := &set.Rules[i]; r.Type == rules.FailureRate {
			window = max(window, r.Per)
		}
	}
	st := memstore.New(memstore.Config{Now: clk.Now, MaxKeys: storeKeys})
	return &sim{
		store: st,
		book:  book,
		eng: engine.New(engine.Config{
			Rules:     &holder,
			Store:     st,
			Key:       key,
			Aggregate: aggregate.New(aggregate.Config{Now: clk.Now, Window: window}),
			Shadow:    book,
			Metrics:   metrics.New(prometheus.NewRegistry()),
			Now:       clk.Now,
		}),
	}
}

// driver reads the events and feeds them to every sim in step.
type driver struct {
	cfg     Config
	clock   clock
	sims    []*sim
	pending pending
	input   Input
	// lines and bytes count what was read from every source; checks
	// counts the checks replayed, for the sweeps of the sims' stores.
	lines, bytes, checks int64
	// batch is what nextTick took from the sources for one millisecond;
	// while collecting, lines that are not events join it (skip).
	batch      []ahead
	collecting bool
	// onCheck sees each check, its identifiers and the decision of every
	// sim, and returns trips with what the check's outcome must settle
	// appended.
	onCheck func(ev *event.Event, ids *engine.Identifiers, ds []engine.Decision, trips []trip) []trip
	// onSettle, when set, hears the outcome of each check onCheck returned
	// trips for, once: when its first report comes, or as unreported when
	// the check is forgotten or the replay ends.
	onSettle func(trips []trip, o Outcome)

	decisions []engine.Decision
	ids       []string
}

// trip is a would-be decision of one rule on one check, waiting for the
// check's outcome.
type trip struct {
	track  *track
	action rules.Action
}

func newDriver(cfg Config, sets ...*rules.Set) *driver {
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = defaultProgressEvery
	}
	d := &driver{cfg: cfg, decisions: make([]engine.Decision, len(sets)), ids: make([]string, len(sets))}
	for _, set := range sets {
		d.sims = append(d.sims, newSim(set, &d.clock, stateKey))
	}
	d.pending.m = make(map[string]*entry)
	d.pending.forget = func(e *entry) { d.settle(e, Unreported) }
	return d
}

// stream is one source being read: its next event, read ahead.
type stream struct {
	name string
	// order is the source's position among the sources: events of equal
	// timestamps are replayed in source order.
	order int
	lr    lineReader
	// head is the next event, read from line headLine; ok is false once
	// the source is exhausted.
	head     event.Event
	headLine int64
	ok       bool
}

// streams is a min-heap of the sources with an event ahead, by the time of
// that event, then checks before reports (logs stamp to the millisecond,
// and a report logged by one instance in the millisecond its check was
// logged by another comes after it), then by source order.
type streams []*stream

func (h streams) Len() int { return len(h) }
func (h streams) Less(i, j int) bool {
	if c := h[i].head.Time.Compare(h[j].head.Time); c != 0 {
		return c < 0
	}
	if a, b := h[i].head.Kind == event.Check, h[j].head.Kind == event.Check; a != b {
		return a
	}
	return h[i].order < h[j].order
}
func (h streams) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *streams) Push(x any)   { *h = append(*h, x.(*stream)) }
func (h *streams) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return x
}

// run replays every event of srcs, merged by timestamp: each source is
// read line by line, one event ahead, and the events of the earliest
// timestamp ahead are replayed next, one millisecond at a time (nextTick).
func (d *driver) run(ctx context.Context, srcs []Source) error {
	h := make(streams, 0, len(srcs))
	for i, src := range srcs {
		st := &stream{name: src.Name, order: i, lr: lineReader{br: bufio.NewReaderSize(src.R, MaxLine+1)}}
		if err := d.advance(ctx, st); err != nil {
			return err
		}
		if st.ok {
			h = append(h, st)
		}
	}
	heap.Init(&h)
	for len(h) > 0 {
		if err := d.nextTick(ctx, &h); err != nil {
			return err
		}
		if err := d.replayTick(ctx); err != nil {
			return err
		}
	}
	d.pending.forgetAll()
	d.input.Lines = d.lines
	if d.lines == 0 || d.lines%d.cfg.ProgressEvery != 0 {
		d.progress()
	}
	return nil
}

// maxBatch is the most events of one millisecond nextTick takes at once,
// which bounds what a replay holds in memory whatever its input: a log
// stamping more events in one millisecond (over 4 million a second, or a
// file whose timestamps do not move) is replayed a part of the millisecond
// at a time.
const maxBatch = 4096

// ahead is what was read from a source and waits to be replayed: an event,
// or a line that is not one (err).
type ahead struct {
	ev   event.Event
	err  error
	st   *stream
	line int64
}

// nextTick takes every event of the earliest timestamp ahead from the
// sources into d.batch, checks first. Logs stamp to the millisecond, and a
// report one instance logged in the millisecond its check was logged by
// another may come, in its own file, before a check of that millisecond
// the other file still holds back; a report never names a check made after
// it, so replaying a millisecond's checks first puts each report after its
// check, whatever the files. Within each kind the sources come in their
// order, each source's events in its own: the files merged replay as their
// events in one file would, sorted by time and kind. Lines that are not
// events keep their place among their source's checks, so they are told
// in the order they were read.
func (d *driver) nextTick(ctx context.Context, h *streams) error {
	d.batch = d.batch[:0]
	d.collecting = true
	defer func() { d.collecting = false }()
	at := (*h)[0].head.Time
	for len(*h) > 0 && (*h)[0].head.Time.Equal(at) && len(d.batch) < maxBatch {
		st := (*h)[0]
		d.batch = append(d.batch, ahead{ev: st.head, st: st, line: st.headLine})
		if err := d.advance(ctx, st); err != nil {
			return err
		}
		if st.ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	slices.SortStableFunc(d.batch, func(a, b ahead) int {
		return cmp.Or(cmp.Compare(a.order(), b.order()), cmp.Compare(a.st.order, b.st.order))
	})
	return nil
}

// order places what is ahead within its millisecond: checks and lines
// that are not events, then reports.
func (a *ahead) order() int {
	if a.err == nil && a.ev.Kind != event.Check {
		return 1
	}
	return 0
}

// replayTick replays what nextTick took, in order.
func (d *driver) replayTick(ctx context.Context) error {
	for i := range d.batch {
		a := &d.batch[i]
		var err error
		switch {
		case a.err != nil:
			d.skip(a.st, a.line, a.err)
		case a.ev.Kind != event.Check:
			err = d.report(ctx, &a.ev)
		default:
			err = d.check(ctx, &a.ev)
			if errors.Is(err, ErrRejected) {
				d.skip(a.st, a.line, err)
				err = nil
			} else if err == nil {
				d.swept()
			}
		}
		if err != nil {
			return fmt.Errorf("replay: %s: %w", a.st.where(a.line), err)
		}
	}
	return nil
}

// swept counts one more check replayed and sweeps the sims' stores every
// sweepEvery checks.
func (d *driver) swept() {
	if d.checks++; d.checks%sweepEvery == 0 {
		for _, s := range d.sims {
			s.store.Sweep()
		}
	}
}

// where names line n of st for an error: "line N" or "NAME:N".
func (st *stream) where(n int64) string {
	if st.name != "" {
		return fmt.Sprintf("%s:%d", st.name, n)
	}
	return fmt.Sprintf("line %d", n)
}

// advance reads st up to its next event, skipping blank and malformed
// lines, and sets st.ok to whether there is one.
func (d *driver) advance(ctx context.Context, st *stream) error {
	for {
		line, tooLong, err := st.lr.next()
		if err != nil {
			st.ok = false
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("replay: %s: %w", st.where(st.lr.lines), err)
		}
		d.lines++
		d.bytes = d.bytes - st.lr.counted + st.lr.bytes
		st.lr.counted = st.lr.bytes
		if d.lines%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if d.lines%d.cfg.ProgressEvery == 0 {
			d.progress()
		}
		if tooLong {
			d.skip(st, st.lr.lines, fmt.Errorf("%w: longer than %d bytes", event.ErrMalformed, MaxLine))
			continue
		}
		if blank(line) {
			continue
		}
		ev, err := event.Parse(line)
		if err != nil {
			d.skip(st, st.lr.lines, err)
			continue
		}
		st.head, st.headLine, st.ok = ev, st.lr.lines, true
		return nil
	}
}

func (d *driver) progress() {
	if d.cfg.Progress != nil {
		d.cfg.Progress(Progress{Lines: d.lines, Bytes: d.bytes, Time: d.clock.now})
	}
}

// skip counts and tells a line that is not an event or a check rejected,
// or, while nextTick collects a millisecond, puts it in its place there.
func (d *driver) skip(st *stream, line int64, err error) {
	if d.collecting {
		d.batch = append(d.batch, ahead{err: err, st: st, line: line})
		return
	}
	d.input.Malformed++
	if d.cfg.Malformed != nil {
		d.cfg.Malformed(&LineError{Source: st.name, Line: line, Err: err})
	}
}

// at returns the time an event stamped t is replayed at: t, or the clock's
// time when t is older, which makes the event out of order.
func (d *driver) at(t time.Time) (at time.Time, outOfOrder bool) {
	if d.input.Checks+d.input.Reports > 0 && t.Before(d.clock.now) {
		return d.clock.now, true
	}
	return t, false
}

// tick moves the clock to the time of an event stamped t that is replayed.
func (d *driver) tick(t time.Time) {
	at, late := d.at(t)
	if late {
		d.input.OutOfOrder++
	}
	if d.input.Checks+d.input.Reports == 0 {
		d.input.First = at
	}
	d.clock.now, d.input.Last = at, at
}

// check replays one check through every sim. A check guardian would have
// refused (engine.CheckRequest.Validate) is an error wrapping ErrRejected,
// and leaves no trace, not even on the clock.
func (d *driver) check(ctx context.Context, ev *event.Event) error {
	req := engine.CheckRequest{Flow: ev.Flow, Account: ev.Account, IP: ev.IP, Recipient: ev.Recipient, Cost: ev.Cost, SecretFingerprint: ev.SecretFingerprint}
	// The check is normalised once for every sim.
	ids, err := normalise(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	prev := d.clock.now
	d.clock.now, _ = d.at(ev.Time)
	ctx = keys.WithTenant(ctx, ev.Tenant)
	for i, s := range d.sims {
		dec, err := s.eng.Decide(ctx, &req, &ids)
		if err != nil {
			// The embedded store never fails; what the request is, every
			// sim judges the same way, and Validate has judged it.
			d.clock.now = prev
			return fmt.Errorf("replay: %w", err)
		}
		d.decisions[i] = dec
		d.ids[i] = dec.AttemptID
	}
	d.clock.now = prev
	d.tick(ev.Time)
	d.input.Checks++
	e := d.pending.put(ev.ID, d.ids, d.clock.now)
	e.tenant = ev.Tenant
	e.trips = d.onCheck(ev, &ids, d.decisions, e.trips)
	return nil
}

// opaqueRecipient stands in for a recipient pseudonym while a check is
// validated: a valid recipient, reserved, so it names no one.
const opaqueRecipient = "pseudonym@log.invalid"

// normalise returns req's identifiers as the sims' engines count them: the
// default normalisation, but for an account or a recipient that is a
// pseudonym (keys.IsPseudonym, as a decision log writes them), kept as it
// is. Case folding would merge pseudonyms that differ only in case, and a
// recipient pseudonym is neither a phone number nor an e-mail address.
func normalise(req engine.CheckRequest) (engine.Identifiers, error) {
	recipient := req.Recipient
	opaque := keys.IsPseudonym(recipient)
	if opaque {
		req.Recipient = opaqueRecipient
	}
	ids, err := req.Normalise(nil)
	if err != nil {
		return ids, err
	}
	if keys.IsPseudonym(req.Account) {
		ids.Account = req.Account
	}
	if opaque {
		ids.Recipient = recipient
	}
	return ids, nil
}

// report replays one report through every sim that allowed its check, and
// settles the check's outcome on its first report. An error is the engine
// failing in a way no input explains.
func (d *driver) report(ctx context.Context, ev *event.Event) error {
	d.tick(ev.Time)
	d.input.Reports++
	d.pending.expire(d.clock.now)
	e := d.pending.m[ev.ID]
	if e != nil {
		o := Failure
		if ev.Outcome == engine.Success {
			o = LaterSuccess
		}
		d.settle(e, o)
	}
	for i, s := range d.sims {
		switch {
		case e == nil:
			s.reports.NoCheck++
			continue
		case e.ids[i] == "":
			s.reports.NotAllowed++
			continue
		}
		_, err := s.eng.Report(keys.WithTenant(ctx, e.tenant), e.ids[i], ev.Outcome)
		switch {
		case err == nil:
			s.reports.Applied++
		case errors.Is(err, engine.ErrAlreadyReported):
			s.reports.Duplicate++
		case errors.Is(err, tokens.ErrExpiredAttempt):
			s.reports.Expired++
		default:
			return err
		}
	}
	return nil
}

// settle hands e's trips to onSettle with outcome o, once.
func (d *driver) settle(e *entry, o Outcome) {
	if e.settled {
		return
	}
	e.settled = true
	if d.onSettle != nil && len(e.trips) > 0 {
		d.onSettle(e.trips, o)
	}
	e.trips = nil
}

// pending maps check ids to their attempt ids for the reports to come, for
// pendingFor of the replay's clock and at most maxPending checks.
type pending struct {
	m map[string]*entry
	// queue holds the entries in the order they were made, which is also
	// time order: queue[head:] are live or stale (replaced under the same
	// id).
	queue []*entry
	head  int
	// forget, when set, is called with each entry that goes, whether
	// forgotten, replaced by a check of the same id, or left at the end.
	forget func(*entry)
}

type entry struct {
	id  string
	ids []string
	at  time.Time
	// tenant is the check's, which its report is made in.
	tenant string
	// trips wait for the check's outcome until settled.
	trips   []trip
	settled bool
}

// put makes the entry of a check of id, and returns it.
func (p *pending) put(id string, ids []string, now time.Time) *entry {
	e := &entry{id: id, ids: make([]string, len(ids)), at: now}
	copy(e.ids, ids)
	if old := p.m[id]; old != nil && p.forget != nil {
		p.forget(old)
	}
	p.m[id] = e
	p.queue = append(p.queue, e)
	p.expire(now)
	return e
}

// expire forgets the entries older than pendingFor, and the oldest while
// there are too many.
func (p *pending) expire(now time.Time) {
	for p.head < len(p.queue) {
		e := p.queue[p.head]
		if now.Sub(e.at) <= pendingFor && len(p.m) <= maxPending {
			break
		}
		if p.m[e.id] == e {
			delete(p.m, e.id)
		}
		if p.forget != nil {
			p.forget(e)
		}
		p.queue[p.head] = nil
		p.head++
	}
	if p.head > 1024 && p.head*2 > len(p.queue) {
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue = p.queue[:n]
		p.head = 0
	}
}

// forgetAll forgets every entry left, as the replay ends.
func (p *pending) forgetAll() {
	for _, e := range p.queue[p.head:] {
		if p.forget != nil {
			p.forget(e)
		}
	}
	clear(p.queue)
	p.queue, p.head = p.queue[:0], 0
	clear(p.m)
}

// lineReader reads lines of at most MaxLine bytes, counting them.
type lineReader struct {
	br           *bufio.Reader
	lines, bytes int64
	// counted is how many of bytes the driver has counted.
	counted int64
}

// next returns the next line without its line ending. A line longer than
// MaxLine is consumed and returned as tooLong. The last line needs no
// newline.
func (lr *lineReader) next() (line []byte, tooLong bool, err error) {
	line, err = lr.br.ReadSlice('\n')
	lr.bytes += int64(len(line))
	for errors.Is(err, bufio.ErrBufferFull) {
		tooLong = true
		var more []byte
		more, err = lr.br.ReadSlice('\n')
		lr.bytes += int64(len(more))
	}
	switch {
	case errors.Is(err, io.EOF) && (len(line) > 0 || tooLong):
		err = nil
	case err != nil:
		return nil, false, err
	}
	lr.lines++
	if tooLong {
		return nil, true, nil
	}
	if n := len(line); n > 0 && line[n-1] == '\n' {
		line = line[:n-1]
		if n > 1 && line[n-2] == '\r' {
			line = line[:n-2]
		}
	}
	return line, false, nil
}

// blank reports whether line holds only spaces.
func blank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\r' {
			return false
		}
	}
	return true
}

// track is what Run keeps of one rule beyond the shadow book's counts.
type track struct {
	rule     *rules.Rule
	keys     distinct
	first    []Hit
	outcomes ByOutcome
}
