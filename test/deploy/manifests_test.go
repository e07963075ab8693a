package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
	k8syaml "sigs.k8s.io/yaml"

	"github.com/guardian-sec/guardian/internal/rules"
)

// manifests are the objects of deploy/kubernetes, decoded strictly into
// the Kubernetes API types: a misspelt or misplaced field is an error, as
// it is for the API server.
type manifests struct {
	deployment    *appsv1.Deployment
	service       *corev1.Service             // guardian's
	netpol        *networkingv1.NetworkPolicy // guardian's
	pdb           *policyv1.PodDisruptionBudget
	statefulSet   *appsv1.StatefulSet // the security Redis
	services      map[string]*corev1.Service
	netpols       map[string]*networkingv1.NetworkPolicy
	configMaps    map[string]*corev1.ConfigMap
	kustomization kustomization
	files         []string // the manifest files, kustomization.yaml aside
	objects       int
}

// kustomization is the part of kustomization.yaml guardian uses.
type kustomization struct {
	APIVersion string   `yaml:"apiVersion"`
	Kind       string   `yaml:"kind"`
	Resources  []string `yaml:"resources"`
	Labels     []struct {
		Pairs map[string]string `yaml:"pairs"`
	} `yaml:"labels"`
}

// typeMeta is what selects the type a document decodes into.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	dir := repoPath("deploy/kubernetes")
	names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no manifests in %s (%v)", dir, err)
	}
	m := &manifests{
		configMaps: map[string]*corev1.ConfigMap{},
		services:   map[string]*corev1.Service{},
		netpols:    map[string]*networkingv1.NetworkPolicy{},
	}
	for _, name := range names {
		base := filepath.Base(name)
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if base == "kustomization.yaml" {
			dec := yaml.NewDecoder(bytes.NewReader(data))
			dec.KnownFields(true)
			if err := dec.Decode(&m.kustomization); err != nil {
				t.Fatalf("%s: %v", base, err)
			}
			continue
		}
		m.files = append(m.files, base)
		for i, doc := range documents(t, base, data) {
			where := base + " document " + strconv.Itoa(i+1)
			var tm typeMeta
			if err := k8syaml.Unmarshal(doc, &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "apps/v1 Deployment":
				m.deployment = &appsv1.Deployment{}
				obj = m.deployment
			case "apps/v1 StatefulSet":
				m.statefulSet = &appsv1.StatefulSet{}
				obj = m.statefulSet
			case "v1 Service":
				obj = &corev1.Service{}
			case "policy/v1 PodDisruptionBudget":
				m.pdb = &policyv1.PodDisruptionBudget{}
				obj = m.pdb
			case "networking.k8s.io/v1 NetworkPolicy":
				obj = &networkingv1.NetworkPolicy{}
			case "v1 ConfigMap":
				obj = &corev1.ConfigMap{}
			default:
				t.Fatalf("%s: unexpected %s %s", where, tm.APIVersion, tm.Kind)
			}
			if err := decodeStrict(doc, obj); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			meta := obj.(metav1.Object)
			if meta.GetName() == "" {
				t.Errorf("%s: %s has no metadata.name", where, tm.Kind)
			}
			if meta.GetLabels()["app.kubernetes.io/name"] != "guardian" {
				t.Errorf("%s: %s is not labelled app.kubernetes.io/name: guardian", where, tm.Kind)
			}
			switch o := obj.(type) {
			case *corev1.ConfigMap:
				m.configMaps[o.Name] = o
			case *corev1.Service:
				m.services[o.Name] = o
			case *networkingv1.NetworkPolicy:
				m.netpols[o.Name] = o
			}
			m.objects++
		}
	}
	m.service, m.netpol = m.services["guardian"], m.netpols["guardian"]
	for what, missing := range map[string]bool{
		"Deployment": m.deployment == nil, "Service guardian": m.service == nil,
		"PodDisruptionBudget": m.pdb == nil, "NetworkPolicy guardian": m.netpol == nil,
		"ConfigMap": len(m.configMaps) == 0, "StatefulSet": m.statefulSet == nil,
	} {
		if missing {
			t.Fatalf("deploy/kubernetes has no %s", what)
		}
	}
	return m
}

