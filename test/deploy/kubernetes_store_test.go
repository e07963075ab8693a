package deploy_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestKubernetesRedis checks the security Redis of deploy/kubernetes: a
// StatefulSet with a persistent volume and the AOF on it, reached through
// its Service by guardian's URL, and a NetworkPolicy that admits guardian
// alone.
func TestKubernetesRedis(t *testing.T) {
	m := loadManifests(t)
	ss := m.statefulSet
	pod := &ss.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("the Redis pod has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	args := " " + strings.Join(c.Args, " ") + " "
	for _, want := range []string{" --appendonly yes ", " --appendfsync everysec ", " --dir /data ", " --maxmemory ", " --maxmemory-policy volatile-ttl ", " --maxmemory-samples 10 "} {
		if !strings.Contains(args, want) {
			t.Errorf("redis args %q lack %q", args, strings.TrimSpace(want))
		}
	}

	// /data is a claim of the StatefulSet's own, per pod.
	var mount *corev1.VolumeMount
	for i, vm := range c.VolumeMounts {
		if vm.MountPath == "/data" {
			mount = &c.VolumeMounts[i]
		}
	}
	if mount == nil {
		t.Fatal("nothing is mounted on /data")
	}
	var claim bool
	for _, vct := range ss.Spec.VolumeClaimTemplates {
		if vct.Name == mount.Name {
			q := vct.Spec.Resources.Requests[corev1.ResourceStorage]
			claim = q.Cmp(resource.MustParse("1Gi")) >= 0 && slices.Contains(vct.Spec.AccessModes, corev1.ReadWriteOnce)
		}
	}
	if !claim {
		t.Errorf("/data (volume %q) is not a ReadWriteOnce volumeClaimTemplate of at least 1Gi", mount.Name)
	}
	for _, v := range pod.Volumes {
		if v.Name == mount.Name {
			t.Errorf("/data is the pod volume %q, not the persistent claim", v.Name)
		}
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
		t.Error("Redis has no memory limit")
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Error("Redis must run as a non-root user")
	}

	// guardian's URL names the Redis Service, which selects these pods.
	svc := m.services[ss.Spec.ServiceName]
	if svc == nil {
		t.Fatalf("no Service %q for the StatefulSet", ss.Spec.ServiceName)
	}
	if !podMatches(svc.Spec.Selector, ss.Spec.Template.Labels) || !podMatches(ss.Spec.Selector.MatchLabels, ss.Spec.Template.Labels) {
		t.Errorf("the Service %v or the StatefulSet %v does not select the Redis pods %v", svc.Spec.Selector, ss.Spec.Selector.MatchLabels, ss.Spec.Template.Labels)
	}
	if url := env(t, m.guardianContainer(t), "GUARDIAN_REDIS_URL").Value; url != "redis://guardian@"+svc.Name+":6379/0" {
		t.Errorf("GUARDIAN_REDIS_URL %q does not name the Service %s, as the ACL user guardian", url, svc.Name)
	}
	if podMatches(m.service.Spec.Selector, ss.Spec.Template.Labels) || podMatches(m.pdb.Spec.Selector.MatchLabels, ss.Spec.Template.Labels) {
		t.Error("guardian's Service or PodDisruptionBudget selects the Redis pods")
	}

	// Only guardian's pods may reach Redis, and Redis reaches nothing.
	np := m.netpols["guardian-redis"]
	if np == nil {
		t.Fatal("no NetworkPolicy guardian-redis")
	}
	if !podMatches(np.Spec.PodSelector.MatchLabels, ss.Spec.Template.Labels) {
		t.Fatalf("the Redis NetworkPolicy selects %v, not the Redis pods", np.Spec.PodSelector.MatchLabels)
	}
	if !slices.Contains(np.Spec.PolicyTypes, "Ingress") || !slices.Contains(np.Spec.PolicyTypes, "Egress") || len(np.Spec.Egress) != 0 {
		t.Errorf("the Redis NetworkPolicy must deny all egress and restrict ingress: %+v", np.Spec)
	}
	guardianPods := m.deployment.Spec.Template.Labels
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].From) != 1 {
		t.Fatalf("Redis ingress %+v, want one rule from guardian", np.Spec.Ingress)
	}
	from := np.Spec.Ingress[0].From[0]
	if from.NamespaceSelector != nil || from.IPBlock != nil || from.PodSelector == nil ||
		!podMatches(from.PodSelector.MatchLabels, guardianPods) || len(from.PodSelector.MatchLabels) == 0 {
		t.Errorf("Redis ingress from %+v: want guardian's pods of this namespace alone", from)
	}
	if podMatches(from.PodSelector.MatchLabels, ss.Spec.Template.Labels) {
		t.Error("the Redis ingress rule also admits the Redis pods themselves")
	}
	if ports := np.Spec.Ingress[0].Ports; len(ports) != 1 || ports[0].Port == nil || !portMatches(*ports[0].Port, c.Ports[0]) {
		t.Errorf("Redis ingress ports %+v, want Redis's port only", ports)
	}
}

