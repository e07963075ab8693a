package main

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/breached"
	"github.com/guardian-sec/guardian/internal/breached/breachedtest"
	"github.com/guardian-sec/guardian/internal/logtest"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// johnList is John the Ripper's list of common passwords.
const johnList = breachedtest.JohnList

func TestBreachedBuildJohnTheRipper(t *testing.T) {
	pws := breachedtest.JohnPasswords(t)
	out := filepath.Join(t.TempDir(), "john.bgf")
	code, stdout, stderr := runCLI("breached", "build", "--format", "plain", "--out", out, johnList)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	n := thousands(int64(len(pws)))
	for _, want := range []string{out + ": " + n + " entries from " + n + " plain lines (" + n + " kept); ", "bits an entry, false positives 1 in 256\n", "built in ", "peak memory "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout %q, want %q in it", stdout, want)
		}
	}
	f, err := breached.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pws {
		if !f.ContainsPassword(p) {
			t.Fatalf("%q missing", p)
		}
	}
	code, stdout, _ = runCLI("breached", "info", out)
	if code != exitOK || !strings.Contains(stdout, "a breached-password filter of "+n+" entries from plain lists (lookups by sha1)") || !strings.Contains(stdout, f.Info().Checksum) {
		t.Errorf("info: exit %d, %q", code, stdout)
	}
}

// hibpList writes n lines of a Have I Been Pwned list of format, the
// password of line i being "pw-i" seen i%20+1 times.
func hibpList(t *testing.T, format breached.Format, n int) string {
	t.Helper()
	es := make([]breachedtest.Entry, n)
	for i := range es {
		es[i] = breachedtest.Entry{Password: fmt.Sprint("pw-", i), Count: uint64(i%20 + 1)}
	}
	return breachedtest.List(t, format, es)
}

func TestBreachedBuildHIBPLists(t *testing.T) {
	const n = 20_000
	for _, format := range []breached.Format{breached.SHA1, breached.NTLM} {
		t.Run(string(format), func(t *testing.T) {
			list := hibpList(t, format, n)
			out := filepath.Join(t.TempDir(), "x.bgf")
			code, stdout, stderr := runCLI("breached", "build", "--format", string(format), "--min-count", "11", "--out", out, list)
			if code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			if want := "10,000 entries from 20,000 " + string(format) + " lines (10,000 kept)"; !strings.Contains(stdout, want) {
				t.Errorf("stdout %q, want %q", stdout, want)
			}
			f, err := breached.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			if i := f.Info(); i.Format != format || i.MinCount != 11 || i.Entries != n/2 {
				t.Errorf("info %+v", i)
			}
			for i := range n {
				if i%20+1 >= 11 && !f.ContainsPassword(fmt.Sprint("pw-", i)) {
					t.Fatalf("pw-%d (count %d) missing", i, i%20+1)
				}
			}
		})
	}
}

func TestBreachedBuildRefuses(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.bgf")
	bad := filepath.Join(dir, "bad.txt")
	writeTestFile(t, bad, "5BAA61E4C9B93F3F0682250B6CF8331B7EE68FD8:3\nnot a hash\n")
	corrupt := filepath.Join(dir, "corrupt.bgf")
	writeTestFile(t, corrupt, "\x89GBF\r\n\x1a\nnot the rest of a filter")
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no out", []string{"build", johnList}, exitUsage, "--out FILE is required"},
		{"bad format", []string{"build", "--out", out, "--format", "md5", johnList}, exitUsage, `--format: "md5" is not sha1, ntlm or plain`},
		{"plain with a minimum", []string{"build", "--out", out, "--format", "plain", "--min-count", "3", johnList}, exitUsage, "--min-count needs HASH:COUNT lists"},
		{"stdin twice", []string{"build", "--out", out, "-", "-"}, exitUsage, "standard input (-) can be read once"},
		{"negative minimum", []string{"build", "--out", out, "--min-count", "-1", johnList}, exitUsage, "invalid value"},
		{"missing input", []string{"build", "--out", out, filepath.Join(dir, "none.txt")}, exitFailure, "no such file"},
		{"a bad line", []string{"build", "--out", out, bad}, exitFailure, bad + ":2: a hash of 10 characters"},
		{"passwords as sha1", []string{"build", "--out", out, johnList}, exitFailure, johnList + ":1: a hash of"},
		{"nothing kept", []string{"build", "--out", out, "--min-count", "100", hibpList(t, breached.SHA1, 10)}, exitFailure, "no entries to build a filter of"},
		{"no subcommand", nil, exitUsage, "want 'guardian breached build' or 'guardian breached info'"},
		{"info of no file", []string{"info"}, exitUsage, "want one filter file"},
		{"info of a corrupt file", []string{"info", corrupt}, exitFailure, corrupt + ": not a usable breached-password filter: cut short"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(append([]string{"breached"}, tt.args...)...)
			if code != tt.code || stdout != "" || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, tt.code, tt.want)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused build left %s: %v", out, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".x.bgf.*")); len(left) != 0 {
		t.Errorf("a refused build left %v", left)
	}
}

