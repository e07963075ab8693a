package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/logtest"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/server"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// jsonLogger logs JSON lines to w.
func jsonLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// eventually polls cond every 20ms until it holds or d has passed.
func eventually(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get fetches url and returns its status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// keyLines is the content of a signing key file holding keys, one a line.
func keyLines(keys ...string) string { return strings.Join(keys, "\n") + "\n" }

// replaceFile writes content to a new file and renames it over path, as a
// deployment tool replaces a secret file.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	writeFile(t, path+".new", content)
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// TestSigningKeyFileRotation rotates the keys of a running instance by
// rewriting its key file alone: a key added, made the signing key, the old
// one removed, each taken by a reload (Hangup, what SIGHUP does) with no
// restart, and each step's tokens accepted or refused as the keys in force
// say. A file that does not parse is refused and the keys stay.
func TestSigningKeyFileRotation(t *testing.T) {
	const oldRaw, newRaw = "guardian-file-rotation-old-key-0123456789", "guardian-file-rotation-new-key-0123456789"
	oldKey, newKey := mustKey(t, oldRaw), mustKey(t, newRaw)
	path := filepath.Join(t.TempDir(), "signing-keys")
	writeFile(t, path, keyLines(oldRaw))
	var logs logtest.Buffer
	srv := serve(t, server.Config{Addr: "127.0.0.1:0", SigningKeyFile: path, HashKey: testKey, Logger: jsonLogger(&logs)})
	in := &instance{srv: srv, base: "http://" + srv.Addr()}
	token := func(k secret.Key) string {
		t.Helper()
		tok, err := tokens.NewService(k).Issue(tokens.ScopeCheck, "auth", time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	body := map[string]any{"flow": "login", "ip": "192.0.2.10"}
	status := func(tok string) int { t.Helper(); return in.do(t, "POST", "/v1/check", tok, body).status }
	oldTok, newTok := token(oldKey), token(newKey)
	if status(oldTok) != http.StatusOK || status(newTok) != http.StatusUnauthorized {
		t.Fatal("before the rotation: want the old key's token alone accepted")
	}
	first := in.do(t, "POST", "/v1/check", oldTok, body)

	steps := []struct {
		name     string
		file     string
		old, new int
	}{
		{"new key added, old one signing", keyLines(oldRaw, newRaw), 200, 200},
		{"new key signing, old one verifying", keyLines(newRaw, oldRaw), 200, 200},
		{"a file that does not parse is refused", keyLines(newRaw, "short"), 200, 200},
		{"old key removed", keyLines(newRaw), 401, 200},
	}
	for _, st := range steps {
		replaceFile(t, path, st.file)
		srv.Hangup()
		if got := status(oldTok); got != st.old {
			t.Errorf("%s: the old key's token %d, want %d", st.name, got, st.old)
		}
		if got := status(newTok); got != st.new {
			t.Errorf("%s: the new key's token %d, want %d", st.name, got, st.new)
		}
	}
	// The attempt id the old key sealed is refused now that it is gone.
	if r := in.do(t, "POST", "/v1/report", newTok, map[string]any{"attempt_id": str(first.body["attempt_id"]), "outcome": "failure"}); r.status != http.StatusBadRequest {
		t.Errorf("an attempt id of the removed key: %d %s, want 400", r.status, r.raw)
	}
	var loaded, refused int
	for _, l := range logtest.JSONLines(t, logs.String()) {
		switch l["msg"] {
		case "signing keys loaded":
			loaded++
			if l["by"] != "signal" || l["signing_kid"] == nil || strings.Contains(logs.String(), oldRaw) {
				t.Errorf("load line %v: want by signal and the kid, never the key", l)
			}
		case "signing key file refused, keys in force kept":
			refused++
		}
	}
	if loaded != 3 || refused != 1 {
		t.Errorf("%d loads and %d refusals logged, want 3 and 1", loaded, refused)
	}
	_, raw := get(t, in.base+"/metrics")
	for _, want := range []string{`guardian_signing_key_info{kid="` + newKey.ID() + `",use="sign"} 1`} {
		if !strings.Contains(raw, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(raw, oldKey.ID()) {
		t.Error("/metrics still lists the removed key")
	}
}

// TestSigningKeyFileWatched rewrites the key file of a running instance
// through a swapped symlink, as the kubelet updates a mounted Secret: the
// instance takes the new keys by itself, with no signal.
func TestSigningKeyFileWatched(t *testing.T) {
	const aRaw, bRaw = "guardian-watched-key-a-0123456789abcdef", "guardian-watched-key-b-0123456789abcdef"
	dir := t.TempDir()
	mount := func(name, content string) {
		t.Helper()
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(d, "keys"), content)
		tmp := filepath.Join(dir, "..data.tmp")
		if err := os.Symlink(name, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	mount("..v1", keyLines(aRaw))
	path := filepath.Join(dir, "keys")
	if err := os.Symlink(filepath.Join("..data", "keys"), path); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, server.Config{Addr: "127.0.0.1:0", SigningKeyFile: path, HashKey: testKey})
	in := &instance{srv: srv, base: "http://" + srv.Addr()}
	tok, err := tokens.NewService(mustKey(t, bRaw)).Issue(tokens.ScopeCheck, "auth", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"flow": "login", "ip": "192.0.2.11"}
	if r := in.do(t, "POST", "/v1/check", tok, body); r.status != http.StatusUnauthorized {
		t.Fatalf("b's token before b is in the file: %d", r.status)
	}
	mount("..v2", keyLines(aRaw, bRaw))
	if !eventually(10*time.Second, func() bool { return in.do(t, "POST", "/v1/check", tok, body).status == http.StatusOK }) {
		t.Fatal("the instance never took the key added through the swapped symlink")
	}
}

// TestFirstKeyChangeNeedsAHashKey: without a hash key of its own, every
// limit's name is keyed by the signing key, so a reload that changes the
// first key is refused (adding a verifying key is not).
func TestFirstKeyChangeNeedsAHashKey(t *testing.T) {
	const aRaw, bRaw = "guardian-no-hash-key-a-0123456789abcdef", "guardian-no-hash-key-b-0123456789abcdef"
	path := filepath.Join(t.TempDir(), "keys")
	writeFile(t, path, keyLines(aRaw))
	srv := serve(t, server.Config{Addr: "127.0.0.1:0", SigningKeyFile: path})
	replaceFile(t, path, keyLines(aRaw, bRaw))
	if err := srv.ReloadKeys("test"); err != nil {
		t.Errorf("adding a verifying key without a hash key: %v", err)
	}
	replaceFile(t, path, keyLines(bRaw, aRaw))
	if err := srv.ReloadKeys("test"); err == nil || !strings.Contains(err.Error(), "--hash-key-file") {
		t.Errorf("a new first key without a hash key: %v, want it refused, naming --hash-key-file", err)
	}
	if _, err := server.New(server.Config{SigningKeyFile: path + ".missing"}); err == nil {
		t.Error("New with a missing key file succeeded")
	}
}