// decodeStrict decodes a YAML document into obj as the API server reads
// it: field names are case-sensitive, and an unknown or repeated field is
// an error.
func decodeStrict(doc []byte, obj any) error {
	data, err := k8syaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(data, obj)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}

// documents splits a YAML stream into its non-empty documents.
func documents(t *testing.T, name string, data []byte) [][]byte {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out [][]byte
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(n.Content) == 0 {
			continue
		}
		b, err := yaml.Marshal(&n)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, b)
	}
}

// guardianContainer is the Deployment's guardian container.
func (m *manifests) guardianContainer(t *testing.T) *corev1.Container {
	t.Helper()
	cs := m.deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("the Deployment has %d containers, want guardian alone", len(cs))
	}
	return &cs[0]
}

// env returns the container's variable name, failing when it is not set.
func env(t *testing.T, c *corev1.Container, name string) corev1.EnvVar {
	t.Helper()
	for _, e := range c.Env {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("the guardian container does not set %s", name)
	return corev1.EnvVar{}
}

// mountedFile finds the volume that provides file inside the container:
// the mount whose path holds it and the item of the volume it names.
func mountedFile(t *testing.T, pod *corev1.PodSpec, c *corev1.Container, file string) (corev1.Volume, string) {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		rel, ok := strings.CutPrefix(file, vm.MountPath+"/")
		if !ok {
			continue
		}
		if vm.SubPath != "" {
			t.Errorf("%s is mounted with subPath: updates would never reach the pod", vm.Name)
		}
		if !vm.ReadOnly {
			t.Errorf("%s is mounted writable", vm.Name)
		}
		for _, v := range pod.Volumes {
			if v.Name == vm.Name {
				return v, rel
			}
		}
		t.Fatalf("mount %s names no volume", vm.Name)
	}
	t.Fatalf("no volume mount provides %s", file)
	return corev1.Volume{}, ""
}

// itemKey returns the key of the ConfigMap or Secret item projected at rel.
func itemKey(t *testing.T, items []corev1.KeyToPath, rel string) string {
	t.Helper()
	if len(items) == 0 {
		return rel // every key projected under its own name
	}
	for _, it := range items {
		if it.Path == rel {
			return it.Key
		}
	}
	t.Fatalf("no item is projected at %s", rel)
	return ""
}

// podMatches reports whether selector selects labels.
func podMatches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false // an empty selector here would select too much
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// portMatches reports whether p names or numbers the container port cp.
func portMatches(p intstr.IntOrString, cp corev1.ContainerPort) bool {
	if p.Type == intstr.String {
		return p.StrVal == cp.Name
	}
	return p.IntVal == cp.ContainerPort
}

