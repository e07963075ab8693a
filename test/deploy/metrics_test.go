package deploy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/guardian-sec/guardian/internal/decisionlog"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/webhook"
)

// family is one metric guardian exports: its type and label names.
type family struct {
	typ    dto.MetricType
	labels map[string]bool
}

// recorder is a Registerer that remembers every collector registered
// through it, so the test can reach vectors nobody has observed yet.
type recorder struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// exported returns every metric guardian exports, from two sources:
//
//   - metrics.New and a decision log on a fresh registry, with one child of every vector
//     created: a vector with no child is absent from a scrape, so scraping
//     an idle instance would miss most of guardian's metrics. The children
//     are made through GetMetricWithLabelValues, tried with 0, 1, 2, …
//     label values until the vector accepts them, so the test needs no
//     list of label counts that could fall out of step with the code.
//   - a real instance's /metrics, for what server.New registers besides
//     (the Go and process collectors) and as proof that an instance
//     serves guardian's metrics at all.
func exported(t *testing.T) map[string]family {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &recorder{Registerer: reg}
	metrics.New(rec)
	// The decision log's own counter, registered when --decision-log is set.
	decisionlog.New(decisionlog.Config{Out: io.Discard, Key: secret.Generate(), Registerer: rec}).Close()
	// The webhooks' counter, registered when --webhook-url is set.
	webhook.New(webhook.Config{URLs: []string{"http://127.0.0.1:1/"}, Registerer: rec})
	if len(rec.collectors) == 0 {
		t.Fatal("metrics.New registered nothing")
	}
	for _, c := range rec.collectors {
		touch(t, c)
	}
	gathered, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}

	base := startGuardian(t, "")
	status, body := get(t, base+"/metrics")
	if status != 200 {
		t.Fatalf("GET /metrics: %d", status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	scraped, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	if _, ok := scraped["guardian_fallback_active"]; !ok {
		t.Fatal("a running instance does not serve guardian_fallback_active")
	}

	out := map[string]family{}
	add := func(mf *dto.MetricFamily) {
		f, ok := out[mf.GetName()]
		if !ok {
			f = family{typ: mf.GetType(), labels: map[string]bool{}}
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				f.labels[l.GetName()] = true
			}
		}
		out[mf.GetName()] = f
	}
	for _, mf := range gathered {
		add(mf)
	}
	for _, mf := range scraped {
		add(mf)
	}
	return out
}

// touch creates one child of c when c is a vector.
func touch(t *testing.T, c prometheus.Collector) {
	t.Helper()
	m := reflect.ValueOf(c).MethodByName("GetMetricWithLabelValues")
	if !m.IsValid() {
		return // a plain Gauge or Counter, exported as it is
	}
	for n := 0; n <= 10; n++ {
		args := make([]reflect.Value, n)
		for i := range args {
			args[i] = reflect.ValueOf("x")
		}
		if res := m.Call(args); res[1].IsNil() {
			return
		}
	}
	t.Fatalf("%T takes no label count up to 10", c)
}

// query is one PromQL expression and where it comes from.
type query struct {
	where, expr string
}

// dashboardQueries returns every PromQL expression of the dashboard: the
// panels' targets and the template variables' queries.
func dashboardQueries(t *testing.T) []query {
	t.Helper()
	var doc any
	if err := json.Unmarshal(repoFile(t, "deploy/grafana/guardian.json"), &doc); err != nil {
		t.Fatalf("deploy/grafana/guardian.json: %v", err)
	}
	var out []query
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					out = append(out, query{where: "guardian.json " + path + "." + k, expr: s})
				}
				walk(path+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), x)
			}
		}
	}
	walk("", doc)
	sort.Slice(out, func(i, j int) bool { return out[i].where < out[j].where })
	return out
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func alertRules(t *testing.T) ruleFile {
	t.Helper()
	var rf ruleFile
	if err := yaml.Unmarshal(repoFile(t, "deploy/prometheus/alerts.yml"), &rf); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yml: %v", err)
	}
	return rf
}

