package replay

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/rules"
)

// Input is what a replay read.
type Input struct {
	// Lines counts every line read, blank and malformed ones included.
	Lines int64 `json:"lines"`
	// Checks and Reports count the events replayed.
	Checks  int64 `json:"checks"`
	Reports int64 `json:"reports"`
	// Malformed counts the lines skipped (Config.Malformed saw each).
	Malformed int64 `json:"malformed"`
	// OutOfOrder counts the events older than the one before them, which
	// were replayed at the time of the one before them.
	OutOfOrder int64 `json:"out_of_order"`
	// First and Last are the replay's clock at the first and the last
	// event replayed; zero when none was.
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
}

// ReportStats says what became of the reports of one replayed rule set.
type ReportStats struct {
	// Applied counts the reports the engine recorded.
	Applied int64 `json:"applied"`
	// NoCheck counts reports naming no check replayed in the 20 minutes
	// before them.
	NoCheck int64 `json:"no_check"`
	// NotAllowed counts reports of checks the rules slowed or blocked: in
	// this replay those checks had no attempt to report.
	NotAllowed int64 `json:"not_allowed"`
	// Expired counts reports more than 10 minutes after their check.
	Expired int64 `json:"expired"`
	// Duplicate counts second and later reports of one check.
	Duplicate int64 `json:"duplicate"`
}

// Summary is what Run found: per rule, what it would have done on its own.
type Summary struct {
	Input   Input       `json:"input"`
	Reports ReportStats `json:"reports"`
	// Rules are in the order of the rules file.
	Rules []RuleSummary `json:"rules"`
}

// RuleSummary is what one rule would have done to the replayed traffic,
// had it been the only rule.
type RuleSummary struct {
	Rule string `json:"rule"`
	// Mode is the rule's mode in the rules file; the replay evaluated it in
	// shadow mode whatever it is.
	Mode rules.Mode `json:"mode"`
	// Checks counts the checks the rule was evaluated on: of its flows and
	// carrying its key's fields.
	Checks uint64 `json:"checks"`
	// WouldSlow, WouldBlock and WouldChallenge count the checks it would
	// have slowed, blocked or challenged.
	WouldSlow      uint64 `json:"would_slow"`
	WouldBlock     uint64 `json:"would_block"`
	WouldChallenge uint64 `json:"would_challenge"`
	// KeysHit counts the distinct keys it would have limited at least
	// once; an estimate when KeysHitExact is false.
	KeysHit      int64 `json:"keys_hit"`
	KeysHitExact bool  `json:"keys_hit_exact"`
	// FirstLimited are the first five keys it would have limited, with
	// when; never nil.
	FirstLimited []Hit `json:"first_limited"`
	// ByOutcome splits WouldSlow, WouldBlock and WouldChallenge by how
	// each check's attempt went: each is the sum of its three parts.
	ByOutcome ByOutcome `json:"by_outcome"`
}

// Outcome is how the attempt of a replayed check went, as the events
// report it.
type Outcome string

// The outcomes a replay tells apart.
const (
	// LaterSuccess: the check's attempt was reported a success. The user
	// got in, so a rule that would have slowed, blocked or challenged the
	// check would have stood in a legitimate user's way: friction.
	LaterSuccess Outcome = "later_success"
	// Failure: the attempt was reported a failure.
	Failure Outcome = "failure"
	// Unreported: no report of the attempt came within 20 minutes of the
	// replay's clock (twice an attempt id's life), or before the events
	// ended. A check production slowed or blocked had no attempt to report,
	// so it is unreported too.
	Unreported Outcome = "unreported"
)

// ByOutcome is a rule's would-be decisions, split by Outcome.
type ByOutcome struct {
	LaterSuccess Counts `json:"later_success"`
	Failure      Counts `json:"failure"`
	Unreported   Counts `json:"unreported"`
}

// of returns the counts of outcome o.
func (b *ByOutcome) of(o Outcome) *Counts {
	switch o {
	case LaterSuccess:
		return &b.LaterSuccess
	case Failure:
		return &b.Failure
	}
	return &b.Unreported
}

// Counts are would-be decisions of one rule.
type Counts struct {
	WouldSlow      uint64 `json:"would_slow"`
	WouldBlock     uint64 `json:"would_block"`
	WouldChallenge uint64 `json:"would_challenge"`
}

// add counts one would-be decision a.
func (c *Counts) add(a rules.Action) {
	switch a {
	case rules.Slow:
		c.WouldSlow++
	case rules.Block:
		c.WouldBlock++
	case rules.Challenge:
		c.WouldChallenge++
	}
}

// Of returns the count of decision a; 0 for allow.
func (c *Counts) Of(a rules.Action) uint64 {
	switch a {
	case rules.Slow:
		return c.WouldSlow
	case rules.Block:
		return c.WouldBlock
	case rules.Challenge:
		return c.WouldChallenge
	}
	return 0
}

// Hit is a key a rule limited, and when it first did.
type Hit struct {
	// Key is the key as the events name it: an account, an IP prefix, an
	// account and a prefix, a recipient, or "global".
	Key string `json:"key"`
	// At is the replay's clock at the check.
	At       time.Time    `json:"at"`
	Decision rules.Action `json:"decision"`
}

// Comparison is what Compare found: the checks NEW decides differently
// from OLD, each set enforced as written.
type Comparison struct {
	Input      Input       `json:"input"`
	OldReports ReportStats `json:"old_reports"`
	NewReports ReportStats `json:"new_reports"`
	// Changed counts the checks whose decision or deciding rule differs.
	Changed int64 `json:"changed"`
	// Rules lists every rule of either set, OLD's in file order first.
	Rules []RuleChange `json:"rules"`
	// Changes counts the checks of each change of verdict, most first.
	Changes []Change `json:"changes"`
}

