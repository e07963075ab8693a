package rules

import (
	"bytes"
	"cmp"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// Bounds and defaults of the rules-file schema (README.md, "Rules").
const (
	maxLimit          = 1_000_000
	minInterval       = time.Microsecond
	defaultHold       = 90 * day
	defaultHysteresis = 30 * time.Second
	defaultIPv4Prefix = 32
	defaultIPv6Prefix = 64
)

//go:embed defaults.yaml
var defaultsYAML []byte

// builtin parses defaults.yaml once; a test proves it is valid.
var builtin = sync.OnceValue(func() *Set {
	s, err := Parse("builtin", defaultsYAML, time.Now())
	if err != nil {
		panic("rules: built-in defaults.yaml is invalid:\n" + err.Error())
	}
	return s
})

// Default returns the built-in rules, the contract's worked login
// configuration, with Source "builtin". The Set is built on the first call,
// which is its LoadedAt, and the same Set is returned on every call.
func Default() *Set { return builtin() }

// Load reads and parses the rules file at path, which becomes the Set's
// Source and the File of its errors. An unreadable file gives an error that
// wraps the os error and is not ErrInvalid.
func Load(path string, loadedAt time.Time) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	return Parse(path, data, loadedAt)
}

// Parse validates a rules file and compiles it into a Set with every default
// applied. source names the file in the Set and in errors. When the file is
// not valid, Parse returns an Errors listing every problem, sorted by line;
// it matches ErrInvalid.
func Parse(source string, data []byte, loadedAt time.Time) (*Set, error) {
	p := parser{file: source}
	rs := p.document(data)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b Error) int { return cmp.Compare(a.Line, b.Line) })
		return nil, p.errs
	}
	set := newSet(source, loadedAt, rs, p.familiar)
	set.Lists = p.static
	return set, nil
}

// parser walks the YAML node tree of one file, collecting every problem.
type parser struct {
	file     string
	errs     Errors
	familiar FamiliarNetworks
	// static is the file's lists (lists.go).
	static Lists
}

func (p *parser) errorf(line int, format string, args ...any) {
	p.errs = append(p.errs, Error{File: p.file, Line: max(line, 1), Msg: fmt.Sprintf(format, args...)})
}