func TestProgressBar(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var out bytes.Buffer
	p := &progressBar{w: &out, total: 4 << 30, start: t0}
	for _, tt := range []struct {
		p    breached.Progress
		at   time.Duration
		want string
	}{
		{breached.Progress{Bytes: 1 << 30, Lines: 21_000_000}, 41 * time.Second, "reading  [######------------------]  25%  1.0 GiB of 4.0 GiB  21.0M lines  0:41"},
		{breached.Progress{Bytes: 4 << 30, Lines: 84_000_000, Shard: 64, Shards: 256}, 75 * time.Minute, "building [######------------------]  25%  shard 64 of 256  1:15:00"},
		{breached.Progress{Bytes: 5 << 30}, time.Second, "reading  [########################] 100%  4.0 GiB of 4.0 GiB  0 lines  0:01"},
	} {
		if got := p.line(tt.p, t0.Add(tt.at)); got != tt.want {
			t.Errorf("line(%+v)\n got %q\nwant %q", tt.p, got, tt.want)
		}
	}
	unknown := &progressBar{w: &out, start: t0}
	if got, want := unknown.line(breached.Progress{Bytes: 3 << 20, Lines: 950}, t0.Add(3*time.Second)), "reading  950 lines, 3.0 MiB  0:03"; got != want {
		t.Errorf("without a total: %q, want %q", got, want)
	}
	// Redrawn in place, at most every progressRedraw; cleared when done.
	p.update(breached.Progress{Lines: 1}, t0.Add(time.Second))
	p.update(breached.Progress{Lines: 2}, t0.Add(time.Second+progressRedraw/2))
	p.update(breached.Progress{Lines: 3}, t0.Add(time.Second+progressRedraw))
	p.done()
	if got := out.String(); strings.Count(got, "\r\x1b[K") != 3 || !strings.Contains(got, " 1 lines") || strings.Contains(got, " 2 lines") || !strings.Contains(got, " 3 lines") || !strings.HasSuffix(got, "\r\x1b[K") {
		t.Errorf("drawn %q", got)
	}
	var none *progressBar // not a terminal: nothing drawn, nothing panics
	none.update(breached.Progress{}, t0)
	none.done()
	if isTerminal(&out) {
		t.Error("a buffer is a terminal")
	}
}

func TestNumbersForPeople(t *testing.T) {
	for _, tt := range []struct {
		got, want string
	}{
		{thousands(0), "0"}, {thousands(999), "999"}, {thousands(1000), "1,000"}, {thousands(-1234567), "-1,234,567"},
		{sizeIEC(950), "950 B"}, {sizeIEC(4728), "4.6 KiB"}, {sizeIEC(1_179_768_000), "1.1 GiB"},
		{short(950), "950"}, {short(12_345), "12.3k"}, {short(1_500_000), "1.5M"}, {short(1_020_000_000), "1.02G"},
		{clock(59 * time.Second), "0:59"}, {clock(3*time.Hour + 2*time.Minute + 1*time.Second), "3:02:01"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

// TestServeBreachedFilter runs the real binary: a filter built from
// standard input, served, refused at start when corrupted, kept on a SIGHUP
// that finds it corrupted, and replaced on one that finds a new one.
func TestServeBreachedFilter(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "guardian")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := t.TempDir()
	filter := filepath.Join(dir, "breached.bgf")
	buildFrom := func(list string) {
		t.Helper()
		cmd := exec.Command(bin, "breached", "build", "--format", "plain", "--out", filter, "-")
		cmd.Stdin = strings.NewReader(list)
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "entries from") {
			t.Fatalf("build: %v\n%s", err, out)
		}
	}
	buildFrom("hunter2\ncorrect horse\n")
	good, err := os.ReadFile(filter)
	if err != nil {
		t.Fatal(err)
	}

	// A corrupted file stops the start, saying why.
	corrupted := filepath.Join(dir, "corrupted.bgf")
	bad := append([]byte(nil), good...)
	bad[len(bad)-40] ^= 1
	writeTestFile(t, corrupted, string(bad))
	out, err := exec.Command(bin, "serve", "--addr", freeAddr(t), "--breached", corrupted, "--signing-key", testSigningKey, "--log-format", "text").CombinedOutput()
	if code := exitCodeOf(err); code != exitFailure || !strings.Contains(string(out), "--breached: breached: "+corrupted+": not a usable breached-password filter: checksum mismatch") {
		t.Fatalf("serve with a corrupted filter: exit %d\n%s", code, out)
	}

	addr := freeAddr(t)
	cmd := exec.Command(bin, "serve", "--addr", addr)
	cmd.Env = append(os.Environ(), "GUARDIAN_SIGNING_KEY="+testSigningKey, "GUARDIAN_LOG_FORMAT=text", "GUARDIAN_BREACHED="+filter)
	var stderr logtest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	key, _, _ := (&keyFlags{key: testSigningKey}).load()
	tok, err := tokens.NewService(key).Issue(tokens.ScopeCheck, "test", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	breachedOf := func(pw string) any {
		sum := sha1.Sum([]byte(pw))
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/passwords/check", strings.NewReader(`{"sha1":"`+hex.EncodeToString(sum[:])+`"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return body["breached"]
	}
	waitFor(t, func() bool { return breachedOf("hunter2") == true })

	writeTestFile(t, filter, string(bad))
	later := time.Now().Add(time.Minute)
	os.Chtimes(filter, later, later)
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		return strings.Contains(stderr.String(), "breached-password filter reload refused, previous filter kept")
	})
	if got := breachedOf("hunter2"); got != true {
		t.Fatalf("after a refused reload hunter2 answers %v", got)
	}

	buildFrom("tr0ub4dor&3\n")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return breachedOf("tr0ub4dor&3") == true })
}

// exitCodeOf is the exit status of a finished command's error.
func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	if e, ok := err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	return -1
}
