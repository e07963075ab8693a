package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/guardian-sec/guardian/internal/breached"
)

const breachedHelp = `Usage: guardian breached build --out FILE [--format sha1|ntlm|plain] [--min-count N] [INPUT…|-]
       guardian breached info FILE

build makes the breached-password filter that 'guardian serve --breached
FILE' loads, from Have I Been Pwned's downloadable hash lists (HASH:COUNT
lines, SHA-1 or NTLM, upper or lower case, in any order) or from plain
password lists (one a line). INPUT "-", or no INPUT, reads standard input.
The build streams: past 8 million entries it spills 8 bytes an entry to
--temp-dir and builds 256 shards one at a time, so its memory stays under a
few hundred MiB however long the lists. False positives are 1 in 256
(0.39%), never a false negative. FILE is replaced atomically once complete.
On a terminal, stderr shows a progress bar; at the end stdout sums up the
file, the time taken and the peak memory.

info verifies FILE as serve would (header, size, checksum) and prints what
it holds. Exit status: 0 done, 1 an input or FILE could not be used, 2 bad
usage.
`

// breachedCmd is `guardian breached`: build and info. Neither reads the
// environment; only serve's flags do.
func breachedCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "build":
			return breachedBuild(ctx, args[1:], stdout, stderr)
		case "info":
			return breachedInfo(args[1:], stdout, stderr)
		}
	}
	c := newCommand("guardian breached", breachedHelp)
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		c.printHelp(stdout)
		return exitOK
	}
	c.fail(stderr, "want 'guardian breached build' or 'guardian breached info'")
	return exitUsage
}

func breachedBuild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("guardian breached build", breachedHelp)
	fs := c.fs
	var out, format, tempDir string
	var minCount uint64
	fs.StringVar(&out, "out", "", "the filter `file` to write (required)")
	fs.StringVar(&format, "format", "sha1", "the inputs' `format`: sha1 or ntlm (Have I Been Pwned's HASH:COUNT lists) or plain (one password a line)")
	fs.Uint64Var(&minCount, "min-count", 0, "leave out hashes seen fewer than `N` times (sha1 and ntlm)")
	fs.StringVar(&tempDir, "temp-dir", "", "`directory` for the spill files of a large build (8 bytes an entry); empty: the directory of --out")
	inputs, code, ok := c.parse(args, nil, stdout, stderr)
	if !ok {
		return code
	}
	if out == "" {
		c.fail(stderr, "--out FILE is required")
		return exitUsage
	}
	f, err := breached.ParseFormat(format)
	if err != nil {
		c.fail(stderr, "--format: %q is not sha1, ntlm or plain", format)
		return exitUsage
	}
	if f == breached.Plain && minCount > 1 {
		c.fail(stderr, "--min-count needs HASH:COUNT lists (--format sha1 or ntlm)")
		return exitUsage
	}
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	stdin := 0
	for _, in := range inputs {
		if in == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		c.fail(stderr, "standard input (-) can be read once")
		return exitUsage
	}
	if tempDir == "" {
		tempDir = filepath.Dir(out)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	start := time.Now()
	var bar *progressBar
	if isTerminal(stderr) {
		bar = &progressBar{w: stderr, total: inputSize(inputs), start: start}
	}
	cfg := breached.BuildConfig{Format: f, MinCount: minCount, TempDir: tempDir, BuiltAt: start}
	if bar != nil {
		cfg.Progress = func(p breached.Progress) { bar.update(p, time.Now()) }
	}
	b, err := breached.NewBuilder(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "guardian breached build:", err)
		return exitUsage
	}
	defer b.Close()
	st, err := build(ctx, b, inputs, out)
	bar.done()
	if err != nil {
		fmt.Fprintln(stderr, "guardian breached build:", err)
		return exitFailure
	}
	took := time.Since(start)
	fmt.Fprintf(stdout, "%s: %s entries from %s %s lines (%s kept); %s (%s bytes), %.1f bits an entry, false positives 1 in 256\n",
		out, thousands(int64(st.Entries)), thousands(st.Lines), f, thousands(st.Kept), sizeIEC(st.Bytes), thousands(st.Bytes), st.BitsPerEntry())
	used := resources()
	fmt.Fprintf(stdout, "built in %s (CPU %s)", took.Round(10*time.Millisecond), used.cpu.Round(10*time.Millisecond))
	if used.peak > 0 {
		fmt.Fprintf(stdout, ", peak memory %s", sizeIEC(used.peak))
	}
	if st.Spilled {
		fmt.Fprintf(stdout, ", spilled to %s", tempDir)
	}
	fmt.Fprintln(stdout)
	return exitOK
}

