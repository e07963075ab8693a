package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/replay"
	"github.com/guardian-sec/guardian/internal/rules"
)

const replayHelp = `Usage: guardian replay --rules FILE [--format table|json] EVENTS.jsonl...
       guardian replay --compare [--format table|json] OLD.yaml NEW.yaml EVENTS.jsonl...

Feeds recorded events (the replay format: one JSON object a line, as
guardian serve --decision-log writes them; EVENTS "-" reads standard input)
through rules on the embedded store, on a clock that reads each event's own
timestamp, so a day of traffic replays in seconds. Several events files
(the decision logs of a fleet's instances) are merged by timestamp as they
are read. The same rules and events give the same output, byte for byte.

With --rules, prints per rule how many checks it was evaluated on and would
have slowed, blocked or challenged, split by how each check's attempt went
(later_success: reported a success, a user who got in; failure;
unreported), how many distinct keys it would have limited, and when it
first limited the first few. Each rule is counted on its own, as if it were
the only rule: the replay evaluates every rule in shadow mode, whatever its
mode in the file.

With --compare, replays OLD and NEW side by side, each enforced as written
(shadow rules stay shadow), and prints the checks NEW decides differently
(another decision or another deciding rule), by rule and by change.

Events older than the one before them are replayed at the time of the one
before and counted. Malformed lines are reported as FILE:LINE: reason,
skipped and counted, never fatal. Exit status: 0 done, 1 the events could
not be read, 2 bad usage or a rules file that does not validate.
`

// maxMalformedShown is how many malformed lines replay describes on stderr;
// the rest are only counted.
const maxMalformedShown = 100

// progressAfter is how long a replay runs before it reports progress.
const progressAfter = 2 * time.Second

func replayCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := newCommand("guardian replay", replayHelp)
	fs := c.fs
	var rulesPath, format string
	var compare bool
	fs.StringVar(&rulesPath, "rules", "", "the rules `file` to replay (YAML)")
	fs.BoolVar(&compare, "compare", false, "compare two rules files: OLD.yaml NEW.yaml EVENTS.jsonl...")
	fs.StringVar(&format, "format", "table", "output: table (for people) or json (for machines)")
	pos, code, ok := c.parse(args, nil, stdout, stderr)
	if !ok {
		return code
	}
	if format != "table" && format != "json" {
		fmt.Fprintf(stderr, "guardian replay: --format: %q is not table or json\n", format)
		return exitUsage
	}
	var sets []*rules.Set
	switch {
	case compare && rulesPath != "":
		fmt.Fprintln(stderr, "guardian replay: give --rules FILE or --compare OLD NEW, not both")
		return exitUsage
	case compare && len(pos) < 3:
		fmt.Fprintln(stderr, "guardian replay: --compare takes OLD.yaml NEW.yaml EVENTS.jsonl...")
		return exitUsage
	case !compare && rulesPath == "":
		fmt.Fprintln(stderr, "guardian replay: --rules FILE is required (or --compare OLD.yaml NEW.yaml)")
		return exitUsage
	case !compare && len(pos) == 0:
		fmt.Fprintln(stderr, "guardian replay: want one or more events files (- for standard input)")
		return exitUsage
	case compare:
		sets = make([]*rules.Set, 2)
		sets[0], sets[1] = loadRulesFile(pos[0], stderr), loadRulesFile(pos[1], stderr)
	default:
		sets = []*rules.Set{loadRulesFile(rulesPath, stderr)}
	}
	for _, s := range sets {
		if s == nil {
			return exitUsage
		}
	}

	eventsPaths := pos
	if compare {
		eventsPaths = pos[2:]
	}
	srcs := make([]replay.Source, 0, len(eventsPaths))
	var size int64
	for i, path := range eventsPaths {
		if path == "-" && slices.Contains(eventsPaths[i+1:], "-") {
			fmt.Fprintln(stderr, "guardian replay: standard input (-) given twice")
			return exitUsage
		}
		in, n, err := openEvents(path)
		if err != nil {
			fmt.Fprintln(stderr, "guardian replay:", err)
			return exitFailure
		}
		defer in.Close()
		srcs = append(srcs, replay.Source{Name: path, R: in})
		size += n
	}

	shown, start, last := 0, time.Now(), time.Now()
	cfg := replay.Config{
		Malformed: func(e *replay.LineError) {
			if shown++; shown <= maxMalformedShown {
				fmt.Fprintln(stderr, e.Error())
			}
		},
		ProgressEvery: 50_000,
		Progress: func(p replay.Progress) {
			now := time.Now()
			if now.Sub(last) < progressAfter {
				return
			}
			last = now
			pct := ""
			if size > 0 {
				pct = fmt.Sprintf(" (%d%% of %d MiB)", p.Bytes*100/size, size>>20)
			}
			fmt.Fprintf(stderr, "guardian replay: %d lines%s, replay clock %s, %s elapsed\n",
				p.Lines, pct, p.Time.UTC().Format(event.TimeLayout), now.Sub(start).Round(time.Second))
		},
	}
	var out interface{ WriteTable(io.Writer) error }
	var err error
	if compare {
		out, err = replay.CompareSources(ctx, sets[0], sets[1], srcs, cfg)
	} else {
		out, err = replay.RunSources(ctx, sets[0], srcs, cfg)
	}
	if err != nil {
		fmt.Fprintln(stderr, "guardian replay:", err)
		return exitFailure
	}
	if shown > maxMalformedShown {
		fmt.Fprintf(stderr, "guardian replay: %d more malformed lines not shown\n", shown-maxMalformedShown)
	}
	return printResult(stdout, stderr, "guardian replay", format, out)
}

// printResult prints out as --format asks: indented JSON, or its table for
// people. A write that fails is reported on stderr as name's failure.
func printResult(stdout, stderr io.Writer, name, format string, out interface{ WriteTable(io.Writer) error }) int {
	var err error
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(out)
	} else {
		err = out.WriteTable(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitFailure
	}
	return exitOK
}

// loadRulesFile loads a rules file, or prints why it cannot be used, each
// error as FILE:LINE: message, and returns nil.
func loadRulesFile(path string, stderr io.Writer) *rules.Set {
	set, err := rules.Load(path, time.Now())
	if err == nil {
		return set
	}
	var errs rules.Errors
	if errors.As(err, &errs) {
		for _, e := range errs {
			fmt.Fprintln(stderr, e.Error())
		}
	} else {
		// No line to name: the file itself could not be read.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		fmt.Fprintf(stderr, "%s: cannot read the rules file: %v\n", path, err)
	}
	return nil
}

// openEvents opens the events file, "-" being standard input, and returns
// its size when known (0 otherwise).
func openEvents(path string) (io.ReadCloser, int64, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), 0, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	var size int64
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return f, size, nil
}
