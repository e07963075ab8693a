package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
)

// ErrInvalid is matched, through errors.Is, by every error Parse and Load
// return for a proxy file that is not valid. A file that cannot be read is
// not ErrInvalid.
var ErrInvalid = errors.New("gateway: invalid proxy file")

// Error is one problem in a proxy file, at a line.
type Error struct {
	File string
	Line int
	Msg  string
}

// Error renders the problem as FILE:LINE: message.
func (e Error) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Is makes errors.Is(e, ErrInvalid) true.
func (e Error) Is(target error) bool { return target == ErrInvalid }

// Errors is every problem found in a proxy file, in line order.
type Errors []Error

// Error renders one FILE:LINE: message line per problem.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(es, ErrInvalid) true.
func (es Errors) Is(target error) bool { return target == ErrInvalid }

// Mode says whether a proxy stops what guardian denies.
type Mode string

// The modes of a proxy: enforce stops what is denied; observe decides,
// counts and logs, and forwards everything.
const (
	Enforce Mode = "enforce"
	Observe Mode = "observe"
)

// File is a parsed proxy file: the proxies `guardian serve --proxy` runs.
type File struct {
	// Source is the path the file was read from.
	Source  string
	Proxies []Proxy
}

// Proxy is one listener in front of one upstream.
type Proxy struct {
	// Name is the proxy's label in metrics: its listen address.
	Name     string
	Listen   string
	Upstream *url.URL
	// TrustedProxies are the peers whose X-Forwarded-For and
	// X-Forwarded-Proto are believed.
	TrustedProxies []netip.Prefix
	Mode           Mode
	// Tenant is the tenant the proxy's checks count in (keys.WithTenant);
	// empty: none, as an API call without a tenant.
	Tenant string
	Routes []Route
}

// Route is a login endpoint behind a proxy: which requests it matches, how
// the check is extracted from them and how the upstream's answer is read.
type Route struct {
	Name string
	// Path matches one path exactly; PathPrefix every path under it. One
	// of them is set.
	Path, PathPrefix string
	// Methods are the methods matched, upper case; nil matches any.
	Methods []string
	Flow    rules.Flow
	Account Extractor
	// Secret is where the guessed secret is; the zero Extractor: nowhere.
	Secret Extractor
	// Failure and Success classify the upstream's answer: the first list
	// with a matching item wins, Failure first; neither leaves the attempt
	// unreported.
	Failure, Success []Matcher
	Challenge        Challenge
	// Breached says what a secret found in the breached-password filter
	// does to a login; empty: nothing.
	Breached BreachedAction
}

// Source says where in a request a value is.
type Source string

// The sources of an Extractor.
const (
	BasicAuth Source = "basic_auth"
	Form      Source = "form"
	JSON      Source = "json"
	Header    Source = "header"
	Query     Source = "query"
)

var sources = []Source{BasicAuth, Form, JSON, Header, Query}

// Extractor names where a value is in a request: with BasicAuth, Name is
// user or password; with Form and Query a field name; with JSON an RFC 6901
// pointer; with Header a header name (canonical form).
type Extractor struct {
	Source Source
	Name   string
}

// IsZero reports whether x extracts nothing.
func (x Extractor) IsZero() bool { return x.Source == "" }

// Matcher is one item of an outcome list: every condition it has must hold.
type Matcher struct {
	Status         []int
	LocationPrefix string
	// SetCookie is a cookie name the answer sets.
	SetCookie string
	// BodyContains and BodyLacks look in the first 64 KiB of the body;
	// Has* tell an empty string from an absent condition.
	BodyContains, BodyLacks       string
	HasBodyContains, HasBodyLacks bool
}

// readsBody reports whether m looks at the body.
func (m *Matcher) readsBody() bool { return m.HasBodyContains || m.HasBodyLacks }

// ChallengeType is how a proxy answers a challenge decision.
type ChallengeType string

// The challenge types.
const (
	ProofOfWork ChallengeType = "proof_of_work"
	StatusOnly  ChallengeType = "status"
)

