package rules

import (
	"log/slog"
	"slices"
)

// Changes is what changed from one rule set to the next, as a reload logs
// and audits it. Rules are named; a rule that keeps its name and changes a
// field is changed, not removed and added.
type Changes struct {
	// Added and Removed name the rules only the new or only the old set
	// has, each in its set's file order.
	Added   []string
	Removed []string
	// Changed are the rules of both sets whose definition differs, in the
	// new set's file order. Moving a rule in the file changes nothing.
	Changed []RuleChange
	// Settings names the top-level settings that changed
	// (familiar_networks).
	Settings []string
}

// RuleChange is one rule whose definition changed.
type RuleChange struct {
	Rule string `json:"rule"`
	// Fields are the rules-file names of the fields that changed, in the
	// order of the file format (flows, key, type, …).
	Fields []string `json:"fields"`
	// From and To are the rule's modes before and after, set when the mode
	// changed: a promotion is from shadow to enforce.
	From Mode `json:"mode_from,omitempty"`
	To   Mode `json:"mode_to,omitempty"`
}

// diffFields compares each field of a rule by its name in the rules file:
// every field of Rule but Name (what a rule is) and Line (where it is).
var diffFields = []struct {
	name  string
	equal func(a, b *Rule) bool
}{
	{"flows", func(a, b *Rule) bool { return slices.Equal(a.Flows, b.Flows) }},
	{"key", func(a, b *Rule) bool { return a.Key == b.Key }},
	{"type", func(a, b *Rule) bool { return a.Type == b.Type }},
	{"count", func(a, b *Rule) bool { return a.Count == b.Count }},
	{"of", func(a, b *Rule) bool { return a.Of == b.Of }},
	{"limit", func(a, b *Rule) bool { return a.Limit == b.Limit }},
	{"per", func(a, b *Rule) bool { return a.Per == b.Per }},
	{"burst", func(a, b *Rule) bool { return a.Burst == b.Burst }},
	{"action", func(a, b *Rule) bool { return a.Action == b.Action }},
	{"mode", func(a, b *Rule) bool { return a.Mode == b.Mode }},
	{"on_store_error", func(a, b *Rule) bool { return a.OnStoreError == b.OnStoreError }},
	{"ipv4_prefix", func(a, b *Rule) bool { return a.IPv4Prefix == b.IPv4Prefix }},
	{"ipv6_prefix", func(a, b *Rule) bool { return a.IPv6Prefix == b.IPv6Prefix }},
	{"hold", func(a, b *Rule) bool { return a.Hold == b.Hold }},
	{"hysteresis", func(a, b *Rule) bool { return a.Hysteresis == b.Hysteresis }},
}

// Diff returns what changed from old to next; old may be nil (nothing was
// loaded before), and then every rule of next is added.
func Diff(old, next *Set) Changes {
	ch := Changes{Added: []string{}, Removed: []string{}, Changed: []RuleChange{}, Settings: []string{}}
	before := map[string]*Rule{}
	if old != nil {
		for i := range old.Rules {
			before[old.Rules[i].Name] = &old.Rules[i]
		}
	}
	kept := map[string]bool{}
	for i := range next.Rules {
		r := &next.Rules[i]
		o, ok := before[r.Name]
		if !ok {
			ch.Added = append(ch.Added, r.Name)
			continue
		}
		kept[r.Name] = true
		rc := RuleChange{Rule: r.Name}
		for _, f := range diffFields {
			if !f.equal(o, r) {
				rc.Fields = append(rc.Fields, f.name)
			}
		}
		if rc.Fields == nil {
			continue
		}
		if o.Mode != r.Mode {
			rc.From, rc.To = o.Mode, r.Mode
		}
		ch.Changed = append(ch.Changed, rc)
	}
	if old != nil {
		for i := range old.Rules {
			if name := old.Rules[i].Name; !kept[name] {
				ch.Removed = append(ch.Removed, name)
			}
		}
		if old.Familiar != next.Familiar {
			ch.Settings = append(ch.Settings, "familiar_networks")
		}
	}
	return ch
}

// Promoted names the rules that went from shadow to enforce.
func (c *Changes) Promoted() []string { return c.moved(Shadow, Enforce) }

// Demoted names the rules that went from enforce to shadow.
func (c *Changes) Demoted() []string { return c.moved(Enforce, Shadow) }

func (c *Changes) moved(from, to Mode) []string {
	out := []string{}
	for _, rc := range c.Changed {
		if rc.From == from && rc.To == to {
			out = append(out, rc.Rule)
		}
	}
	return out
}

// Attrs returns c as the fields of a log line: rules_added, rules_removed
// and rules_changed (each rule with the names of its changed fields, and
// its modes when the mode changed), rules_promoted and rules_demoted (the
// mode changes by name), settings_changed. Every field is present, an empty
// list when nothing changed, so a log search never needs to tell an absent
// field from an empty one.
func (c *Changes) Attrs() []slog.Attr {
	return []slog.Attr{
		slog.Any("rules_added", c.Added),
		slog.Any("rules_removed", c.Removed),
		slog.Any("rules_changed", c.Changed),
		slog.Any("rules_promoted", c.Promoted()),
		slog.Any("rules_demoted", c.Demoted()),
		slog.Any("settings_changed", c.Settings),
	}
}