// RuleChange is how the checks one rule decides change.
type RuleChange struct {
	Rule string `json:"rule"`
	// OldDecided and NewDecided count the checks the rule decided (it was
	// the rule of a challenge, slow or block) under each set.
	OldDecided int64 `json:"old_decided"`
	NewDecided int64 `json:"new_decided"`
	// Gained counts the checks NEW decides by this rule that OLD did not
	// decide by it; Lost the reverse.
	Gained int64 `json:"gained"`
	Lost   int64 `json:"lost"`
}

// Verdict is a check's decision and the rule behind it.
type Verdict struct {
	Decision rules.Action `json:"decision"`
	// Rule is empty on allow.
	Rule string `json:"rule,omitempty"`
}

// String returns "allow" or "slow by RULE".
func (v Verdict) String() string {
	if v.Rule == "" {
		return string(v.Decision)
	}
	return string(v.Decision) + " by " + v.Rule
}

// Change is one change of verdict and how many checks it applies to.
type Change struct {
	From   Verdict `json:"from"`
	To     Verdict `json:"to"`
	Checks int64   `json:"checks"`
}

// sortChanges orders changes by checks descending, then by verdicts.
func sortChanges(cs []Change) {
	slices.SortFunc(cs, func(a, b Change) int {
		if c := cmp.Compare(b.Checks, a.Checks); c != 0 {
			return c
		}
		if c := cmp.Compare(a.From.String(), b.From.String()); c != 0 {
			return c
		}
		return cmp.Compare(a.To.String(), b.To.String())
	})
}

// stamp formats an instant as the replay format does.
func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(event.TimeLayout)
}

// writeInput writes the lines about the input and its reports.
func writeInput(w io.Writer, in *Input, reports ...ReportStats) {
	fmt.Fprintf(w, "events: %d checks and %d reports on %d lines, %s to %s\n", in.Checks, in.Reports, in.Lines, stamp(in.First), stamp(in.Last))
	fmt.Fprintf(w, "malformed lines skipped: %d; events out of order: %d (replayed at the time of the event before)\n", in.Malformed, in.OutOfOrder)
	for i, r := range reports {
		label := "reports"
		if len(reports) > 1 {
			label = [...]string{"reports under OLD", "reports under NEW"}[i]
		}
		fmt.Fprintf(w, "%s: %d applied; ignored: %d naming no check, %d of checks slowed or blocked, %d expired, %d duplicate\n",
			label, r.Applied, r.NoCheck, r.NotAllowed, r.Expired, r.Duplicate)
	}
}

// WriteTable writes s for people: the input, then one row per rule, then
// the first keys each rule would have limited.
func (s *Summary) WriteTable(w io.Writer) error {
	var b strings.Builder
	writeInput(&b, &s.Input, s.Reports)
	b.WriteString("each rule counted on its own, as if it were the only rule (every rule replayed in shadow mode)\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tMODE\tCHECKS\tWOULD SLOW\tWOULD BLOCK\tWOULD CHALLENGE\tKEYS HIT")
	for _, r := range s.Rules {
		hit := strconv.FormatInt(r.KeysHit, 10)
		if !r.KeysHitExact {
			hit = "~" + hit
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", r.Rule, r.Mode, r.Checks, r.WouldSlow, r.WouldBlock, r.WouldChallenge, hit)
	}
	tw.Flush()
	b.WriteString("\nBY OUTCOME OF THE ATTEMPT (later_success: the user got in, so the rule would have been friction)\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tWOULD\tLATER_SUCCESS\tFAILURE\tUNREPORTED")
	split := false
	for _, r := range s.Rules {
		o := &r.ByOutcome
		for _, a := range []rules.Action{rules.Slow, rules.Block, rules.Challenge} {
			if n := o.LaterSuccess.Of(a) + o.Failure.Of(a) + o.Unreported.Of(a); n == 0 {
				continue
			}
			split = true
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\n", r.Rule, a, o.LaterSuccess.Of(a), o.Failure.Of(a), o.Unreported.Of(a))
		}
	}
	if !split {
		fmt.Fprintln(tw, "(none: no rule would have limited any check)")
	}
	tw.Flush()
	b.WriteString("\nFIRST KEYS LIMITED\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	listed := false
	for _, r := range s.Rules {
		for _, h := range r.FirstLimited {
			listed = true
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Rule, stamp(h.At), h.Decision, h.Key)
		}
	}
	if !listed {
		fmt.Fprintln(tw, "(none: no rule would have limited any check)")
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTable writes c for people: the input, the checks decided
// differently, one row per rule, then each change of verdict.
func (c *Comparison) WriteTable(w io.Writer) error {
	var b strings.Builder
	writeInput(&b, &c.Input, c.OldReports, c.NewReports)
	fmt.Fprintf(&b, "NEW decides %d of %d checks differently from OLD (decision or deciding rule)\n\n", c.Changed, c.Input.Checks)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tOLD DECIDED\tNEW DECIDED\tGAINED\tLOST")
	for _, r := range c.Rules {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", r.Rule, r.OldDecided, r.NewDecided, r.Gained, r.Lost)
	}
	tw.Flush()
	b.WriteString("\nCHANGES\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OLD\tNEW\tCHECKS")
	for _, ch := range c.Changes {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", ch.From, ch.To, ch.Checks)
	}
	if len(c.Changes) == 0 {
		fmt.Fprintln(tw, "(none)\t\t")
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}
