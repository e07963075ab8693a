package engine_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/redistest"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/store"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/tokens"
)

// Every rules file the parser accepts decides checks and settles reports:
// the largest ones, generated here, run checks and reports of every flow
// through the engine on the embedded store, a Redis and a Redis Cluster.

// longName is a rule name of the longest length, 63 characters, ending in
// the rule's index.
func longName(prefix string, i int) string {
	tail := fmt.Sprintf("-%02d", i)
	return prefix + strings.Repeat("x", 63-len(prefix)-len(tail)) + tail
}

// settlingRules are the fields of rules a report settles, by every key they
// may have, in every mode, one of which generatedRule picks by index.
var settlingRules = []string{
	"key: account, type: rate, count: failures, limit: 1000, per: 1h, burst: 1000",
	"key: account, type: consecutive_failures, limit: 100",
	"key: ip, type: rate, count: failures, limit: 1000, per: 1h, burst: 1000, ipv4_prefix: %d, ipv6_prefix: %d",
	"key: account+ip, type: rate, count: failures, limit: 1000, per: 1h, burst: 1000",
	"key: account+ip, type: consecutive_failures, limit: 100",
	"key: recipient, type: rate, count: failures, limit: 1000, per: 1h, burst: 1000",
	"key: secret, type: rate, count: failures, limit: 1000, per: 1h, burst: 1000, action: challenge",
	"key: account, type: rate, count: failures, limit: 1000, per: 1h, burst: 1000, mode: shadow",
	"key: account, type: consecutive_failures, limit: 100, mode: shadow",
	"key: ip, type: distinct, of: account, count: failures, limit: 1000, per: 24h",
}

// otherRules are rules a report settles nothing of.
var otherRules = []string{
	"key: account, type: rate, limit: 1000, per: 1h, burst: 1000",
	"key: ip, type: rate, limit: 1000, per: 1h, burst: 1000, ipv4_prefix: %d, ipv6_prefix: %d",
	"key: recipient, type: rate, limit: 1000, per: 1h, burst: 1000, mode: shadow",
	"key: ip, type: distinct, of: account, count: attempts, limit: 1000, per: 24h",
	"key: global, type: failure_rate, limit: 1000000, per: 1m",
}

// generatedRule is rule i of kinds, with prefixes of its own where it has
// them, on flows.
func generatedRule(prefix string, i int, kinds []string, flows string) string {
	fields := kinds[i%len(kinds)]
	if strings.Contains(fields, "%d") {
		fields = fmt.Sprintf(fields, 8+i%25, 16+i%113)
	}
	return fmt.Sprintf("  - {name: %s, flows: %s, %s}\n", longName(prefix, i), flows, fields)
}

// widestFile is a file with every flow at the most rules a report settles,
// of every key and mode, with more rules that settle nothing and familiar
// networks; plus settles more rules than the parser accepts.
func widestFile(plus int) string {
	const flows = "[login, password_reset, otp_send, otp_verify]"
	var b strings.Builder
	b.WriteString("version: 1\nfamiliar_networks: {ipv4_prefix: 24, ipv6_prefix: 48, hold: 90d}\nrules:\n")
	for i := range rules.MaxSettlingRules + plus {
		b.WriteString(generatedRule("settles", i, settlingRules, flows))
	}
	for i := range 40 {
		b.WriteString(generatedRule("other", i, otherRules[:4], flows))
	}
	b.WriteString(generatedRule("global", 0, otherRules[4:], flows))
	return b.String()
}

// builtinAndShadowsFile is the built-in rules with shadow candidates for
// login filling its rules a report settles to the most, plus more.
func builtinAndShadowsFile(tb testing.TB, plus int) string {
	tb.Helper()
	data, err := os.ReadFile("../rules/defaults.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, r := range rules.Default().For(rules.Login) {
		if r.GivesBack() {
			n++
		}
	}
	var b strings.Builder
	b.Write(data)
	for i := range rules.MaxSettlingRules - n + plus {
		b.WriteString(generatedRule("candidate", i, []string{settlingRules[7], settlingRules[8], strings.Replace(settlingRules[2], "limit: 1000", "limit: 1000, mode: shadow", 1)}, "[login]"))
	}
	return b.String()
}