// Challenge is how a route answers a challenge. The zero Challenge is the
// default: proof_of_work at DefaultDifficulty.
type Challenge struct {
	Type ChallengeType
	// Difficulty is the leading zero bits of a proof of work.
	Difficulty int
	// Status is the answer's status of type status.
	Status int
}

// DefaultDifficulty is a proof of work's difficulty when the route names
// none: about 260,000 hashes, a fraction of a second in a browser.
const DefaultDifficulty = 18

// maxDifficulty bounds a proof of work a browser can be asked for.
const maxDifficulty = 28

// BreachedAction is what a breached secret does to a login.
type BreachedAction string

// The breached actions: header tells the upstream (X-Guardian-Breached: 1),
// challenge asks for the route's challenge first, block refuses the login.
const (
	BreachedHeader    BreachedAction = "header"
	BreachedChallenge BreachedAction = "challenge"
	BreachedBlock     BreachedAction = "block"
)

// Load reads and parses the proxy file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return Parse(path, data)
}

// Parse validates a proxy file. When it is not valid, Parse returns an
// Errors listing every problem, in line order; it matches ErrInvalid.
func Parse(source string, data []byte) (*File, error) {
	p := parser{file: source}
	f := p.document(data)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b Error) int { return a.Line - b.Line })
		return nil, p.errs
	}
	f.Source = source
	return f, nil
}

type parser struct {
	file string
	errs Errors
}

func (p *parser) errorf(line int, format string, args ...any) {
	p.errs = append(p.errs, Error{File: p.file, Line: max(line, 1), Msg: fmt.Sprintf(format, args...)})
}

// syntaxError reports a YAML syntax error at the line yaml.v3 names, as
// the rules file does.
func (p *parser) syntaxError(err error) {
	line, msg := rules.SyntaxError(err)
	p.errorf(line, "invalid YAML: %s", msg)
}

const wantTop = "want version: 1 and a list of proxies"

func (p *parser) document(data []byte) *File {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errorf(1, "empty proxy file, %s", wantTop)
		} else {
			p.syntaxError(err)
		}
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		p.errorf(next.Line, "a second YAML document; a proxy file holds one")
	case !errors.Is(err, io.EOF):
		p.syntaxError(err)
	}
	if len(doc.Content) != 1 {
		p.errorf(doc.Line, "empty proxy file, %s", wantTop)
		return nil
	}
	root := resolve(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		p.errorf(root.Line, "top level: got %s, %s", describe(root), wantTop)
		return nil
	}
	fs := p.fields(root, "at top level", "version", "proxies")
	if v, ok := fs["version"]; !ok {
		p.errorf(root.Line, "version: required, want version: 1")
	} else if n, ok := intValue(v.value); !ok || n != 1 {
		p.errorf(v.key.Line, "version: got %s, want 1", describe(v.value))
	}
	f := &File{}
	list, ok := fs["proxies"]
	if !ok {
		p.errorf(root.Line, "proxies: required, a list of proxies")
		return f
	}
	if list.value.Kind != yaml.SequenceNode || len(list.value.Content) == 0 {
		p.errorf(list.key.Line, "proxies: got %s, want a list of at least one proxy", describe(list.value))
		return f
	}
	listens := map[string]int{}
	for _, item := range list.value.Content {
		if px, ok := p.proxy(resolve(item), listens); ok {
			f.Proxies = append(f.Proxies, px)
		}
	}
	return f
}

type field struct{ key, value *yaml.Node }

