// Package replay runs recorded traffic through a rule set offline: the
// events of the replay format (package event, written by guardian's
// decision log or by hand) go through the real engine on the embedded
// store, in file order, on a simulated clock that reads each event's own
// timestamp, so a day of traffic replays in seconds and the same input
// always gives the same output.
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
//     untrusted device.
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
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/event"
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
	// Line is the line's number, from 1.
	Line int64
	Err  error
}

// Error returns "line N: reason".
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the reason the line was skipped.
func (e *LineError) Unwrap() error { return e.Err }

// Progress is how far a replay has read.
type Progress struct {
	// Lines and Bytes count what was read so far.
	Lines, Bytes int64
	// Time is the replay's clock.
	Time time.Time
}

// Run replays the events read from r through set, every rule counted on its
// own (see the package documentation), and returns what each rule would
// have done. Malformed lines never make it fail: it fails when r cannot be
// read or ctx ends.
func Run(ctx context.Context, set *rules.Set, r io.Reader, cfg Config) (*Summary, error) {
	shadowed := set.InMode(rules.Shadow)
	d := newDriver(cfg, shadowed)
	tracks := make(map[string]*track, len(set.Rules))
	for i := range shadowed.Rules {
		tracks[shadowed.Rules[i].Name] = &track{rule: &shadowed.Rules[i]}
	}
	d.onCheck = func(ids *engine.Identifiers, ds []engine.Decision) {
		for _, trip := range ds[0].Shadow {
			t := tracks[trip.Rule]
			if t == nil {
				continue
			}
			key := ids.Key(t.rule).String()
			if t.keys.add(key) && len(t.first) < firstKeys {
				t.first = append(t.first, Hit{Key: key, At: d.clock.now, Decision: trip.Action})
			}
		}
	}
	if err := d.run(ctx, r); err != nil {
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
		})
	}
	return s, nil
}

// Compare replays the events read from r through the sets before and after
// side by side, each as written, and returns the checks after decides
// differently. Malformed lines never make it fail: it fails when r cannot be
// read or ctx ends.
func Compare(ctx context.Context, before, after *rules.Set, r io.Reader, cfg Config) (*Comparison, error) {
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
	d.onCheck = func(_ *engine.Identifiers, ds []engine.Decision) {
		from := Verdict{Decision: ds[0].Action, Rule: ds[0].Rule}
		to := Verdict{Decision: ds[1].Action, Rule: ds[1].Rule}
		if from.Rule != "" {
			ruleChange(from.Rule).OldDecided++
		}
		if to.Rule != "" {
			ruleChange(to.Rule).NewDecided++
		}
		if from == to {
			return
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
	}
	if err := d.run(ctx, r); err != nil {
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
	// onCheck sees each check's identifiers and the decision of every sim.
	onCheck func(ids *engine.Identifiers, ds []engine.Decision)

	decisions []engine.Decision
	ids       []string
}

func newDriver(cfg Config, sets ...*rules.Set) *driver {
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = defaultProgressEvery
	}
	d := &driver{cfg: cfg, decisions: make([]engine.Decision, len(sets)), ids: make([]string, len(sets))}
	// The key only names state inside this replay; none of it is kept.
	key := secret.Generate()
	for _, set := range sets {
		d.sims = append(d.sims, newSim(set, &d.clock, key))
	}
	d.pending.m = make(map[string]*entry)
	return d
}

// run replays every line of r.
func (d *driver) run(ctx context.Context, r io.Reader) error {
	lr := lineReader{br: bufio.NewReaderSize(r, MaxLine+1)}
	var checks int64
	for {
		line, tooLong, err := lr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("replay: line %d: %w", lr.lines, err)
		}
		if lr.lines%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if lr.lines%d.cfg.ProgressEvery == 0 {
			d.progress(&lr)
		}
		if tooLong {
			d.skip(lr.lines, fmt.Errorf("%w: longer than %d bytes", event.ErrMalformed, MaxLine))
			continue
		}
		if blank(line) {
			continue
		}
		ev, err := event.Parse(line)
		if err != nil {
			d.skip(lr.lines, err)
			continue
		}
		if ev.Kind == event.Check {
			if err := d.check(ctx, &ev); errors.Is(err, ErrRejected) {
				d.skip(lr.lines, err)
				continue
			} else if err != nil {
				return fmt.Errorf("replay: line %d: %w", lr.lines, err)
			}
			if checks++; checks%sweepEvery == 0 {
				for _, s := range d.sims {
					s.store.Sweep()
				}
			}
		} else if err := d.report(ctx, &ev); err != nil {
			return fmt.Errorf("replay: line %d: %w", lr.lines, err)
		}
	}
	d.input.Lines = lr.lines
	if lr.lines == 0 || lr.lines%d.cfg.ProgressEvery != 0 {
		d.progress(&lr)
	}
	return nil
}

func (d *driver) progress(lr *lineReader) {
	if d.cfg.Progress != nil {
		d.cfg.Progress(Progress{Lines: lr.lines, Bytes: lr.bytes, Time: d.clock.now})
	}
}

func (d *driver) skip(line int64, err error) {
	d.input.Malformed++
	if d.cfg.Malformed != nil {
		d.cfg.Malformed(&LineError{Line: line, Err: err})
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
	req := engine.CheckRequest{Flow: ev.Flow, Account: ev.Account, IP: ev.IP, Recipient: ev.Recipient, Cost: ev.Cost}
	// The default normalisation, the sims' engines' own: a decision
	// log's pseudonyms stay themselves under every keys.Options. The check
	// is normalised once for every sim.
	ids, err := req.Normalise(nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRejected, err)
	}
	prev := d.clock.now
	d.clock.now, _ = d.at(ev.Time)
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
	d.pending.put(ev.ID, d.ids, d.clock.now)
	d.onCheck(&ids, d.decisions)
	return nil
}

// report replays one report through every sim that allowed its check. An
// error is the engine failing in a way no input explains.
func (d *driver) report(ctx context.Context, ev *event.Event) error {
	d.tick(ev.Time)
	d.input.Reports++
	d.pending.expire(d.clock.now)
	e := d.pending.m[ev.ID]
	for i, s := range d.sims {
		switch {
		case e == nil:
			s.reports.NoCheck++
			continue
		case e.ids[i] == "":
			s.reports.NotAllowed++
			continue
		}
		_, err := s.eng.Report(ctx, e.ids[i], ev.Outcome)
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

// pending maps check ids to their attempt ids for the reports to come, for
// pendingFor of the replay's clock and at most maxPending checks.
type pending struct {
	m map[string]*entry
	// queue holds the entries in the order they were made, which is also
	// time order: queue[head:] are live or stale (replaced under the same
	// id).
	queue []*entry
	head  int
}

type entry struct {
	id  string
	ids []string
	at  time.Time
}

func (p *pending) put(id string, ids []string, now time.Time) {
	e := &entry{id: id, ids: make([]string, len(ids)), at: now}
	copy(e.ids, ids)
	p.m[id] = e
	p.queue = append(p.queue, e)
	p.expire(now)
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

// lineReader reads lines of at most MaxLine bytes, counting them.
type lineReader struct {
	br           *bufio.Reader
	lines, bytes int64
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
	rule  *rules.Rule
	keys  distinct
	first []Hit
}
