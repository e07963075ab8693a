package deploy_test

import (
	"context"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// promtool returns the path of promtool, which `make test` needs (Debian:
// apt-get install prometheus; .ci/run installs it).
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not found: install Prometheus (apt-get install prometheus)")
	}
	return p
}

// TestAlertRulesPromtool runs the alert rules' unit tests and lints the
// rules and the scrape configuration with promtool.
func TestAlertRulesPromtool(t *testing.T) {
	bin := promtool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"check", "rules", "deploy/prometheus/alerts.yml"},
		{"test", "rules", "deploy/prometheus/alerts_test.yml"},
		// Also checks the rule files it names.
		{"check", "config", "deploy/prometheus/prometheus.yml"},
	} {
		out, err := runErr(ctx, nil, bin, args...)
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// alertTests is the part of alerts_test.yml that names the alerts tested.
type alertTests struct {
	Tests []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

// TestEveryAlertIsTestedAndHasARunbook checks each alert: a severity, a
// summary and description, a promtool test where it fires and one where it
// stays silent, and a runbook section in docs/operations.md (what it means,
// what to check, what to do) that its runbook_url points at.
func TestEveryAlertIsTestedAndHasARunbook(t *testing.T) {
	var tests alertTests
	if err := yaml.Unmarshal(repoFile(t, "deploy/prometheus/alerts_test.yml"), &tests); err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	sections := markdownSections(string(repoFile(t, "docs/operations.md")))

	var names []string
	for _, g := range alertRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			names = append(names, r.Alert)
			if s := r.Labels["severity"]; s != "page" && s != "warning" {
				t.Errorf("%s: severity %q, want page or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", r.Alert, a)
				}
			}
			if !fires[r.Alert] || !silent[r.Alert] {
				t.Errorf("%s: alerts_test.yml must show it firing (%v) and silent (%v)", r.Alert, fires[r.Alert], silent[r.Alert])
			}
			_, anchor, ok := strings.Cut(r.Annotations["runbook_url"], "docs/operations.md#")
			if !ok || anchor != strings.ToLower(r.Alert) {
				t.Errorf("%s: runbook_url %q, want …docs/operations.md#%s", r.Alert, r.Annotations["runbook_url"], strings.ToLower(r.Alert))
				continue
			}
			body, ok := sections[anchor]
			if !ok {
				t.Errorf("%s: docs/operations.md has no section #%s", r.Alert, anchor)
				continue
			}
			for _, part := range []string{"What it means", "What to check", "What to do"} {
				if !strings.Contains(body, part) {
					t.Errorf("%s: its runbook section lacks %q", r.Alert, part)
				}
			}
		}
	}
	for _, want := range []string{"GuardianFallbackActive", "GuardianStoreErrors", "GuardianDenialSpike", "GuardianGlobalChallenge"} {
		if !slices.Contains(names, want) {
			t.Errorf("alerts.yml has no %s", want)
		}
	}
	for name := range fires {
		if !slices.Contains(names, name) {
			t.Errorf("alerts_test.yml tests %s, which alerts.yml does not define", name)
		}
	}
}

var heading = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)

// markdownSections maps the anchor of every heading of a Markdown document
// (as GitHub derives it) to the text up to the next heading.
func markdownSections(doc string) map[string]string {
	out := map[string]string{}
	locs := heading.FindAllStringSubmatchIndex(doc, -1)
	for i, loc := range locs {
		end := len(doc)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		out[anchorOf(doc[loc[2]:loc[3]])] = doc[loc[1]:end]
	}
	return out
}

// anchorOf is GitHub's anchor of a heading: lower case, punctuation
// dropped, spaces to hyphens.
func anchorOf(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// scrapeConfig is the part of a Prometheus configuration the tests read.
type scrapeConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		MetricsPath   string `yaml:"metrics_path"`
		StaticConfigs []struct {
			Targets []string `yaml:"targets"`
		} `yaml:"static_configs"`
		KubernetesSDConfigs []struct {
			Role string `yaml:"role"`
		} `yaml:"kubernetes_sd_configs"`
		RelabelConfigs []struct {
			SourceLabels []string `yaml:"source_labels"`
			Regex        string   `yaml:"regex"`
			Action       string   `yaml:"action"`
		} `yaml:"relabel_configs"`
	} `yaml:"scrape_configs"`
}

// TestScrapeConfigsFindGuardian checks that both scrape configurations
// scrape the job the alerts match, on guardian's metrics path, and find the
// instances the deployments run: the compose services on their port, the
// Kubernetes pods by their label and port name. (Debian's promtool is built
// without Kubernetes discovery, so only this test reads scrape-kubernetes.yml.)
func TestScrapeConfigsFindGuardian(t *testing.T) {
	var static, kube scrapeConfig
	for rel, into := range map[string]*scrapeConfig{
		"deploy/prometheus/prometheus.yml":        &static,
		"deploy/prometheus/scrape-kubernetes.yml": &kube,
	} {
		dec := yaml.NewDecoder(strings.NewReader(string(repoFile(t, rel))))
		if err := dec.Decode(into); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if !slices.Contains(into.RuleFiles, "alerts.yml") {
			t.Errorf("%s: does not load alerts.yml", rel)
		}
		if len(into.ScrapeConfigs) != 1 || into.ScrapeConfigs[0].JobName != "guardian" || into.ScrapeConfigs[0].MetricsPath != "/metrics" {
			t.Fatalf("%s: want one job \"guardian\" on /metrics, the job the alerts match", rel)
		}
	}
	for _, g := range alertRules(t).Groups {
		for _, r := range g.Rules {
			for _, m := range regexp.MustCompile(`job="([^"]*)"`).FindAllStringSubmatch(r.Expr, -1) {
				if m[1] != "guardian" {
					t.Errorf("%s matches job %q, the scrape job is \"guardian\"", r.Alert, m[1])
				}
			}
		}
	}

	c := loadCompose(t)
	var want []string
	for _, name := range c.guardianServices() {
		want = append(want, name+":"+c.containerPort(t, name))
	}
	var got []string
	for _, sc := range static.ScrapeConfigs[0].StaticConfigs {
		got = append(got, sc.Targets...)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("prometheus.yml scrapes %v, the compose fleet is %v", got, want)
	}

	job := kube.ScrapeConfigs[0]
	if len(job.KubernetesSDConfigs) != 1 || job.KubernetesSDConfigs[0].Role != "pod" {
		t.Fatal("scrape-kubernetes.yml: want pod discovery")
	}
	m := loadManifests(t)
	keeps := map[string]string{}
	for _, rc := range job.RelabelConfigs {
		if rc.Action == "keep" && len(rc.SourceLabels) == 1 {
			keeps[rc.SourceLabels[0]] = rc.Regex
		}
	}
	podName := m.deployment.Spec.Template.Labels["app.kubernetes.io/name"]
	if got := keeps["__meta_kubernetes_pod_label_app_kubernetes_io_name"]; got == "" || got != podName {
		t.Errorf("scrape-kubernetes.yml keeps pods labelled %q, the Deployment's pods are %q", got, podName)
	}
	port := m.guardianContainer(t).Ports[0].Name
	if got := keeps["__meta_kubernetes_pod_container_port_name"]; got != port {
		t.Errorf("scrape-kubernetes.yml keeps port %q, guardian's port is named %q", got, port)
	}
}
