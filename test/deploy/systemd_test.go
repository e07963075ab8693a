package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// unit is a systemd unit file: each section's directives, every value of a
// directive given more than once in order.
type unit map[string]map[string][]string

func parseUnit(t *testing.T, data []byte) unit {
	t.Helper()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("guardian.service:%d: %q is not a directive in a section", n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// last is the value in force of a directive that a later line overrides.
func (u unit) last(section, key string) string {
	vs := u[section][key]
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1]
}

// TestSystemdUnit checks deploy/systemd/guardian.service: the sandbox it
// promises, the key passed as a credential, the memory limit and
// GOMEMLIMIT, and, where systemd-analyze is installed, that systemd accepts
// the unit and rates its exposure as low.
func TestSystemdUnit(t *testing.T) {
	data := repoFile(t, "deploy/systemd/guardian.service")
	u := parseUnit(t, data)
	svc := u["Service"]
	if svc == nil || u["Unit"] == nil || u["Install"] == nil {
		t.Fatalf("sections %v, want Unit, Service and Install", u)
	}
	for k, want := range map[string]string{
		"DynamicUser":             "yes",
		"NoNewPrivileges":         "yes",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"PrivateDevices":          "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectKernelModules":    "yes",
		"ProtectControlGroups":    "yes",
		"RestrictAddressFamilies": "AF_INET AF_INET6",
		"RestrictNamespaces":      "yes",
		"RestrictSUIDSGID":        "yes",
		"LockPersonality":         "yes",
		"MemoryDenyWriteExecute":  "yes",
		"CapabilityBoundingSet":   "",
		"AmbientCapabilities":     "",
		"SystemCallArchitectures": "native",
		"KillSignal":              "SIGTERM",
	} {
		if got, ok := svc[k]; !ok || u.last("Service", k) != want {
			t.Errorf("[Service] %s = %q, want %q", k, got, want)
		}
	}
	if !strings.HasPrefix(u.last("Service", "ExecStart"), "/") || !strings.HasSuffix(u.last("Service", "ExecStart"), "guardian serve") {
		t.Errorf("ExecStart = %q, want guardian serve by absolute path", u.last("Service", "ExecStart"))
	}
	if u.last("Service", "User") != "" || u.last("Service", "ReadWritePaths") != "" {
		t.Error("guardian runs as a dynamic user and writes nowhere")
	}

	env := map[string]string{}
	for _, e := range svc["Environment"] {
		k, v, _ := strings.Cut(e, "=")
		env[k] = v
	}
	cred, _, _ := strings.Cut(u.last("Service", "LoadCredential"), ":")
	if cred == "" || env["GUARDIAN_SIGNING_KEY_FILE"] != "%d/"+cred {
		t.Errorf("GUARDIAN_SIGNING_KEY_FILE %q, LoadCredential %q: want the key as a credential", env["GUARDIAN_SIGNING_KEY_FILE"], u.last("Service", "LoadCredential"))
	}
	if env["GUARDIAN_SIGNING_KEY"] != "" {
		t.Error("the signing key is written into the unit")
	}
	limit, goLimit := mebibytes(t, u.last("Service", "MemoryMax")), mebibytes(t, env["GOMEMLIMIT"])
	if lo, hi := limit*0.85, limit*0.92; goLimit < lo || goLimit > hi {
		t.Errorf("GOMEMLIMIT %s is %.0f%% of MemoryMax %s, want about 90%%", env["GOMEMLIMIT"], 100*goLimit/limit, u.last("Service", "MemoryMax"))
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze is not installed: the unit was checked by parsing only")
		return
	}
	// The unit as shipped, but starting an executable that exists here, so
	// that verify does not stop at the missing binary.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "guardian.service")
	if err := os.WriteFile(path, bytes.ReplaceAll(data, []byte("/usr/local/bin/guardian"), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, analyze, "verify", path).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, _ := exec.CommandContext(ctx, analyze, "security", "--offline=yes", path).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for guardian\.service: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security gave no exposure level:\n%s", out)
	}
	if level, _ := strconv.ParseFloat(string(m[1]), 64); level > 2 {
		t.Errorf("systemd-analyze security: exposure %s, want at most 2 (of 10)", m[1])
	}
}

// mebibytes reads a size such as 256M or 230MiB.
func mebibytes(t *testing.T, s string) float64 {
	t.Helper()
	num := strings.TrimSuffix(strings.TrimSuffix(s, "iB"), "M")
	if num == s {
		t.Fatalf("size %q is not in M or MiB", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		t.Fatalf("size %q: %v", s, err)
	}
	return v
}
