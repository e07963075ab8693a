package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// peerPhase is what one side did in one phase of one round.
type peerPhase struct {
	Decisions  uint64  `json:"decisions"`
	Seconds    float64 `json:"seconds"`
	Errors     uint64  `json:"errors"`
	FirstError string  `json:"first_error,omitempty"`
	// Degraded counts guardian's checks decided by its fallback, not by
	// Redis; always zero for the envoy service.
	Degraded uint64 `json:"degraded"`
	// Denied counts decisions that were not allowed.
	Denied   uint64  `json:"denied"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Commands int64   `json:"redis_commands"`
	Scripts  int64   `json:"redis_script_calls"`
	// ServiceCPU and RedisCPU are the CPU seconds the service's process
	// (/proc/PID/stat) and its Redis (INFO cpu) used during the phase.
	ServiceCPU float64 `json:"service_cpu_seconds"`
	RedisCPU   float64 `json:"redis_cpu_seconds"`
}

// perSecond is the phase's decisions per second.
func (p *peerPhase) perSecond() float64 { return ratio(float64(p.Decisions), p.Seconds) }

// micros is seconds of CPU per decision, in microseconds.
func (p *peerPhase) micros(cpuSeconds float64) float64 {
	return ratio(cpuSeconds*1e6, float64(p.Decisions))
}

// ratio is a / b, or NaN when b is zero.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// peerFigures is one side's round: the closed-loop phase and the open one.
type peerFigures struct {
	Closed peerPhase `json:"closed"`
	Open   peerPhase `json:"open"`
}

// peerRound is one round of every side, indexed by peerSide.
type peerRound struct {
	Sides [peerSides]peerFigures `json:"sides"`
}

// peerResult is what --peer prints.
type peerResult struct {
	Binary       string      `json:"envoy_ratelimit_binary"`
	RedisVersion string      `json:"redis_version"`
	Keys         uint64      `json:"keys"`
	Conns        int         `json:"conns"`
	Rate         float64     `json:"open_rate"`
	Seconds      float64     `json:"seconds_per_phase"`
	Rounds       []peerRound `json:"rounds"`
	Rows         []peerRow   `json:"table"`
	// Extra is each round's floor and stuffing phases (peerfloor.go).
	Extra []extraRound `json:"floor_and_stuffing,omitempty"`
}

// span is the lowest and highest of a figure over the rounds.
type span struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
}

// MarshalJSON writes a span, an end that is not a number (no rounds, or a
// ratio over zero) as null.
func (s span) MarshalJSON() ([]byte, error) {
	num := func(v float64) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "null"
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return []byte(`{"lo":` + num(s.Lo) + `,"hi":` + num(s.Hi) + `}`), nil
}

// spanOf is the span of vs; NaN when vs is empty.
func spanOf(vs []float64) span {
	if len(vs) == 0 {
		return span{math.NaN(), math.NaN()}
	}
	s := span{vs[0], vs[0]}
	for _, v := range vs[1:] {
		s.Lo, s.Hi = math.Min(s.Lo, v), math.Max(s.Hi, v)
	}
	return s
}

// peerRow is one figure of the table: the envoy service's span over the
// rounds, and each guardian's against it.
type peerRow struct {
	Figure string `json:"figure"`
	Unit   string `json:"unit"`
	Envoy  span   `json:"envoy"`
	// Guardian is guardian under its built-in rules, Three under the same
	// three limits as envoy.
	Guardian versus `json:"guardian"`
	Three    versus `json:"guardian_three_limits"`
	// AtMost says a target is a ratio to stay at or below, not at or
	// above.
	AtMost bool `json:"at_most,omitempty"`
	Rounds int  `json:"rounds"`
}

// versus is one guardian's figure against the envoy service's: its span
// over the rounds, the span of the ratio (guardian ÷ envoy, round by
// round), and, for a target, how many rounds met it.
type versus struct {
	Value span `json:"value"`
	Ratio span `json:"ratio"`
	// Target is the ratio the figure must stay at or below (the row's
	// AtMost) or at or above; zero for a figure shown for information.
	Target float64 `json:"target,omitempty"`
	Met    int     `json:"rounds_met,omitempty"`
}

// meets reports whether ratio v meets target, at most or at least it.
func meets(v, target float64, atMost bool) bool {
	if math.IsNaN(v) {
		return false
	}
	if atMost {
		return v <= target
	}
	return v >= target
}

// peerFigure is one row's definition: how to read the figure from a side's
// round, and the targets of guardian's built-in rules and of its three
// limits.
type peerFigure struct {
	name, unit     string
	value          func(f *peerFigures) float64
	builtin, three float64
	atMost         bool
}

// peerFigureList is the table's rows, the targets first.
var peerFigureList = []peerFigure{
	{"closed-loop decisions/s", "/s", func(f *peerFigures) float64 { return f.Closed.perSecond() }, 1.5, 0, false},
	{"open p99", "ms", func(f *peerFigures) float64 { return f.Open.P99 }, 1, 0, true},
	{"service CPU per decision", "µs", func(f *peerFigures) float64 { return f.Closed.micros(f.Closed.ServiceCPU) }, 0.5, 0, true},
	{"Redis CPU per decision", "µs", func(f *peerFigures) float64 { return f.Closed.micros(f.Closed.RedisCPU) }, 1, 0.5, true},
	{"open p50", "ms", func(f *peerFigures) float64 { return f.Open.P50 }, 0, 0, false},
	{"open: service CPU per decision", "µs", func(f *peerFigures) float64 { return f.Open.micros(f.Open.ServiceCPU) }, 0, 0, false},
	{"open: Redis CPU per decision", "µs", func(f *peerFigures) float64 { return f.Open.micros(f.Open.RedisCPU) }, 0, 0, false},
	{"Redis commands per decision", "", func(f *peerFigures) float64 {
		return ratio(float64(f.Closed.Commands), float64(f.Closed.Decisions))
	}, 0, 0, false},
	{"Redis calls per decision (scripts, or commands)", "", func(f *peerFigures) float64 {
		calls := f.Closed.Scripts
		if calls == 0 {
			calls = f.Closed.Commands
		}
		return ratio(float64(calls), float64(f.Closed.Decisions))
	}, 0, 0, false},
	{"denied share", "", func(f *peerFigures) float64 {
		return ratio(float64(f.Closed.Denied+f.Open.Denied), float64(f.Closed.Decisions+f.Open.Decisions))
	}, 0, 0, false},
	{"degraded or failed", "", func(f *peerFigures) float64 {
		return float64(f.Closed.Degraded + f.Open.Degraded + f.Closed.Errors + f.Open.Errors)
	}, 0, 0, false},
}

// peerTable computes the table over rounds.
func peerTable(rounds []peerRound) []peerRow {
	rows := make([]peerRow, 0, len(peerFigureList))
	for _, pf := range peerFigureList {
		row := peerRow{Figure: pf.name, Unit: pf.unit, AtMost: pf.atMost, Rounds: len(rounds)}
		es := make([]float64, len(rounds))
		for i := range rounds {
			es[i] = pf.value(&rounds[i].Sides[sideEnvoy])
		}
		row.Envoy = spanOf(es)
		row.Guardian = against(pf, rounds, sideGuardian, pf.builtin, es)
		row.Three = against(pf, rounds, sideThree, pf.three, es)
		rows = append(rows, row)
	}
	return rows
}

// against is side's figure pf over rounds against the envoy service's, es
// round by round, held to target.
func against(pf peerFigure, rounds []peerRound, side peerSide, target float64, es []float64) versus {
	v := versus{Target: target}
	vs, rs := make([]float64, len(rounds)), make([]float64, len(rounds))
	for i := range rounds {
		vs[i] = pf.value(&rounds[i].Sides[side])
		rs[i] = ratio(vs[i], es[i])
		if target != 0 && meets(rs[i], target, pf.atMost) {
			v.Met++
		}
	}
	v.Value, v.Ratio = spanOf(vs), spanOf(rs)
	return v
}

// formatSpan prints a span with digits suited to its size: "5,047–6,015",
// "2.8–4.2", or one value when both ends agree at that precision.
func formatSpan(s span) string {
	lo, hi := formatFigure(s.Lo), formatFigure(s.Hi)
	if lo == hi {
		return lo
	}
	return lo + "–" + hi
}

// formatFigure prints v with three significant digits below 1,000 and
// thousands separators above.
func formatFigure(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "—"
	case a >= 1000:
		return thousands(int64(math.Round(v)))
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1 || a == 0:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// thousands prints n with commas between groups of three digits.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// targetText says v's target in row r and how many rounds met it.
func targetText(r *peerRow, v *versus) string {
	if v.Target == 0 {
		return ""
	}
	op := "≥"
	if r.AtMost {
		op = "≤"
	}
	verdict := "met"
	if v.Met < r.Rounds {
		verdict = fmt.Sprintf("met in %d of %d rounds", v.Met, r.Rounds)
	}
	if v.Met == 0 {
		verdict = "not met"
	}
	return fmt.Sprintf("%s %.1f× — %s", op, v.Target, verdict)
}

// printPeer prints the comparison as a table.
func printPeer(w io.Writer, r *peerResult) {
	fmt.Fprintf(w, "guardian (built-in rules, and the same three limits) against envoy ratelimit (%s), each on its own Redis %s\n", r.Binary, r.RedisVersion)
	fmt.Fprintf(w, "three limits per decision, %s distinct identities, %d connections closed-loop, open model at %.0f/s; %d interleaved rounds of %.0f s per phase\n\n",
		thousands(int64(r.Keys)), r.Conns, r.Rate, len(r.Rounds), r.Seconds)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tenvoy ratelimit\tguardian\tguardian ÷ envoy\ttarget\tguardian, three limits\tthree limits ÷ envoy\ttarget\t")
	for i := range r.Rows {
		row := &r.Rows[i]
		name := row.Figure
		if row.Unit != "" {
			name += " (" + row.Unit + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, formatSpan(row.Envoy),
			formatSpan(row.Guardian.Value), formatSpan(row.Guardian.Ratio), targetText(row, &row.Guardian),
			formatSpan(row.Three.Value), formatSpan(row.Three.Ratio), targetText(row, &row.Three))
	}
	_ = tw.Flush()
	printExtra(w, r)
	for i, rd := range r.Rounds {
		for s, f := range rd.Sides {
			for _, p := range []peerPhase{f.Closed, f.Open} {
				if p.FirstError != "" {
					fmt.Fprintf(w, "round %d, %s: %d errors, the first: %s\n", i+1, peerSide(s), p.Errors, p.FirstError)
				}
			}
		}
	}
}