// alertQueries returns every expression of the alert rules, and the series
// the rule tests feed them (a test fed a misspelt series passes vacuously).
func alertQueries(t *testing.T) []query {
	t.Helper()
	var out []query
	for _, g := range alertRules(t).Groups {
		for _, r := range g.Rules {
			out = append(out, query{where: "alerts.yml " + r.Alert + r.Record, expr: r.Expr})
		}
	}
	var tests struct {
		Tests []struct {
			Name        string `yaml:"name"`
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(repoFile(t, "deploy/prometheus/alerts_test.yml"), &tests); err != nil {
		t.Fatalf("deploy/prometheus/alerts_test.yml: %v", err)
	}
	for _, tc := range tests.Tests {
		for _, s := range tc.InputSeries {
			out = append(out, query{where: "alerts_test.yml " + tc.Name, expr: s.Series})
		}
	}
	return out
}

var (
	// stringLit is a PromQL string literal; its content is never a name.
	stringLit = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	// metricName is a name of the families the tests check; "up" is made
	// by Prometheus for every target.
	metricName = regexp.MustCompile(`\b(?:guardian|go|process)_[a-zA-Z0-9_:]*|\bup\b`)
	// selector is a metric name followed by its label matchers.
	selector = regexp.MustCompile(`\b([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}`)
	// matcher is one label matcher inside braces.
	matcher = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	// grouping is a clause naming labels: by, without, on, ignoring,
	// group_left, group_right.
	grouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
)

// targetLabels are added by Prometheus to every scraped series.
var targetLabels = map[string]bool{"job": true, "instance": true}

// resolve maps a name used in a query to the exported family it reads,
// with the extra labels that name carries (le on a histogram's buckets).
func resolve(fams map[string]family, name string) (family, []string, error) {
	if name == "up" {
		return family{typ: dto.MetricType_GAUGE, labels: map[string]bool{}}, nil, nil
	}
	if f, ok := fams[name]; ok {
		if f.typ == dto.MetricType_HISTOGRAM {
			return f, nil, fmt.Errorf("%s is a histogram: query %s_bucket, _sum or _count", name, name)
		}
		return f, nil, nil
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f, ok := fams[base]
		switch {
		case !ok:
		case f.typ == dto.MetricType_HISTOGRAM && suffix == "_bucket":
			return f, []string{"le"}, nil
		case f.typ == dto.MetricType_HISTOGRAM || f.typ == dto.MetricType_SUMMARY:
			if suffix == "_bucket" {
				break
			}
			return f, nil, nil
		}
	}
	return family{}, nil, fmt.Errorf("%s is not a metric guardian exports", name)
}

// checkQuery reports every metric of q guardian does not export, and every
// label q matches or groups by that none of its metrics carries.
func checkQuery(fams map[string]family, q query) []string {
	expr := stringLit.ReplaceAllString(q.expr, `""`)
	var problems []string
	allowed := map[string]bool{}
	for l := range targetLabels {
		allowed[l] = true
	}
	names := metricName.FindAllString(expr, -1)
	for _, name := range names {
		f, extra, err := resolve(fams, name)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for l := range f.labels {
			allowed[l] = true
		}
		for _, l := range extra {
			allowed[l] = true
		}
	}
	for _, m := range selector.FindAllStringSubmatch(expr, -1) {
		f, extra, err := resolve(fams, m[1])
		if err != nil {
			continue // reported above, or not a metric (a function's braces never follow a name)
		}
		for _, lm := range matcher.FindAllStringSubmatch(m[2], -1) {
			l := lm[1]
			if !f.labels[l] && !targetLabels[l] && !slices.Contains(extra, l) {
				problems = append(problems, fmt.Sprintf("%s has no label %q", m[1], l))
			}
		}
	}
	for _, g := range grouping.FindAllStringSubmatch(expr, -1) {
		for l := range strings.SplitSeq(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" && !allowed[l] {
				problems = append(problems, fmt.Sprintf("groups by %q, which none of its metrics carries", l))
			}
		}
	}
	if len(names) == 0 && !strings.Contains(q.where, "alerts_test.yml") {
		problems = append(problems, "reads no guardian metric")
	}
	return problems
}

// TestQueriedMetricsAreExported checks every metric the dashboard, the
// alerts and the alert tests query against what guardian exports: the name,
// the histogram suffixes, and the labels matched and grouped by.
func TestQueriedMetricsAreExported(t *testing.T) {
	fams := exported(t)
	for _, want := range []string{
		"guardian_decisions_total", "guardian_rule_trips_total", "guardian_check_duration_seconds",
		"guardian_store_errors_total", "guardian_fallback_active", "guardian_fallback_decisions_total",
		"guardian_global_failures_per_second", "guardian_reports_total",
	} {
		if _, ok := fams[want]; !ok {
			t.Errorf("guardian does not export %s (api/openapi.yaml lists it)", want)
		}
	}

	queries := append(dashboardQueries(t), alertQueries(t)...)
	if len(queries) < 20 {
		t.Fatalf("found only %d queries in the dashboard and the alerts", len(queries))
	}
	used := map[string]bool{}
	for _, q := range queries {
		for _, name := range metricName.FindAllString(stringLit.ReplaceAllString(q.expr, `""`), -1) {
			used[name] = true
		}
		for _, p := range checkQuery(fams, q) {
			t.Errorf("%s: %s\n\t%s", q.where, p, q.expr)
		}
	}
	t.Logf("%d queries over %d metrics checked", len(queries), len(used))
}

// TestQueryCheckerCatchesMistakes proves the checker above is not vacuous:
// each of these queries is wrong in one way and must be reported.
func TestQueryCheckerCatchesMistakes(t *testing.T) {
	fams := exported(t)
	tests := []struct {
		expr, want string
	}{
		{`rate(guardian_decision_total[5m])`, "not a metric guardian exports"},
		{`guardian_check_duration_seconds`, "is a histogram"},
		{`rate(guardian_store_errors_total_bucket[5m])`, "not a metric guardian exports"},
		{`guardian_decisions_total{verdict="slow"}`, `has no label "verdict"`},
		{`sum by (rule) (rate(guardian_decisions_total[5m]))`, `groups by "rule"`},
		{`guardian_fallback_active{le="1"}`, `has no label "le"`},
		{`vector(1)`, "reads no guardian metric"},
	}
	for _, tc := range tests {
		got := strings.Join(checkQuery(fams, query{where: "test", expr: tc.expr}), "; ")
		if !strings.Contains(got, tc.want) {
			t.Errorf("checkQuery(%q) = %q, want a problem containing %q", tc.expr, got, tc.want)
		}
	}
	for _, ok := range []string{
		`histogram_quantile(0.99, sum by (flow, le) (rate(guardian_check_duration_seconds_bucket{job=~"$job"}[5m])))`,
		`sum by (rule, action) (rate(guardian_rule_trips_total{mode="shadow", action=~"slow|block"}[5m]))`,
		`count(up{job="guardian"} == 1)`,
	} {
		if got := checkQuery(fams, query{where: "test", expr: ok}); len(got) > 0 {
			t.Errorf("checkQuery(%q) = %q, want no problem", ok, got)
		}
	}
}

// TestDashboardShowsWhatOperatorsNeed checks the dashboard has a panel for
// each view the operations guide relies on, and is well formed.
func TestDashboardShowsWhatOperatorsNeed(t *testing.T) {
	var dash struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			GridPos *struct {
				X, Y, W, H int
			} `json:"gridPos"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(repoFile(t, "deploy/grafana/guardian.json"), &dash); err != nil {
		t.Fatal(err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Error("the dashboard needs a uid and a title")
	}
	ids := map[int]bool{}
	var exprs []string
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q has no size", p.Title)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: missing or repeated refId %q", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			exprs = append(exprs, strings.Join(strings.Fields(tg.Expr), " "))
		}
	}
	views := []struct {
		what string
		re   string
	}{
		{"decisions by flow and decision", `sum by \(flow, decision\) \(rate\(guardian_decisions_total`},
		{"enforced rule trips", `guardian_rule_trips_total\{[^}]*mode="enforce"`},
		{"shadow rule trips", `guardian_rule_trips_total\{[^}]*mode="shadow"`},
		{"check latency p50", `histogram_quantile\(0\.5, .*guardian_check_duration_seconds_bucket`},
		{"check latency p99", `histogram_quantile\(0\.99, .*guardian_check_duration_seconds_bucket`},
		{"store errors", `rate\(guardian_store_errors_total`},
		{"fallback active", `guardian_fallback_active`},
		{"global failure rate", `guardian_global_failures_per_second`},
	}
	for _, v := range views {
		re := regexp.MustCompile(v.re)
		if !slices.ContainsFunc(exprs, re.MatchString) {
			t.Errorf("no panel shows %s (no query matches %s)", v.what, v.re)
		}
	}
}
