package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/logtest"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/testcert"
	"github.com/guardian-sec/guardian/internal/tokens"
)

const otherSigningKey = "guardian-cli-test-other-signing-key-0123456789"

// TestTokenDefaultsAndJTI: a token lasts 720h unless told otherwise, at
// most 8760h, is signed with the first key of a key file, and --print-jti
// writes its jti and expiry to stderr while stdout holds the token alone.
func TestTokenDefaultsAndJTI(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte(otherSigningKey+"\n"+testSigningKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	start := time.Now()
	if code := run(context.Background(), []string{"token", "--scope", "admin", "--signing-key-file", keyFile, "--print-jti"}, env(nil), &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	tok := strings.TrimSpace(out.String())
	first, _ := secret.New([]byte(otherSigningKey))
	second, _ := secret.New([]byte(testSigningKey))
	cl, err := tokens.NewService(first).Verify(tok, time.Now())
	if err != nil {
		t.Fatalf("the token does not verify under the file's first key: %v", err)
	}
	if _, err := tokens.NewService(second).Verify(tok, time.Now()); err == nil {
		t.Error("the token verifies under the file's second key alone: it was not signed with the first")
	}
	if life := cl.ExpiresAt.Sub(cl.IssuedAt); life != 720*time.Hour || cl.IssuedAt.Before(start.Truncate(time.Second)) {
		t.Errorf("token life %v from %v, want 720h from now", life, cl.IssuedAt)
	}
	m := regexp.MustCompile(`^jti=([A-Za-z0-9_-]{22}) expires_at=(\S+)\n$`).FindStringSubmatch(errOut.String())
	if m == nil || m[1] != cl.ID || m[2] != cl.ExpiresAt.UTC().Format(time.RFC3339) {
		t.Errorf("stderr %q, want jti=%s expires_at=%s", errOut.String(), cl.ID, cl.ExpiresAt.UTC().Format(time.RFC3339))
	}

	for _, tt := range []struct {
		name string
		args []string
		code int
	}{
		{"a year", []string{"--ttl", "8760h"}, exitOK},
		{"longer than a year", []string{"--ttl", "8761h"}, exitUsage},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"token", "--scope", "check", "--signing-key", testSigningKey}, tt.args...)
		if code := run(context.Background(), args, env(nil), &out, &errOut); code != tt.code {
			t.Errorf("%s: exit %d, want %d (%s)", tt.name, code, tt.code, errOut.String())
		}
	}

	// A key file that holds no key is an error, never development mode.
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"token", "--scope", "check"}, {"serve", "--addr", "127.0.0.1:0"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append(cmd, "--signing-key-file", empty), env(nil), &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "is empty") {
			t.Errorf("%s with an empty key file: exit %d, stderr %q; want 2 and why", cmd[0], code, errOut.String())
		}
	}
}