// fields indexes mapping m, reporting unknown and duplicate keys.
func (p *parser) fields(m *yaml.Node, where string, known ...string) map[string]field {
	fs := make(map[string]field, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := resolve(m.Content[i])
		switch {
		case k.Kind != yaml.ScalarNode:
			p.errorf(k.Line, "got %s as a field name, want a plain word", describe(k))
		case !slices.Contains(known, k.Value):
			p.errorf(k.Line, "unknown field %s %s (want %s)", quote(k.Value), where, strings.Join(known, ", "))
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

// mapping returns the fields of f's value, a mapping, or reports it.
func (p *parser) mapping(f field, name, want string, known ...string) (map[string]field, bool) {
	if f.value.Kind != yaml.MappingNode {
		p.errorf(f.key.Line, "%s: got %s, want %s", name, describe(f.value), want)
		return nil, false
	}
	return p.fields(f.value, "in "+name, known...), true
}

// str returns the string value of f, reporting anything else.
func (p *parser) str(f field, name string) (string, bool) {
	v := f.value
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" || v.Value == "" {
		p.errorf(f.key.Line, "%s: got %s, want a non-empty string", name, describe(v))
		return "", false
	}
	return v.Value, true
}

func (p *parser) proxy(m *yaml.Node, listens map[string]int) (Proxy, bool) {
	before := len(p.errs)
	var px Proxy
	if m.Kind != yaml.MappingNode {
		p.errorf(m.Line, "proxy: got %s, want a mapping with listen, upstream and routes", describe(m))
		return px, false
	}
	fs := p.fields(m, "in a proxy", "listen", "upstream", "trusted_proxies", "mode", "tenant", "routes")
	if f, ok := fs["listen"]; !ok {
		p.errorf(m.Line, "listen: required, an address like 127.0.0.1:8081")
	} else if s, ok := p.str(f, "listen"); ok {
		if _, _, err := net.SplitHostPort(s); err != nil {
			p.errorf(f.key.Line, "listen: %s is not host:port", quote(s))
		} else if first, dup := listens[s]; dup {
			p.errorf(f.key.Line, "listen: %s is the listen address of the proxy at line %d too", quote(s), first)
		} else {
			listens[s] = f.key.Line
			px.Listen, px.Name = s, s
		}
	}
	if f, ok := fs["upstream"]; !ok {
		p.errorf(m.Line, "upstream: required, a URL like http://127.0.0.1:5232")
	} else if s, ok := p.str(f, "upstream"); ok {
		u, err := url.Parse(s)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https"):
			p.errorf(f.key.Line, "upstream: %s is not an http:// or https:// URL with a host", quote(s))
		case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
			p.errorf(f.key.Line, "upstream: %s: a query, fragment or user does not belong in an upstream", quote(s))
		default:
			px.Upstream = u
		}
	}
	if f, ok := fs["trusted_proxies"]; ok {
		px.TrustedProxies = p.prefixes(f)
	}
	px.Mode = Enforce
	if f, ok := fs["mode"]; ok {
		if s, ok := p.str(f, "mode"); ok {
			if px.Mode = Mode(s); px.Mode != Enforce && px.Mode != Observe {
				p.errorf(f.key.Line, "mode: got %s, want enforce or observe", quote(s))
			}
		}
	}
	if f, ok := fs["tenant"]; ok {
		if s, ok := p.str(f, "tenant"); ok {
			if err := keys.CheckTenant(s); err != nil {
				p.errorf(f.key.Line, "tenant: %v", err)
			} else {
				px.Tenant = s
			}
		}
	}
	if f, ok := fs["routes"]; !ok {
		p.errorf(m.Line, "routes: required, a list of routes")
	} else if f.value.Kind != yaml.SequenceNode || len(f.value.Content) == 0 {
		p.errorf(f.key.Line, "routes: got %s, want a list of at least one route", describe(f.value))
	} else {
		names := map[string]int{}
		for _, item := range f.value.Content {
			if r, ok := p.route(resolve(item), names); ok {
				px.Routes = append(px.Routes, r)
			}
		}
	}
	return px, len(p.errs) == before
}

func (p *parser) prefixes(f field) []netip.Prefix {
	if f.value.Kind != yaml.SequenceNode {
		p.errorf(f.key.Line, "trusted_proxies: got %s, want a list of networks like 10.0.0.0/8", describe(f.value))
		return nil
	}
	var out []netip.Prefix
	for _, item := range f.value.Content {
		item = resolve(item)
		pf, err := netip.ParsePrefix(item.Value)
		if err != nil {
			if a, aerr := netip.ParseAddr(item.Value); aerr == nil {
				pf, err = a.Prefix(a.BitLen())
			}
		}
		if item.Kind != yaml.ScalarNode || err != nil {
			p.errorf(item.Line, "trusted_proxies: %s is not a network (10.0.0.0/8) or an address", describe(item))
			continue
		}
		out = append(out, pf.Masked())
	}
	return out
}

var routeName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (p *parser) route(m *yaml.Node, names map[string]int) (Route, bool) {
	before := len(p.errs)
	var r Route
	if m.Kind != yaml.MappingNode {
		p.errorf(m.Line, "route: got %s, want a mapping with name, match, flow, account and outcome", describe(m))
		return r, false
	}
	fs := p.fields(m, "in a route", "name", "match", "flow", "account", "secret", "outcome", "challenge", "breached")
	if f, ok := fs["name"]; !ok {
		p.errorf(m.Line, "name: required, [a-z0-9-]")
	} else if s, ok := p.str(f, "name"); ok {
		switch first, dup := names[s]; {
		case !routeName.MatchString(s):
			p.errorf(f.key.Line, "name: %s: want 1 to 63 of [a-z0-9-], not starting or ending with -", quote(s))
		case dup:
			p.errorf(f.key.Line, "name: %s is the name of the route at line %d too", quote(s), first)
		default:
			names[s], r.Name = f.key.Line, s
		}
	}
	if f, ok := fs["match"]; !ok {
		p.errorf(m.Line, "match: required, like {path: /login, methods: [POST]}")
	} else {
		p.match(f, &r)
	}
	if f, ok := fs["flow"]; !ok {
		p.errorf(m.Line, "flow: required, login or password_reset")
	} else if s, ok := p.str(f, "flow"); ok {
		fl, known := rules.ParseFlow(s)
		if !known || (fl != rules.Login && fl != rules.PasswordReset && fl != rules.OTPVerify) {
			p.errorf(f.key.Line, "flow: got %s, want login, password_reset or otp_verify", quote(s))
		}
		r.Flow = fl
	}
	if f, ok := fs["account"]; !ok {
		p.errorf(m.Line, "account: required, like {basic_auth: user} or {form: username}")
	} else {
		r.Account = p.extractor(f, "account", "user")
	}
	if f, ok := fs["secret"]; ok {
		r.Secret = p.extractor(f, "secret", "password")
	}
	if f, ok := fs["outcome"]; !ok {
		p.errorf(m.Line, "outcome: required, with failure and success lists")
	} else if ofs, ok := p.mapping(f, "outcome", "a mapping with failure and success", "failure", "success"); ok {
		for _, name := range []string{"failure", "success"} {
			lf, ok := ofs[name]
			if !ok {
				p.errorf(f.key.Line, "outcome: %s: required, a list like [{status: [401]}]", name)
				continue
			}
			ms := p.matchers(lf, "outcome: "+name)
			if name == "failure" {
				r.Failure = ms
			} else {
				r.Success = ms
			}
		}
	}
	if f, ok := fs["challenge"]; ok {
		r.Challenge = p.challenge(f)
	}
	if f, ok := fs["breached"]; ok {
		if bfs, ok := p.mapping(f, "breached", "{on_login: header|challenge|block}", "on_login"); ok {
			if of, ok := bfs["on_login"]; !ok {
				p.errorf(f.key.Line, "breached: on_login: required, header, challenge or block")
			} else if s, ok := p.str(of, "breached: on_login"); ok {
				if r.Breached = BreachedAction(s); !slices.Contains([]BreachedAction{BreachedHeader, BreachedChallenge, BreachedBlock}, r.Breached) {
					p.errorf(of.key.Line, "breached: on_login: got %s, want header, challenge or block", quote(s))
				}
			}
			if _, has := fs["secret"]; !has {
				p.errorf(f.key.Line, "breached: needs a secret to look up; add secret: to the route")
			}
		}
	}
	return r, len(p.errs) == before
}

var methodToken = regexp.MustCompile(`^[A-Za-z]{1,20}$`)

func (p *parser) match(f field, r *Route) {
	fs, ok := p.mapping(f, "match", "{path: /login, methods: [POST]} or {path_prefix: /}", "path", "path_prefix", "methods")
	if !ok {
		return
	}
	pf, hasPath := fs["path"]
	xf, hasPrefix := fs["path_prefix"]
	switch {
	case hasPath == hasPrefix:
		p.errorf(f.key.Line, "match: want exactly one of path and path_prefix")
	case hasPath:
		if s, ok := p.str(pf, "match: path"); ok && !strings.HasPrefix(s, "/") {
			p.errorf(pf.key.Line, "match: path: %s does not start with /", quote(s))
		} else {
			r.Path = s
		}
	default:
		if s, ok := p.str(xf, "match: path_prefix"); ok && !strings.HasPrefix(s, "/") {
			p.errorf(xf.key.Line, "match: path_prefix: %s does not start with /", quote(s))
		} else {
			r.PathPrefix = s
		}
	}
	mf, ok := fs["methods"]
	if !ok {
		return
	}
	if mf.value.Kind != yaml.SequenceNode || len(mf.value.Content) == 0 {
		p.errorf(mf.key.Line, "match: methods: got %s, want a list like [POST] or [any]", describe(mf.value))
		return
	}
	for _, item := range mf.value.Content {
		item = resolve(item)
		switch {
		case item.Kind != yaml.ScalarNode || !methodToken.MatchString(item.Value):
			p.errorf(item.Line, "match: methods: %s is not a method like POST, or any", describe(item))
		case strings.EqualFold(item.Value, "any"):
			if len(mf.value.Content) > 1 {
				p.errorf(item.Line, "match: methods: any stands alone")
			}
			r.Methods = nil
			return
		default:
			r.Methods = append(r.Methods, strings.ToUpper(item.Value))
		}
	}
}

// extractor reads {SOURCE: NAME}; basic is the one name basic_auth allows.
func (p *parser) extractor(f field, name, basic string) Extractor {
	want := fmt.Sprintf("one of {basic_auth: %s}, {form: FIELD}, {json: /POINTER}, {header: NAME}, {query: FIELD}", basic)
	if f.value.Kind != yaml.MappingNode || len(f.value.Content) != 2 {
		p.errorf(f.key.Line, "%s: got %s, want %s", name, describe(f.value), want)
		return Extractor{}
	}
	k, v := resolve(f.value.Content[0]), resolve(f.value.Content[1])
	src := Source(k.Value)
	if k.Kind != yaml.ScalarNode || !slices.Contains(sources, src) {
		p.errorf(k.Line, "%s: unknown source %s, want %s", name, describe(k), want)
		return Extractor{}
	}
	val, ok := p.str(field{key: k, value: v}, name+": "+string(src))
	if !ok {
		return Extractor{}
	}
	switch src {
	case BasicAuth:
		if val != basic {
			p.errorf(k.Line, "%s: basic_auth: got %s, want %s", name, quote(val), basic)
			return Extractor{}
		}
	case JSON:
		if _, err := splitPointer(val); err != nil {
			p.errorf(k.Line, "%s: json: %s: %v", name, quote(val), err)
			return Extractor{}
		}
	case Header:
		if !validHeaderName(val) {
			p.errorf(k.Line, "%s: header: %s is not a header name", name, quote(val))
			return Extractor{}
		}
		val = http.CanonicalHeaderKey(val)
	}
	return Extractor{Source: src, Name: val}
}

func validHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return s != ""
}