func TestLargestRulesFilesDecideAndSettle(t *testing.T) {
	files := map[string]func(plus int) string{
		"widest":              widestFile,
		"builtin_and_shadows": func(plus int) string { return builtinAndShadowsFile(t, plus) },
	}
	sets := map[string]*rules.Set{}
	for name, file := range files {
		set, err := rules.Parse(name+".yaml", []byte(file(0)), t0)
		if err != nil {
			t.Fatalf("%s: the parser refuses it: %v", name, err)
		}
		if _, err := rules.Parse(name+".yaml", []byte(file(1)), t0); err == nil {
			t.Fatalf("%s with one rule more that settles: the parser accepts it; the generated file is not the largest", name)
		}
		sets[name] = set
	}
	stores := map[string]storeFactory{
		"memstore": func(now func() time.Time) store.Store { return memstore.New(memstore.Config{Now: now}) },
		"redis":    redisFactory(t, redistest.Start(t).Client(t)),
		"cluster":  redisFactory(t, redistest.StartCluster(t).Client(t)),
	}
	longest := 0
	for storeName, newStore := range stores {
		for name, set := range sets {
			t.Run(storeName+"/"+name, func(t *testing.T) {
				h := newHarnessSet(t, set, newStore)
				for _, flow := range rules.Flows {
					for _, ip := range []string{"203.0.113.7", "2001:db8:1:2::7"} {
						t.Run(string(flow)+"/"+ip, func(t *testing.T) {
							longest = max(longest, playMaxFlow(t, h, flow, ip))
						})
					}
				}
			})
		}
	}
	t.Logf("longest attempt id under the largest rules files: %d characters", longest)

	h := newHarnessSet(t, rules.Default())
	d := h.check(t, engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: "203.0.113.7", SecretFingerprint: fingerprint("a")})
	t.Logf("attempt id of a login with a fingerprint under the built-in rules: %d characters", len(d.AttemptID))
}

