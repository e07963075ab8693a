package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/guardian-sec/guardian/internal/rules"
)

const explainHelp = `Usage: guardian rules explain [--format table|json] [FILE]

Prints, for each rule of FILE (the built-in rules without FILE), the most
it lets one key spend in the rule's own window: a day for a rate rule,
burst + floor(24h × limit / per) units; in a row for consecutive failures;
its per for a failure rate or a distinct count: its limit. Shadow rules are
listed too, marked shadow in the MODE column, with what they would bound
once promoted. --format json prints
{"rules": [{"rule", "key", "mode", "per_day", "bound", "window", "what"}]},
where per_day is the rate rule's day and any other rule's limit.
`

// explainCmd is `guardian rules explain`.
func explainCmd(args []string, stdout, stderr io.Writer) int {
	c := newCommand("guardian rules explain", explainHelp)
	var format string
	c.fs.StringVar(&format, "format", "table", "output: table (for people) or json (for machines)")
	pos, code, ok := c.parse(args, nil, stdout, stderr)
	if !ok {
		return code
	}
	if format != "table" && format != "json" {
		c.fail(stderr, "--format: %q is not table or json", format)
		return exitUsage
	}
	if len(pos) > 1 {
		c.fail(stderr, "want at most one rules file")
		return exitUsage
	}
	set := rules.Default()
	if len(pos) == 1 {
		if set = loadRulesFile(pos[0], stderr); set == nil {
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
	fmt.Fprintln(tw, "RULE\tKEY\tMODE\tBOUND\tWHAT")
	for _, b := range bounds {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", b.Rule, b.Key, b.Mode, b, b.What)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintln(stderr, "guardian rules explain:", err)
		return exitFailure
	}
	return exitOK
}
