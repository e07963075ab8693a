package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/guardian-sec/guardian/internal/rules"
)

const explainHelp = `usage:
  guardian rules explain [--format table|json] [FILE]

Prints, for each enforced rule of FILE (the built-in rules without FILE),
the most it lets one key spend in a day: for a rate rule
burst + floor(24h × limit / per) units, for any other rule its limit.
Shadow rules decide nothing and are left out. --format json prints
{"rules": [{"rule", "key", "per_day", "what"}]}.

Flags:
`

// explainCmd is `guardian rules explain`.
func explainCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("guardian rules explain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, explainHelp)
		fs.PrintDefaults()
	}
	var format string
	fs.StringVar(&format, "format", "table", "output: table (for people) or json (for machines)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if format != "table" && format != "json" {
		fmt.Fprintf(stderr, "guardian rules explain: --format: %q is not table or json\n", format)
		return exitUsage
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return exitUsage
	}
	set := rules.Default()
	if fs.NArg() == 1 {
		var err error
		if set, err = rules.Load(fs.Arg(0), time.Now()); err != nil {
			printRulesErrors(stderr, fs.Arg(0), err)
			return exitUsage
		}
	}
	bounds := set.Explain()
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string][]rules.Bound{"rules": bounds}); err != nil {
			fmt.Fprintln(stderr, "guardian rules explain:", err)
			return exitFailure
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tKEY\tPER DAY\tWHAT")
	for _, b := range bounds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", b.Rule, b.Key, strconv.FormatInt(b.PerDay, 10), b.What)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintln(stderr, "guardian rules explain:", err)
		return exitFailure
	}
	return exitOK
}