func (p *parser) matchers(f field, name string) []Matcher {
	if f.value.Kind != yaml.SequenceNode || len(f.value.Content) == 0 {
		p.errorf(f.key.Line, "%s: got %s, want a list like [{status: [401]}]", name, describe(f.value))
		return nil
	}
	var out []Matcher
	for _, item := range f.value.Content {
		item = resolve(item)
		if item.Kind != yaml.MappingNode || len(item.Content) == 0 {
			p.errorf(item.Line, "%s: got %s, want a mapping like {status: [401]}", name, describe(item))
			continue
		}
		fs := p.fields(item, "in "+name, "status", "location_prefix", "set_cookie", "body_contains", "body_lacks")
		var m Matcher
		if sf, ok := fs["status"]; ok {
			m.Status = p.statuses(sf, name+": status")
		}
		if sf, ok := fs["location_prefix"]; ok {
			m.LocationPrefix, _ = p.str(sf, name+": location_prefix")
		}
		if sf, ok := fs["set_cookie"]; ok {
			m.SetCookie, _ = p.str(sf, name+": set_cookie")
		}
		if sf, ok := fs["body_contains"]; ok {
			m.BodyContains, m.HasBodyContains = p.str(sf, name+": body_contains")
		}
		if sf, ok := fs["body_lacks"]; ok {
			m.BodyLacks, m.HasBodyLacks = p.str(sf, name+": body_lacks")
		}
		for _, s := range []string{m.BodyContains, m.BodyLacks} {
			if len(s) > maxBody {
				p.errorf(item.Line, "%s: a body text longer than %d bytes can never be found in the %d bytes read", name, maxBody, maxBody)
			}
		}
		out = append(out, m)
	}
	return out
}