// build reads every input into b and writes the filter to out.
func build(ctx context.Context, b *breached.Builder, inputs []string, out string) (breached.Stats, error) {
	for _, in := range inputs {
		if err := readInput(ctx, b, in); err != nil {
			return breached.Stats{}, err
		}
	}
	return b.Write(ctx, out)
}

func readInput(ctx context.Context, b *breached.Builder, in string) error {
	if in == "-" {
		return b.Read(ctx, "-", os.Stdin)
	}
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	return b.Read(ctx, in, f)
}

// inputSize is the total size of the inputs, or 0 when one of them has no
// size known in advance (standard input, a pipe).
func inputSize(inputs []string) int64 {
	var total int64
	for _, in := range inputs {
		fi, err := os.Stat(in)
		if in == "-" || err != nil || !fi.Mode().IsRegular() {
			return 0
		}
		total += fi.Size()
	}
	return total
}

func breachedInfo(args []string, stdout, stderr io.Writer) int {
	c := newCommand("guardian breached info", breachedHelp)
	pos, code, ok := c.parse(args, nil, stdout, stderr)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		c.fail(stderr, "want one filter file")
		return exitUsage
	}
	f, err := breached.Open(pos[0])
	if err != nil {
		fmt.Fprintln(stderr, "guardian breached info:", err)
		return exitFailure
	}
	i := f.Info()
	fmt.Fprintf(stdout, "%s: a breached-password filter of %s entries from %s lists (lookups by %s), built %s",
		pos[0], thousands(int64(i.Entries)), i.Format, i.Format.Hash(), i.BuiltAt.Format(time.RFC3339))
	if i.MinCount > 1 {
		fmt.Fprintf(stdout, " with --min-count %d", i.MinCount)
	}
	fmt.Fprintf(stdout, "; %s, %d shards, sha256 %s\n", sizeIEC(i.Bytes), i.Shards, i.Checksum)
	return exitOK
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progressRedraw is how often at most the progress bar is drawn again.
const progressRedraw = 200 * time.Millisecond

// progressBar draws a build's progress on one terminal line, redrawn in
// place. A nil *progressBar draws nothing.
type progressBar struct {
	w     io.Writer
	total int64 // input bytes; 0 when unknown
	start time.Time
	last  time.Time
	drawn bool
}

func (p *progressBar) update(pr breached.Progress, now time.Time) {
	if p == nil || now.Sub(p.last) < progressRedraw {
		return
	}
	p.last, p.drawn = now, true
	fmt.Fprint(p.w, "\r\x1b[K"+p.line(pr, now))
}

// done clears the bar, so that what is printed next starts a clean line.
func (p *progressBar) done() {
	if p != nil && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// barWidth is the width of the bar itself, in characters.
const barWidth = 24

// line is the bar's text for pr at now.
func (p *progressBar) line(pr breached.Progress, now time.Time) string {
	elapsed := clock(now.Sub(p.start))
	if pr.Shards > 0 {
		return fmt.Sprintf("building %s %3d%%  shard %d of %d  %s", bar(int64(pr.Shard), int64(pr.Shards)), pr.Shard*100/pr.Shards, pr.Shard, pr.Shards, elapsed)
	}
	if p.total <= 0 {
		return fmt.Sprintf("reading  %s lines, %s  %s", short(pr.Lines), sizeIEC(pr.Bytes), elapsed)
	}
	done := min(pr.Bytes, p.total)
	return fmt.Sprintf("reading  %s %3d%%  %s of %s  %s lines  %s", bar(done, p.total), done*100/p.total, sizeIEC(done), sizeIEC(p.total), short(pr.Lines), elapsed)
}

// bar is a bar of barWidth characters, done of total of it filled.
func bar(done, total int64) string {
	n := int(done * barWidth / total)
	return "[" + strings.Repeat("#", n) + strings.Repeat("-", barWidth-n) + "]"
}

// clock writes d as m:ss, or h:mm:ss past an hour.
func clock(d time.Duration) string {
	s := int64(d / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// short writes n in at most four digits and a unit: 950, 12.3k, 1.5M, 1.02G.
func short(n int64) string {
	switch {
	case n < 1_000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	case n < 1_000_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2fG", float64(n)/1e9)
}

// sizeIEC writes a size in bytes with a binary unit: 950 B, 4.6 KiB, 1.1 GiB.
func sizeIEC(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1024, 0
	for v >= 1024 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// usedResources is what the process used: CPU time, and its peak resident memory
// (0 where the system does not say).
type usedResources struct {
	cpu  time.Duration
	peak int64
}