// playMaxFlow plays checks and reports of flow from ip under h's rules: a
// failure keeps what its check reserved and confirms the counts; a success
// gives back and resets, learns the network and trusts the device, whose
// bucket and the network's then settle alike. It returns the longest
// attempt id it saw.
func playMaxFlow(t *testing.T, h *harness, flow rules.Flow, ip string) int {
	settles := flow != rules.OTPSend
	account := "max-" + string(flow) + "-" + ip
	recipient := fmt.Sprintf("+1555%07d", len(account)*1000+len(ip)*10+int(ip[0]))
	set := h.eng.Rules()
	n, longest := 0, 0
	check := func(ip, device string) engine.Decision {
		t.Helper()
		n++
		d := h.check(t, engine.CheckRequest{Flow: flow, Account: account, IP: ip, Recipient: recipient,
			SecretFingerprint: fingerprint(fmt.Sprint(n)), DeviceToken: device})
		if d.AttemptID == "" || d.Action == rules.Slow || d.Action == rules.Block {
			t.Fatalf("check %d: %s by %s, want it allowed under limits this large", n, d.Action, d.Rule)
		}
		if len(d.AttemptID) > tokens.MaxAttemptLen {
			t.Fatalf("check %d: attempt id of %d characters, want at most %d", n, len(d.AttemptID), tokens.MaxAttemptLen)
		}
		longest = max(longest, len(d.AttemptID))
		return d
	}
	report := func(d engine.Decision, o engine.Outcome) engine.ReportResult {
		t.Helper()
		res, err := h.eng.Report(context.Background(), d.AttemptID, o)
		if err != nil {
			t.Fatalf("report %s: %v", o, err)
		}
		return res
	}
	// settling returns the rule behind each limit of d that a report
	// settles, by name; a rule keyed by the check's guess is left out, as
	// every check here guesses anew.
	settling := func(d engine.Decision) map[string]*rules.Rule {
		out := map[string]*rules.Rule{}
		for _, l := range d.Limits {
			if r, _ := set.Rule(l.Rule); r.GivesBack() && r.Key != rules.KeySecret {
				out[l.Rule] = r
			}
		}
		return out
	}
	remaining := func(d engine.Decision, rule string) int64 { return limit(t, d, rule) }
	status := func() map[string]engine.Limit {
		st, err := h.eng.Status(context.Background(), account)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]engine.Limit{}
		for _, l := range st.Limits {
			out[l.Rule] = l
		}
		return out
	}

	first := check(ip, "")
	if len(settling(first)) == 0 {
		for _, r := range set.For(flow) {
			if r.GivesBack() && r.Mode == rules.Enforce && r.Key != rules.KeySecret {
				t.Fatalf("no limit of %s in %+v", r.Name, first.Limits)
			}
		}
		report(first, engine.Success) // the flow has no enforced rule that settles
		return longest
	}
	report(first, engine.Failure)
	second := check(ip, "")
	for name, r := range settling(second) {
		l := second.Limits[slicesIndex(second.Limits, name)]
		switch {
		case r.Type == rules.ConsecutiveFailures && settles && l.Reset <= 2*tokens.AttemptTTL:
			t.Errorf("%s after a failure: kept %v, want the count confirmed beyond %v", name, l.Reset, 2*tokens.AttemptTTL)
		case r.Type == rules.Rate && l.Remaining != remaining(first, name)-1:
			t.Errorf("%s after a failure: %d left, want %d: the failure keeps what it reserved", name, l.Remaining, remaining(first, name)-1)
		}
	}
	before := status()
	tok := report(second, engine.Success).DeviceToken
	after := status()
	third := check(ip, "")
	for name, r := range settling(second) {
		switch {
		case r.Key == rules.KeyAccount:
			// The network the success learned takes the next check: the
			// shared bucket shows the reservation given back, the count
			// reset.
			want := before[name].Remaining
			switch {
			case settles && r.Type == rules.Rate:
				want++
			case settles:
				want = r.Limit
			}
			if after[name].Remaining != want {
				t.Errorf("%s after a success: %d left in the shared bucket, want %d", name, after[name].Remaining, want)
			}
		case r.Type == rules.ConsecutiveFailures:
			if got := remaining(third, name); settles && got != r.Limit-1 {
				t.Errorf("%s after a success: %d left, want %d: the count reset", name, got, r.Limit-1)
			}
		default:
			want := remaining(second, name) - 1
			if settles {
				want++
			}
			if got := remaining(third, name); got != want {
				t.Errorf("%s after a success: %d left, want %d", name, got, want)
			}
		}
	}
	if !settles {
		if tok != "" {
			t.Error("a sent code earned a device token")
		}
		return longest
	}
	if tok == "" {
		t.Fatal("a success with an account earned no device token")
	}
	// A trusted device, and the network the success made familiar, count
	// in buckets of their own, and settle there.
	learns := flow == rules.Login || flow == rules.PasswordReset
	neighbour := netip.MustParseAddr(ip).Next().String()
	for _, c := range []struct {
		ip, device string
		trust      engine.Trust
	}{{ip, tok, engine.TrustDevice}, {neighbour, "", engine.TrustNetwork}} {
		d := check(c.ip, c.device)
		want := c.trust
		if c.trust == engine.TrustNetwork && !learns {
			want = engine.TrustNone
		}
		if d.Trust != want {
			t.Fatalf("check from %s: trust %s, want %s", c.ip, d.Trust, want)
		}
		report(d, engine.Success)
		again := check(c.ip, c.device)
		for name, r := range settling(again) {
			got, was := remaining(again, name), remaining(d, name)
			if r.Type == rules.ConsecutiveFailures {
				was = r.Limit - 1
			}
			if r.Type == rules.ConsecutiveFailures && r.Key == rules.KeyAccount && c.device == "" && netip.MustParseAddr(ip).Is4() {
				// The third check, from ip and never reported, stays
				// counted: the neighbour's success lifts only the
				// failures made from its own address (an IPv6
				// neighbour shares ip's /64, and so its source).
				was--
			}
			if got != was {
				t.Errorf("trust %s, %s after a success: %d left, want %d", d.Trust, name, got, was)
			}
		}
		report(again, engine.Failure)
	}
	return longest
}

// slicesIndex returns the index of rule's limit in ls.
func slicesIndex(ls []engine.Limit, rule string) int {
	for i, l := range ls {
		if l.Rule == rule {
			return i
		}
	}
	return -1
}