// yamlLine matches the line number yaml.v3 puts in its syntax errors.
var yamlLine = regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`)

// SyntaxError returns the line a yaml.v3 syntax error names, 1 when it
// names none, and its message without yaml.v3's prefix: what every file
// guardian reads as YAML (rules, proxies) reports a syntax error at.
func SyntaxError(err error) (line int, msg string) {
	msg = err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		return line, m[2]
	}
	return 1, strings.TrimPrefix(msg, "yaml: ")
}

// syntaxError reports a YAML syntax error at the line yaml.v3 names.
func (p *parser) syntaxError(err error) {
	line, msg := SyntaxError(err)
	p.errorf(line, "invalid YAML: %s", msg)
}

// document checks the top level, version: 1 and rules: [...], and returns
// the valid rules.
func (p *parser) document(data []byte) []Rule {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf(1, "empty rules file, want version: 1 and a list of rules")
		} else {
			p.syntaxError(err)
		}
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		p.errorf(next.Line, "a second YAML document; a rules file holds one")
	case !errors.Is(err, io.EOF):
		p.syntaxError(err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		p.errorf(doc.Line, "empty rules file, want version: 1 and a list of rules")
		return nil
	}
	root := resolve(doc.Content[0])
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		p.errorf(root.Line, "empty rules file, want version: 1 and a list of rules")
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.errorf(root.Line, "top level: got %s, want a mapping with version and rules", describe(root))
		return nil
	}
	fs := p.fields(root, []string{"version", "rules", "familiar_networks", "lists"}, " at top level (want version, rules, familiar_networks and lists)")
	if f, ok := fs["familiar_networks"]; ok {
		p.familiarNetworks(f)
	}

	if f, ok := fs["version"]; !ok {
		p.errorf(root.Line, "version: required, want version: 1")
	} else if v, ok := intValue(f.value); !ok || v != 1 {
		p.errorf(f.key.Line, "version: got %s, want 1", describe(f.value))
	}

	f, ok := fs["rules"]
	if !ok {
		p.errorf(root.Line, "rules: required, want a list of rules")
		return nil
	}
	if f.value.Kind != yaml.SequenceNode {
		p.errorf(f.key.Line, "rules: got %s, want a list of rules", describe(f.value))
		return nil
	}
	if len(f.value.Content) == 0 {
		p.errorf(f.key.Line, "rules: got an empty list, want at least one rule")
		return nil
	}
	names := make(map[string]int)
	var rs []Rule
	for _, item := range f.value.Content {
		item = resolve(item)
		if item.Kind != yaml.MappingNode {
			p.errorf(item.Line, "rule: got %s, want a mapping of fields, like name: login-ip", describe(item))
			continue
		}
		if r, ok := p.rule(item, names); ok {
			rs = append(rs, r)
		}
	}
	p.settlingFit(rs)
	if l, ok := fs["lists"]; ok {
		p.staticLists(l, rs)
	}
	return rs
}

// settlingFit reports the rule that gives one flow more rules a report
// settles than an attempt id records (MaxSettlingRules): every rule of the
// flow that GivesBack, enforced or shadow.
func (p *parser) settlingFit(rs []Rule) {
	n := make(map[Flow]int)
	for i := range rs {
		if !rs[i].GivesBack() {
			continue
		}
		for _, f := range rs[i].Flows {
			if n[f]++; n[f] == MaxSettlingRules+1 {
				p.errorf(rs[i].Line, "flows: flow %s has more than %d rules that a report settles (type rate or distinct with count: failures, or consecutive_failures); an attempt id records at most %d", f, MaxSettlingRules, MaxSettlingRules)
			}
		}
	}
}

// familiarNetworks reads the top-level familiar_networks mapping: all three
// of ipv4_prefix, ipv6_prefix and hold are required, so that a file says
// exactly which networks it trusts for how long.
func (p *parser) familiarNetworks(f field) {
	if f.value.Kind != yaml.MappingNode {
		p.errorf(f.key.Line, "familiar_networks: got %s, want a mapping like {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}", describe(f.value))
		return
	}
	names := []string{"ipv4_prefix", "ipv6_prefix", "hold"}
	fs := p.fields(f.value, names, " in familiar_networks (want ipv4_prefix, ipv6_prefix and hold)")
	for _, name := range names {
		if _, ok := fs[name]; !ok {
			p.errorf(f.key.Line, "familiar_networks: %s: required", name)
		}
	}
	var fam FamiliarNetworks
	ok := len(fs) == len(names)
	if v, has := fs["ipv4_prefix"]; has {
		n, good := p.integer(v, "familiar_networks: ipv4_prefix", 8, 32)
		fam.IPv4Prefix, ok = int(n), ok && good
	}
	if v, has := fs["ipv6_prefix"]; has {
		n, good := p.integer(v, "familiar_networks: ipv6_prefix", 16, 128)
		fam.IPv6Prefix, ok = int(n), ok && good
	}
	if v, has := fs["hold"]; has {
		d, good := p.duration(v, "familiar_networks: hold", true)
		fam.Hold, ok = d, ok && good
	}
	if ok {
		p.familiar = fam
	}
}

// field is one key: value pair of a mapping, its value's aliases resolved.
type field struct {
	key, value *yaml.Node
}

// fields indexes mapping m by key, reporting keys not in known (with hint
// appended to the message) and keys given twice.
func (p *parser) fields(m *yaml.Node, known []string, hint string) map[string]field {
	fs := make(map[string]field, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := resolve(m.Content[i])
		switch {
		case k.Kind != yaml.ScalarNode:
			p.errorf(k.Line, "got %s as a field name, want a plain word", describe(k))
		case k.ShortTag() == "!!merge":
			p.errorf(k.Line, "merge keys (<<) are not supported; write each field out")
		case !slices.Contains(known, k.Value):
			p.errorf(k.Line, "unknown field %s%s", quote(k.Value), hint)
		default:
			if first, dup := fs[k.Value]; dup {
				p.errorf(k.Line, "duplicate field %q (first at line %d)", k.Value, first.key.Line)
				continue
			}
			fs[k.Value] = field{key: k, value: resolve(m.Content[i+1])}
		}
	}
	return fs
}

// ruleFields are the fields a rule may have.
var ruleFields = []string{
	"name", "flows", "key", "type", "count", "limit", "per", "burst", "action",
	"mode", "on_store_error", "ipv4_prefix", "ipv6_prefix", "hold", "hysteresis", "of",
}

// ruleName is the syntax of a rule name: 1 to 63 of [a-z0-9-], neither
// starting nor ending with '-'.
var ruleName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// rule validates one rule mapping and applies its defaults. names maps the
// names seen so far to their lines; rule adds its own. It reports whether the
// rule is valid.
func (p *parser) rule(m *yaml.Node, names map[string]int) (Rule, bool) {
	before := len(p.errs)
	rp := &ruleParse{
		parser: p,
		fs:     p.fields(m, ruleFields, " in a rule"),
		line:   m.Line,
		r:      Rule{Line: m.Line, Mode: Enforce, OnStoreError: Local},
	}
	rp.common(names)
	// The fields that belong to some types only. While the type is itself
	// invalid, their values are still checked, their presence is not.
	switch {
	case !rp.typeOK:
		rp.anyType()
	case rp.r.Type == Rate:
		rp.rate()
	case rp.r.Type == ConsecutiveFailures:
		rp.consecutiveFailures()
	case rp.r.Type == FailureRate:
		rp.failureRate()
	case rp.r.Type == Distinct:
		rp.distinct()
	}
	if rp.typeOK && rp.r.Type != Distinct {
		rp.notFor("of")
	}
	rp.prefixes()
	rp.keyFitsType()
	if rp.typeOK && rp.r.Type == Rate {
		rp.rateBounds()
	}
	return rp.r, len(p.errs) == before
}

// ruleParse is one rule being read: its fields, the rule so far, and which
// of the fields others depend on were valid.
type ruleParse struct {
	*parser
	fs   map[string]field
	line int // the rule's own line
	r    Rule

	keyOK, typeOK, limitOK, perOK, burstOK bool
	burstLine                              int
}

// common reads the fields every rule has: name, flows, key, type, limit,
// action, mode and on_store_error.
func (rp *ruleParse) common(names map[string]int) {
	fs, r := rp.fs, &rp.r
	if f, ok := fs["name"]; !ok {
		rp.errorf(rp.line, "name: required")
	} else if v := f.value; v.Kind != yaml.ScalarNode || !ruleName.MatchString(v.Value) {
		rp.errorf(f.key.Line, "name: got %s, want 1 to 63 of a-z, 0-9 and '-', not starting or ending with '-'", describe(v))
	} else if v.Value == DenyListRule {
		rp.errorf(f.key.Line, "name: %q is what a check a deny list blocks names; choose another", v.Value)
	} else if first, dup := names[v.Value]; dup {
		rp.errorf(f.key.Line, "name: %q is already the name of the rule at line %d", v.Value, first)
	} else {
		r.Name = v.Value
		names[v.Value] = rp.line
	}

	if f, ok := fs["flows"]; !ok {
		rp.errorf(rp.line, "flows: required, want a list like [login]")
	} else {
		r.Flows = rp.flows(f)
	}

	if f, ok := fs["key"]; !ok {
		rp.errorf(rp.line, "key: required, want one of %s", or(keys))
	} else {
		r.Key, rp.keyOK = enum(rp.parser, f, "key", keys)
	}
	if f, ok := fs["type"]; !ok {
		rp.errorf(rp.line, "type: required, want one of %s", or(types))
	} else {
		r.Type, rp.typeOK = enum(rp.parser, f, "type", types)
	}
	if f, ok := fs["limit"]; !ok {
		rp.errorf(rp.line, "limit: required, want an integer from 1 to %d", maxLimit)
	} else {
		r.Limit, rp.limitOK = rp.integer(f, "limit", 1, maxLimit)
	}
	if f, ok := fs["action"]; ok {
		r.Action, _ = enum(rp.parser, f, "action", actions)
	} else if rp.typeOK {
		r.Action = defaultAction[r.Type]
	}
	if f, ok := fs["mode"]; ok {
		r.Mode, _ = enum(rp.parser, f, "mode", modes)
	}
	if f, ok := fs["on_store_error"]; ok {
		r.OnStoreError, _ = enum(rp.parser, f, "on_store_error", storeErrors)
	}
}

// rate reads a rate rule's per, count and burst.
func (rp *ruleParse) rate() {
	rp.per(true)
	if f, ok := rp.fs["count"]; ok {
		rp.r.Count, _ = enum(rp.parser, f, "count", counts)
	} else {
		rp.r.Count = Attempts
	}
	rp.burstOK, rp.burstLine = rp.limitOK, rp.line
	if f, ok := rp.fs["burst"]; ok {
		rp.burst(f)
	} else {
		rp.r.Burst = rp.r.Limit
	}
	rp.notFor("hold", "hysteresis")
}

// consecutiveFailures reads a consecutive_failures rule's hold.
func (rp *ruleParse) consecutiveFailures() {
	rp.notFor("per", "count", "burst")
	if f, ok := rp.fs["hold"]; ok {
		rp.r.Hold, _ = rp.duration(f, "hold", true)
	} else {
		rp.r.Hold = defaultHold
	}
	rp.notFor("hysteresis")
}

// failureRate reads a failure_rate rule's per and hysteresis.
func (rp *ruleParse) failureRate() {
	rp.per(true)
	rp.notFor("count", "burst", "hold")
	if f, ok := rp.fs["hysteresis"]; ok {
		rp.r.Hysteresis, _ = rp.duration(f, "hysteresis", false)
	} else {
		rp.r.Hysteresis = defaultHysteresis
	}
}

// distinctOf is what a distinct rule may count distinct values of.
var distinctOf = []Key{KeyAccount}

// distinctActions are the actions a distinct rule may take: it never blocks.
var distinctActions = []Action{Challenge, Slow}

// distinct reads a distinct rule's of, count and per, and checks its key
// and action: per key ip (with its prefixes), distinct accounts over per,
// challenged or slowed.
func (rp *ruleParse) distinct() {
	rp.per(true)
	if f, ok := rp.fs["of"]; !ok {
		rp.errorf(rp.line, "of: required for type distinct, want %s", or(distinctOf))
	} else {
		rp.r.Of, _ = enum(rp.parser, f, "of", distinctOf)
	}
	if f, ok := rp.fs["count"]; ok {
		rp.r.Count, _ = enum(rp.parser, f, "count", counts)
	} else {
		rp.r.Count = Failures
	}
	rp.notFor("burst", "hold", "hysteresis")
	if f, ok := rp.fs["action"]; ok && rp.r.Action != "" && !slices.Contains(distinctActions, rp.r.Action) {
		rp.errorf(f.key.Line, "action: type distinct takes %s, got %s", or(distinctActions), rp.r.Action)
	}
}

// anyType checks the values of the type-specific fields given to a rule
// whose type is invalid, and requires none of them.
func (rp *ruleParse) anyType() {
	rp.per(false)
	if f, ok := rp.fs["count"]; ok {
		rp.r.Count, _ = enum(rp.parser, f, "count", counts)
	}
	if f, ok := rp.fs["burst"]; ok {
		rp.burst(f)
	}
	if f, ok := rp.fs["hold"]; ok {
		rp.r.Hold, _ = rp.duration(f, "hold", true)
	}
	if f, ok := rp.fs["hysteresis"]; ok {
		rp.r.Hysteresis, _ = rp.duration(f, "hysteresis", false)
	}
}

// per reads the rule's per, required when the type needs it.
func (rp *ruleParse) per(required bool) {
	if f, ok := rp.fs["per"]; ok {
		rp.r.Per, rp.perOK = rp.duration(f, "per", true)
	} else if required {
		rp.errorf(rp.line, "per: required for type %s", rp.r.Type)
	}
}

// burst reads the rule's burst from f.
func (rp *ruleParse) burst(f field) {
	rp.r.Burst, rp.burstOK = rp.integer(f, "burst", 1, maxLimit)
	rp.burstLine = f.key.Line
}

// notFor reports each of the named fields the rule has: its type has none
// of them.
func (rp *ruleParse) notFor(names ...string) {
	for _, name := range names {
		if f, ok := rp.fs[name]; ok {
			rp.errorf(f.key.Line, "%s: not allowed for type %s", name, rp.r.Type)
		}
	}
}

// prefixes reads ipv4_prefix and ipv6_prefix, which only key: ip rules
// have, and defaults them there.
func (rp *ruleParse) prefixes() {
	r := &rp.r
	for _, pf := range []struct {
		name string
		max  int64
		def  int
		dst  *int
	}{
		{"ipv4_prefix", 32, defaultIPv4Prefix, &r.IPv4Prefix},
		{"ipv6_prefix", 128, defaultIPv6Prefix, &r.IPv6Prefix},
	} {
		f, ok := rp.fs[pf.name]
		switch {
		case ok && rp.keyOK && r.Key != KeyIP:
			rp.errorf(f.key.Line, "%s: not allowed for key %s", pf.name, r.Key)
		case ok:
			v, _ := rp.integer(f, pf.name, 1, pf.max)
			*pf.dst = int(v)
		case rp.keyOK && r.Key == KeyIP:
			*pf.dst = pf.def
		}
	}
}

// keyFitsType reports a global key on a type other than failure_rate, and
// the reverse.
func (rp *ruleParse) keyFitsType() {
	if !rp.typeOK || !rp.keyOK {
		return
	}
	line := rp.fs["key"].key.Line
	switch r := &rp.r; {
	case r.Key == KeyGlobal && r.Type != FailureRate:
		rp.errorf(line, "key: global is only for type failure_rate")
	case r.Type == FailureRate && r.Key != KeyGlobal:
		rp.errorf(line, "key: type failure_rate needs key global, got %s", r.Key)
	case r.Type == Distinct && r.Key != KeyIP:
		rp.errorf(line, "key: type distinct needs key ip, got %s", r.Key)
	}
}

// rateBounds checks a rate rule's interval and tolerance: the store keeps
// GCRA state in microseconds, so the emission interval must be at least
// one, and the tolerance must fit with room to spare.
func (rp *ruleParse) rateBounds() {
	if !rp.limitOK || !rp.perOK || !rp.burstOK {
		return
	}
	if iv := rp.r.Interval(); iv < minInterval {
		rp.errorf(rp.fs["limit"].key.Line, "limit: per/limit is %v, want at least 1µs: lower limit or raise per", iv)
	} else if iv > MaxDuration/time.Duration(rp.r.Burst) {
		rp.errorf(rp.burstLine, "burst: burst×per/limit exceeds 366d, the longest tolerance guardian keeps: lower burst or per")
	}
}

// flows returns the flows listed by f, reporting unknown and repeated ones.
func (p *parser) flows(f field) []Flow {
	v := f.value
	if v.Kind != yaml.SequenceNode {
		p.errorf(f.key.Line, "flows: got %s, want a list like [login]", describe(v))
		return nil
	}
	if len(v.Content) == 0 {
		p.errorf(f.key.Line, "flows: got an empty list, want at least one of %s", or(Flows))
		return nil
	}
	var fl []Flow
	for _, item := range v.Content {
		item = resolve(item)
		flow, ok := ParseFlow(item.Value)
		switch {
		case item.Kind != yaml.ScalarNode || !ok:
			p.errorf(item.Line, "flows: got %s, want %s", describe(item), or(Flows))
		case slices.Contains(fl, flow):
			p.errorf(item.Line, "flows: %s is listed twice", flow)
		default:
			fl = append(fl, flow)
		}
	}
	return fl
}

// The values of the enumerated fields, in the contract's order.
var (
	keys        = []Key{KeyAccount, KeyIP, KeyAccountIP, KeyRecipient, KeyGlobal, KeySecret}
	types       = []Type{Rate, ConsecutiveFailures, FailureRate, Distinct}
	counts      = []Count{Failures, Attempts}
	actions     = []Action{Slow, Block, Challenge}
	modes       = []Mode{Enforce, Shadow}
	storeErrors = []OnStoreError{Local, Closed, Open}
)

// defaultAction is the action of a rule that states none.
var defaultAction = map[Type]Action{Rate: Slow, ConsecutiveFailures: Block, FailureRate: Challenge, Distinct: Challenge}

// enum returns f's value if it is one of allowed.
func enum[T ~string](p *parser, f field, name string, allowed []T) (T, bool) {
	v := f.value
	if v.Kind == yaml.ScalarNode && v.ShortTag() != "!!null" && slices.Contains(allowed, T(v.Value)) {
		return T(v.Value), true
	}
	p.errorf(f.key.Line, "%s: got %s, want %s", name, describe(v), or(allowed))
	return "", false
}

// integer returns f's value if it is an integer from lo to hi.
func (p *parser) integer(f field, name string, lo, hi int64) (int64, bool) {
	if v, ok := intValue(f.value); ok && lo <= v && v <= hi {
		return v, true
	}
	p.errorf(f.key.Line, "%s: got %s, want an integer from %d to %d", name, describe(f.value), lo, hi)
	return 0, false
}

// intValue returns the value of an integer scalar; a float, even a whole
// one, or a quoted number is not an integer.
func intValue(n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		return 0, false
	}
	return v, true
}

// duration returns f's value if it is a duration, more than zero if positive.
func (p *parser) duration(f field, name string, positive bool) (time.Duration, bool) {
	v := f.value
	if v.Kind != yaml.ScalarNode || v.ShortTag() == "!!null" {
		p.errorf(f.key.Line, "%s: got %s, want a duration like 1m or 1h30m", name, describe(v))
		return 0, false
	}
	d, why := parseDuration(v.Value)
	switch {
	case why != "":
		p.errorf(f.key.Line, "%s: invalid duration %s: %s", name, quote(v.Value), why)
		return 0, false
	case positive && d == 0:
		p.errorf(f.key.Line, "%s: got %s, want more than 0s", name, quote(v.Value))
		return 0, false
	}
	return d, true
}

// resolve follows aliases to the node they name.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

// describe names a node's value for an error message.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "nothing"
		case "!!int", "!!float", "!!bool":
			return shorten(n.Value)
		}
		return quote(n.Value)
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			return "an empty list"
		}
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "an alias"
}

// quote quotes s for a message, shortened if long.
func quote(s string) string { return strconv.Quote(shorten(s)) }

// shorten cuts s to a length that reads well in a message.
func shorten(s string) string {
	const maxLen = 64
	if len(s) > maxLen {
		return s[:maxLen] + "..."
	}
	return s
}

// or lists values as "a, b or c".
func or[T ~string](values []T) string {
	var b strings.Builder
	for i, v := range values {
		switch {
		case i == 0:
		case i == len(values)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(string(v))
	}
	return b.String()
}