func (p *parser) statuses(f field, name string) []int {
	items := []*yaml.Node{f.value}
	if f.value.Kind == yaml.SequenceNode {
		items = f.value.Content
	}
	var out []int
	for _, item := range items {
		item = resolve(item)
		n, ok := intValue(item)
		if !ok || n < 100 || n > 599 {
			p.errorf(item.Line, "%s: %s is not an HTTP status (100 to 599)", name, describe(item))
			continue
		}
		out = append(out, int(n))
	}
	if len(out) == 0 && len(items) == 0 {
		p.errorf(f.key.Line, "%s: an empty list matches nothing", name)
	}
	return out
}

func (p *parser) challenge(f field) Challenge {
	fs, ok := p.mapping(f, "challenge", "{type: proof_of_work, difficulty: 18} or {type: status, status: 403}", "type", "difficulty", "status")
	if !ok {
		return Challenge{}
	}
	var c Challenge
	tf, ok := fs["type"]
	if !ok {
		p.errorf(f.key.Line, "challenge: type: required, proof_of_work or status")
		return c
	}
	s, _ := p.str(tf, "challenge: type")
	c.Type = ChallengeType(s)
	df, hasD := fs["difficulty"]
	sf, hasS := fs["status"]
	switch c.Type {
	case ProofOfWork:
		c.Difficulty = DefaultDifficulty
		if hasS {
			p.errorf(sf.key.Line, "challenge: status: only for type: status")
		}
		if hasD {
			n, ok := intValue(df.value)
			if !ok || n < 1 || n > maxDifficulty {
				p.errorf(df.key.Line, "challenge: difficulty: got %s, want 1 to %d leading zero bits", describe(df.value), maxDifficulty)
			}
			c.Difficulty = int(n)
		}
	case StatusOnly:
		c.Status = http.StatusForbidden
		if hasD {
			p.errorf(df.key.Line, "challenge: difficulty: only for type: proof_of_work")
		}
		if hasS {
			n, ok := intValue(sf.value)
			if !ok || n < 400 || n > 499 {
				p.errorf(sf.key.Line, "challenge: status: got %s, want a 4xx status", describe(sf.value))
			}
			c.Status = int(n)
		}
	default:
		p.errorf(tf.key.Line, "challenge: type: got %s, want proof_of_work or status", describe(tf.value))
	}
	return c
}

func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 8; i++ {
		n = n.Alias
	}
	return n
}

func intValue(n *yaml.Node) (int64, bool) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	return v, err == nil
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
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return "an alias"
}

func quote(s string) string { return strconv.Quote(shorten(s)) }

func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