// TestKubernetesManifests parses every manifest strictly and checks the
// properties the deployment relies on.
func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	d := m.deployment
	pod := &d.Spec.Template.Spec
	podLabels := d.Spec.Template.Labels
	c := m.guardianContainer(t)

	t.Run("kustomization lists every manifest", func(t *testing.T) {
		k := m.kustomization
		if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
			t.Errorf("kustomization.yaml: %s %s", k.APIVersion, k.Kind)
		}
		got, want := slices.Sorted(slices.Values(k.Resources)), slices.Sorted(slices.Values(m.files))
		if !slices.Equal(got, want) {
			t.Errorf("kustomization resources %v, manifests %v", got, want)
		}
	})

	t.Run("replicas and fleet size", func(t *testing.T) {
		if d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Fatalf("replicas %v, want at least 2", d.Spec.Replicas)
		}
		fleet := env(t, c, "GUARDIAN_FLEET_SIZE").Value
		if got, want := fleet, strconv.Itoa(int(*d.Spec.Replicas)); got != want {
			t.Errorf("GUARDIAN_FLEET_SIZE %q, replicas %s: the fallback would divide limits by the wrong number", got, want)
		}
		// A surge pod would make the fleet larger than --fleet-size for the
		// length of a rollout.
		ru := d.Spec.Strategy.RollingUpdate
		if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || ru.MaxSurge == nil || ru.MaxSurge.String() != "0" {
			t.Errorf("rolling update must not surge above replicas (maxSurge 0), got %+v", d.Spec.Strategy)
		}
		if !podMatches(d.Spec.Selector.MatchLabels, podLabels) {
			t.Errorf("the Deployment's selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, podLabels)
		}
	})

	t.Run("hardening", func(t *testing.T) {
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Error("automountServiceAccountToken must be false: guardian never calls the Kubernetes API")
		}
		psc := pod.SecurityContext
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
			t.Errorf("the pod must run as a non-root user id: %+v", psc)
		}
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Fatal("the guardian container has no securityContext")
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			t.Error("readOnlyRootFilesystem must be true")
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			t.Error("allowPrivilegeEscalation must be false")
		case sc.RunAsUser != nil && *sc.RunAsUser == 0:
			t.Error("the container runs as root")
		case sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL"):
			t.Error("capabilities must drop ALL")
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
				t.Errorf("no %s request", r)
			}
		}
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || q.IsZero() {
			t.Error("no memory limit")
		}
	})

	t.Run("ports and probes", func(t *testing.T) {
		if len(c.Ports) != 1 {
			t.Fatalf("guardian exposes %d ports, want 1", len(c.Ports))
		}
		cp := c.Ports[0]
		_, addrPort, err := net.SplitHostPort(env(t, c, "GUARDIAN_ADDR").Value)
		if err != nil || addrPort != strconv.Itoa(int(cp.ContainerPort)) {
			t.Errorf("GUARDIAN_ADDR port %q, containerPort %d", addrPort, cp.ContainerPort)
		}
		probes := map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe}
		want := map[string]string{"liveness": "/healthz", "readiness": "/readyz", "startup": "/healthz"}

		// The paths are served by a real instance running the rules the
		// ConfigMap ships, and declared in the API description.
		rulesFile := filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(rulesFile, []byte(m.configMaps["guardian-rules"].Data["rules.yaml"]), 0o600); err != nil {
			t.Fatal(err)
		}
		base := startGuardian(t, rulesFile)
		openapi := string(repoFile(t, "api/openapi.yaml"))
		for kind, p := range probes {
			if p == nil || p.HTTPGet == nil {
				t.Errorf("no HTTP %s probe", kind)
				continue
			}
			if p.HTTPGet.Path != want[kind] {
				t.Errorf("%s probe on %q, want %q", kind, p.HTTPGet.Path, want[kind])
			}
			if !portMatches(p.HTTPGet.Port, cp) {
				t.Errorf("%s probe on port %v, guardian listens on %s/%d", kind, p.HTTPGet.Port.String(), cp.Name, cp.ContainerPort)
			}
			if status, body := get(t, base+p.HTTPGet.Path); status != 200 {
				t.Errorf("%s probe: GET %s on a real instance: %d %s", kind, p.HTTPGet.Path, status, body)
			}
			if !strings.Contains(openapi, "\n  "+p.HTTPGet.Path+":") {
				t.Errorf("%s probe path %s is not in api/openapi.yaml", kind, p.HTTPGet.Path)
			}
		}
		if status, _ := get(t, base+"/nothing-here"); status != 404 {
			t.Errorf("GET /nothing-here: %d: the probe check cannot tell a real path from a wrong one", status)
		}
	})

	t.Run("rules from the ConfigMap", func(t *testing.T) {
		file := env(t, c, "GUARDIAN_RULES").Value
		v, rel := mountedFile(t, pod, c, file)
		if v.ConfigMap == nil {
			t.Fatalf("%s comes from volume %s, which is not a ConfigMap", file, v.Name)
		}
		cm, ok := m.configMaps[v.ConfigMap.Name]
		if !ok {
			t.Fatalf("the Deployment mounts ConfigMap %q, which deploy/kubernetes does not define", v.ConfigMap.Name)
		}
		key := itemKey(t, v.ConfigMap.Items, rel)
		text, ok := cm.Data[key]
		if !ok {
			t.Fatalf("ConfigMap %s has no key %s", cm.Name, key)
		}
		got, err := rules.Parse(file, []byte(text), time.Now())
		if err != nil {
			t.Fatalf("the ConfigMap's rules are invalid: %v", err)
		}
		want, err := rules.Load(repoPath("deploy/rules.yaml"), time.Now())
		if err != nil {
			t.Fatalf("deploy/rules.yaml: %v", err)
		}
		if !sameRules(got.Rules, want.Rules) {
			t.Error("the ConfigMap's rules differ from deploy/rules.yaml: keep the two in step")
		}
	})

	// fromSecret checks that the file the variable names is an item of a
	// Secret that only the pod's user and group can read.
	fromSecret := func(t *testing.T, variable, what string) {
		t.Helper()
		file := env(t, c, variable).Value
		v, rel := mountedFile(t, pod, c, file)
		if v.Secret == nil || v.Secret.SecretName == "" {
			t.Fatalf("%s comes from volume %s, which is not a Secret", file, v.Name)
		}
		itemKey(t, v.Secret.Items, rel)
		if mode := v.Secret.DefaultMode; mode == nil || *mode&0o007 != 0 {
			t.Errorf("%s must not be readable by others: defaultMode %v", what, mode)
		}
	}

	t.Run("signing key from a Secret", func(t *testing.T) {
		for _, e := range c.Env {
			if e.Name == "GUARDIAN_SIGNING_KEY" && e.Value != "" {
				t.Error("the signing key is written into the manifest")
			}
		}
		fromSecret(t, "GUARDIAN_SIGNING_KEY_FILE", "the signing key")
		if env(t, c, "GUARDIAN_REDIS_URL").Value == "" {
			t.Error("GUARDIAN_REDIS_URL is empty: every pod would keep limits of its own")
		}
		// An updated Secret reaches a pod only through a directory mount.
		for _, vm := range c.VolumeMounts {
			if vm.SubPath != "" {
				t.Errorf("volume %s is mounted with subPath: an updated Secret or ConfigMap would never reach the pod", vm.Name)
			}
		}
	})

	t.Run("hash key from a Secret of its own", func(t *testing.T) {
		fromSecret(t, "GUARDIAN_HASH_KEY_FILE", "the hash key")
		signing, _ := mountedFile(t, pod, c, env(t, c, "GUARDIAN_SIGNING_KEY_FILE").Value)
		hash, _ := mountedFile(t, pod, c, env(t, c, "GUARDIAN_HASH_KEY_FILE").Value)
		if signing.Secret.SecretName == hash.Secret.SecretName {
			t.Errorf("the hash key and the signing key share the Secret %s: rotating one would change the other", hash.Secret.SecretName)
		}
	})

	t.Run("decision log on", func(t *testing.T) {
		// The image's root file system is read-only and has no shell to
		// copy a file out: the decision log goes to stdout, the log to
		// stderr.
		if got := env(t, c, "GUARDIAN_DECISION_LOG").Value; got != "-" {
			t.Errorf("GUARDIAN_DECISION_LOG %q, want - (stdout)", got)
		}
	})

	t.Run("Redis user and password from a Secret", func(t *testing.T) {
		if u := env(t, c, "GUARDIAN_REDIS_URL").Value; !strings.HasPrefix(u, "redis://guardian@") && !strings.HasPrefix(u, "rediss://guardian@") {
			t.Errorf("GUARDIAN_REDIS_URL %q: want the ACL user guardian, with no password in it", u)
		}
		fromSecret(t, "GUARDIAN_REDIS_PASSWORD_FILE", "the Redis password")
	})

	t.Run("service", func(t *testing.T) {
		s := m.service
		if !podMatches(s.Spec.Selector, podLabels) {
			t.Errorf("the Service selects %v, the pods are %v", s.Spec.Selector, podLabels)
		}
		if len(s.Spec.Ports) != 1 || !portMatches(s.Spec.Ports[0].TargetPort, c.Ports[0]) {
			t.Errorf("the Service's ports %+v do not lead to guardian's", s.Spec.Ports)
		}
	})

	t.Run("disruption budget", func(t *testing.T) {
		p := m.pdb
		if p.Spec.Selector == nil || !podMatches(p.Spec.Selector.MatchLabels, podLabels) {
			t.Fatalf("the PodDisruptionBudget does not select guardian's pods")
		}
		replicas := int(*d.Spec.Replicas)
		switch {
		case p.Spec.MaxUnavailable != nil:
			n, err := intstr.GetScaledValueFromIntOrPercent(p.Spec.MaxUnavailable, replicas, true)
			if err != nil || n < 1 || n >= replicas {
				t.Errorf("maxUnavailable %s of %d replicas: want at least one pod drainable and one left", p.Spec.MaxUnavailable.String(), replicas)
			}
		case p.Spec.MinAvailable != nil:
			n, err := intstr.GetScaledValueFromIntOrPercent(p.Spec.MinAvailable, replicas, true)
			if err != nil || n < 1 || n >= replicas {
				t.Errorf("minAvailable %s of %d replicas: want at least one pod drainable and one left", p.Spec.MinAvailable.String(), replicas)
			}
		default:
			t.Error("the PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
		}
	})

	t.Run("auth services admitted by namespace and pod label together, as documented", func(t *testing.T) {
		ops, err := os.ReadFile(repoPath("docs/operations.md"))
		if err != nil {
			t.Fatal(err)
		}
		clients := 0
		for _, r := range m.netpol.Spec.Ingress {
			for _, peer := range r.From {
				if peer.PodSelector == nil || peer.PodSelector.MatchLabels["guardian/client"] == "" {
					continue
				}
				clients++
				if peer.NamespaceSelector == nil || len(peer.NamespaceSelector.MatchLabels) == 0 {
					t.Fatalf("auth services are admitted by pod label alone, from any namespace: %+v", peer)
				}
				// The labels an operator must set are the ones the guide
				// names, written as they are in the manifest.
				for _, sel := range []map[string]string{peer.PodSelector.MatchLabels, peer.NamespaceSelector.MatchLabels} {
					for k, v := range sel {
						if !strings.Contains(string(ops), fmt.Sprintf("`%s: %s`", k, v)) && !strings.Contains(string(ops), fmt.Sprintf("`%s: %q`", k, v)) {
							t.Errorf("docs/operations.md does not name the label %s: %s the NetworkPolicy requires", k, v)
						}
					}
				}
			}
		}
		if clients != 1 {
			t.Errorf("%d sources select auth services by guardian/client, want one", clients)
		}
	})

	t.Run("the rules file is said to be watched", func(t *testing.T) {
		// guardian watches its rules file; no comment may send an operator
		// to reload or restart every pod after a ConfigMap change.
		for _, f := range []string{"deploy/kubernetes/configmap.yaml", "deploy/kubernetes/deployment.yaml", "deploy/rules.yaml"} {
			text, err := os.ReadFile(repoPath(f))
			if err != nil {
				t.Fatal(err)
			}
			var comments strings.Builder
			for _, line := range strings.Split(string(text), "\n") {
				if c, ok := strings.CutPrefix(strings.TrimSpace(line), "#"); ok {
					comments.WriteString(c + " ")
				}
			}
			words := strings.Join(strings.Fields(comments.String()), " ")
			for _, stale := range []string{"on every pod", "rollout restart", "reads it on POST"} {
				if strings.Contains(words, stale) {
					t.Errorf("%s: a comment says %q, but the file is watched", f, stale)
				}
			}
			if f != "deploy/kubernetes/deployment.yaml" && !strings.Contains(words, "watch") {
				t.Errorf("%s: no comment says the file is watched", f)
			}
		}
	})

	t.Run("network policy", func(t *testing.T) {
		np := m.netpol
		if !podMatches(np.Spec.PodSelector.MatchLabels, podLabels) {
			t.Fatalf("the NetworkPolicy selects %v, the pods are %v", np.Spec.PodSelector.MatchLabels, podLabels)
		}
		if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			t.Errorf("policyTypes %v: want Ingress and Egress, or the other direction is open", np.Spec.PolicyTypes)
		}
		if len(np.Spec.Ingress) == 0 {
			t.Error("no ingress rule: nothing could call guardian")
		}
		for i, r := range np.Spec.Ingress {
			if len(r.From) == 0 {
				t.Errorf("ingress rule %d admits every source", i)
			}
			for _, peer := range r.From {
				if peer.IPBlock != nil || peer.PodSelector == nil || len(peer.PodSelector.MatchLabels) == 0 {
					t.Errorf("ingress rule %d: each source must be pods selected by label, got %+v", i, peer)
				}
				// A pod can label itself; a namespace takes an administrator.
				// An empty namespaceSelector (every namespace) would let any
				// workload anywhere make itself a client.
				if peer.NamespaceSelector == nil || (len(peer.NamespaceSelector.MatchLabels) == 0 && len(peer.NamespaceSelector.MatchExpressions) == 0) {
					t.Errorf("ingress rule %d: pods %v are admitted from any namespace; want namespace and pod labels together", i, peer.PodSelector)
				}
			}
			if len(r.Ports) == 0 {
				t.Errorf("ingress rule %d opens every port", i)
			}
			for _, p := range r.Ports {
				if p.Port == nil || !portMatches(*p.Port, c.Ports[0]) {
					t.Errorf("ingress rule %d opens port %v, guardian listens on %s", i, p.Port, c.Ports[0].Name)
				}
			}
		}
		allowed := map[string]bool{"TCP/6379": true, "UDP/53": true, "TCP/53": true}
		redis := false
		for i, r := range np.Spec.Egress {
			if len(r.To) == 0 || len(r.Ports) == 0 {
				t.Errorf("egress rule %d reaches every destination or every port", i)
			}
			for _, p := range r.Ports {
				proto := corev1.ProtocolTCP
				if p.Protocol != nil {
					proto = *p.Protocol
				}
				key := string(proto) + "/" + p.Port.String()
				if !allowed[key] {
					t.Errorf("egress rule %d reaches %s: guardian needs only Redis and DNS", i, key)
				}
				if key == "TCP/6379" {
					redis = true
				}
			}
		}
		if !redis {
			t.Error("no egress rule reaches Redis on 6379")
		}
	})
}

// sameRules reports whether a and b are the same rules, file lines aside.
func sameRules(a, b []rules.Rule) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.Line, y.Line = 0, 0
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// TestDeployRulesAreValid checks the rules file the compose fleet mounts.
func TestDeployRulesAreValid(t *testing.T) {
	set, err := rules.Load(repoPath("deploy/rules.yaml"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range set.Rules {
		names[r.Name] = true
	}
	// The deployed rules keep the protections of the contract's worked
	// configuration: every built-in rule is there.
	for _, r := range rules.Default().Rules {
		if !names[r.Name] {
			t.Errorf("deploy/rules.yaml lacks the built-in rule %s", r.Name)
		}
	}
}