// TestServeSIGHUPReloadsKeysAndCertificate runs the binary with a signing
// key file, a hash key, TLS and an admin listener, and rotates the key and
// the certificate with SIGHUP alone: the new key's tokens are accepted and
// the new certificate served, without a restart.
func TestServeSIGHUPReloadsKeysAndCertificate(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "guardian")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	keyFile, hashFile := filepath.Join(dir, "keys"), filepath.Join(dir, "hash-key")
	certFile, certKey := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	copyFile := func(from, to string) {
		t.Helper()
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		write(to, string(b))
	}
	oldCA, newCA := testcert.New(t), testcert.New(t)
	const thirdSigningKey = "guardian-cli-test-third-signing-key-0123456789"
	write(keyFile, testSigningKey+"\n"+thirdSigningKey+"\n")
	write(hashFile, "guardian-cli-test-hash-key-0123456789abcdef\n")
	copyFile(oldCA.ServerCert, certFile)
	copyFile(oldCA.ServerKey, certKey)

	addr, adminAddr := freeAddr(t), freeAddr(t)
	cmd := exec.Command(bin, "serve", "--addr", addr, "--admin-addr", adminAddr)
	cmd.Env = append(os.Environ(), "GUARDIAN_SIGNING_KEY_FILE="+keyFile, "GUARDIAN_HASH_KEY_FILE="+hashFile,
		"GUARDIAN_TLS_CERT_FILE="+certFile, "GUARDIAN_TLS_KEY_FILE="+certKey, "GUARDIAN_LOG_FORMAT=json")
	var stderr logtest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	other, _ := secret.New([]byte(otherSigningKey))
	tok, err := tokens.NewService(other).Issue(tokens.ScopeAdmin, "ops", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	status := func(ca *testcert.Certs) int {
		t.Helper()
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(t)}}, Timeout: 5 * time.Second}
		defer c.CloseIdleConnections()
		req, _ := http.NewRequest("GET", "https://"+adminAddr+"/v1/rules", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := c.Do(req)
		if err != nil {
			return -1
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	waitFor(t, func() bool { return status(oldCA) == http.StatusUnauthorized })

	write(keyFile, otherSigningKey+"\n"+testSigningKey+"\n")
	copyFile(newCA.ServerCert, certFile)
	copyFile(newCA.ServerKey, certKey)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return status(newCA) == http.StatusOK })
	// The third key, in the file at start, is gone from it now.
	thirdTok, err := tokens.NewService(mustKey(t, thirdSigningKey)).Issue(tokens.ScopeAdmin, "ops", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tok, thirdTok = thirdTok, tok
	if got := status(newCA); got != http.StatusUnauthorized {
		t.Errorf("a token of a key removed from the file: %d, want 401", got)
	}
	tok = thirdTok
	if got := status(oldCA); got != -1 {
		t.Errorf("a client trusting the old CA only: %d, want the handshake refused", got)
	}
	// The first key removed from the file: its tokens are refused.
	firstTok, err := tokens.NewService(mustKey(t, testSigningKey)).Issue(tokens.ScopeAdmin, "ops", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	otherTok := tok
	tok = firstTok // status presents the first key's token now
	waitFor(t, func() bool { return status(newCA) == http.StatusOK })
	write(keyFile, otherSigningKey+"\n")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return status(newCA) == http.StatusUnauthorized })
	tok = otherTok
	if got := status(newCA); got != http.StatusOK {
		t.Errorf("the remaining key's token after the old key went: %d", got)
	}
	for _, want := range []string{`"msg":"signing keys loaded","by":"signal"`, `"msg":"TLS certificate loaded","by":"signal"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), otherSigningKey) || strings.Contains(stderr.String(), testSigningKey) {
		t.Error("a signing key was logged")
	}
}

func mustKey(t *testing.T, raw string) secret.Key {
	t.Helper()
	k, err := secret.New([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestTokenTenant: --tenant puts the tenant in the token, a token without
// it is the default tenant's, and a name that is no tenant's is refused
// with a usage error, no token printed.
func TestTokenTenant(t *testing.T) {
	key, _ := secret.New([]byte(testSigningKey))
	svc := tokens.NewService(key)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--tenant", "shop-eu-1"}, "shop-eu-1"},
		{nil, ""},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"token", "--scope", "admin", "--signing-key", testSigningKey}, tt.args...)
		if code := run(context.Background(), args, env(nil), &out, &errOut); code != exitOK {
			t.Fatalf("%v: exit %d: %s", tt.args, code, errOut.String())
		}
		cl, err := svc.Verify(strings.TrimSpace(out.String()), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if cl.Tenant != tt.want {
			t.Errorf("%v: token of tenant %q, want %q", tt.args, cl.Tenant, tt.want)
		}
	}
	for _, bad := range []string{"", "Acme", "-acme", "acme-", "a_b", "acme.example", strings.Repeat("a", 33)} {
		var out, errOut bytes.Buffer
		args := []string{"token", "--scope", "check", "--signing-key", testSigningKey, "--tenant", bad}
		if code := run(context.Background(), args, env(nil), &out, &errOut); code != exitUsage || out.Len() != 0 || !strings.Contains(errOut.String(), "--tenant: ") {
			t.Errorf("--tenant %q: exit %d, stdout %q, stderr %q; want 2, no token, and why", bad, code, out.String(), errOut.String())
		}
	}
}