// TestKubernetesRollout checks what a rollout and an upgrade depend on:
// pinned image tags, a preStop delay the grace period covers, and
// GOMEMLIMIT at 90% of the memory limit.
func TestKubernetesRollout(t *testing.T) {
	m := loadManifests(t)
	for _, c := range append(slices.Clone(m.deployment.Spec.Template.Spec.Containers), m.statefulSet.Spec.Template.Spec.Containers...) {
		_, tag, ok := strings.Cut(c.Image, ":")
		if !ok && !strings.Contains(c.Image, "@sha256:") || tag == "latest" || !strings.Contains(tag, ".") {
			t.Errorf("container %s: image %q, want a pinned version tag (x.y.z) or digest", c.Name, c.Image)
		}
	}

	pod := &m.deployment.Spec.Template.Spec
	c := m.guardianContainer(t)
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds < 3 {
		t.Fatalf("guardian's preStop %+v, want a sleep of a few seconds (the image has no shell)", c.Lifecycle)
	}
	// The drain of guardian serve takes at most 30 s after SIGTERM.
	if g := pod.TerminationGracePeriodSeconds; g == nil || *g < c.Lifecycle.PreStop.Sleep.Seconds+30 {
		t.Errorf("terminationGracePeriodSeconds %v < preStop %d s + 30 s of drain", g, c.Lifecycle.PreStop.Sleep.Seconds)
	}

	limit := c.Resources.Limits[corev1.ResourceMemory]
	gomem := env(t, c, "GOMEMLIMIT").Value
	q, err := resource.ParseQuantity(strings.TrimSuffix(gomem, "B"))
	if err != nil {
		t.Fatalf("GOMEMLIMIT %q: %v", gomem, err)
	}
	if ratio := float64(q.Value()) / float64(limit.Value()); ratio < 0.88 || ratio > 0.91 {
		t.Errorf("GOMEMLIMIT %s is %.1f%% of the memory limit %s, want 90%%", gomem, 100*ratio, limit.String())
	}
}

// monitoringObject is the part of a Prometheus Operator object the tests
// read; decodeStrict refuses any field these types do not know.
type monitoringObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		// ServiceMonitor
		Selector *struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector,omitempty"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints,omitempty"`
		// PrometheusRule
		Groups []any `json:"groups,omitempty"`
	} `json:"spec"`
}

// TestKubernetesMonitoring checks deploy/kubernetes/monitoring: a
// ServiceMonitor that scrapes guardian's Service (and not Redis's) on
// /metrics, and a PrometheusRule holding exactly the alerts of
// deploy/prometheus/alerts.yml.
func TestKubernetesMonitoring(t *testing.T) {
	m := loadManifests(t)
	dir := repoPath("deploy/kubernetes/monitoring")
	var k kustomization
	dec := yaml.NewDecoder(strings.NewReader(string(repoFile(t, "deploy/kubernetes/monitoring/kustomization.yaml"))))
	dec.KnownFields(true)
	if err := dec.Decode(&k); err != nil {
		t.Fatalf("monitoring/kustomization.yaml: %v", err)
	}
	objs := map[string]*monitoringObject{}
	names, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	var files []string
	for _, name := range names {
		base := filepath.Base(name)
		if base == "kustomization.yaml" {
			continue
		}
		files = append(files, base)
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range documents(t, base, data) {
			var o monitoringObject
			if err := decodeStrict(doc, &o); err != nil {
				t.Fatalf("%s: %v", base, err)
			}
			if o.APIVersion != "monitoring.coreos.com/v1" || o.Metadata.Labels["app.kubernetes.io/name"] != "guardian" {
				t.Errorf("%s: %s %s, labels %v", base, o.APIVersion, o.Kind, o.Metadata.Labels)
			}
			objs[o.Kind] = &o
		}
	}
	if got, want := slices.Sorted(slices.Values(k.Resources)), slices.Sorted(slices.Values(files)); !slices.Equal(got, want) {
		t.Errorf("monitoring kustomization resources %v, files %v", got, want)
	}

	sm := objs["ServiceMonitor"]
	if sm == nil || sm.Spec.Selector == nil || len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor %+v, want one endpoint and a selector", sm)
	}
	for name, svc := range m.services {
		selected := len(sm.Spec.Selector.MatchLabels) > 0 && podMatches(sm.Spec.Selector.MatchLabels, svc.Labels)
		if selected != (name == "guardian") {
			t.Errorf("the ServiceMonitor selects Service %s: %v, want only guardian's", name, selected)
		}
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Path != "/metrics" || !slices.ContainsFunc(m.service.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
		t.Errorf("ServiceMonitor endpoint %+v, want guardian's Service port by name on /metrics", ep)
	}

	pr := objs["PrometheusRule"]
	if pr == nil || len(pr.Spec.Groups) == 0 {
		t.Fatal("no PrometheusRule with groups")
	}
	const path = "deploy/kubernetes/monitoring/prometheusrule.yaml"
	want := prometheusRule(repoFile(t, "deploy/prometheus/alerts.yml"))
	if *update {
		if err := os.WriteFile(repoPath(path), want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := repoFile(t, path); !bytes.Equal(got, want) {
		t.Errorf("%s is not deploy/prometheus/alerts.yml as a PrometheusRule: run go test ./test/deploy -run TestKubernetesMonitoring -update", path)
	}
}

// update rewrites generated files instead of only comparing them.
var update = flag.Bool("update", false, "rewrite generated deploy files")

// prometheusRule returns the PrometheusRule that carries the groups of
// alerts, the contents of deploy/prometheus/alerts.yml, past its comment
// header.
func prometheusRule(alerts []byte) []byte {
	var b bytes.Buffer
	b.WriteString(`# Prometheus Operator: guardian's alerts, generated from
# deploy/prometheus/alerts.yml (change that file, then run
# go test ./test/deploy -run TestKubernetesMonitoring -update). Every alert
# has a runbook section in docs/operations.md ("Alerts").
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: guardian
  labels:
    app.kubernetes.io/name: guardian
spec:
`)
	body := alerts[bytes.Index(alerts, []byte("\ngroups:"))+1:]
	for line := range bytes.Lines(body) {
		if len(bytes.TrimSpace(line)) > 0 {
			b.WriteString("  ")
		}
		b.Write(line)
	}
	return b.Bytes()
}
