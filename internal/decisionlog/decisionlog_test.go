package decisionlog_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/guardian-sec/guardian/internal/aggregate"
	"github.com/guardian-sec/guardian/internal/decisionlog"
	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/metrics"
	"github.com/guardian-sec/guardian/internal/replay"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
	"github.com/guardian-sec/guardian/internal/shadow"
	"github.com/guardian-sec/guardian/internal/store/memstore"
	"github.com/guardian-sec/guardian/internal/testclock"
	"github.com/guardian-sec/guardian/internal/tokens"

	"github.com/guardian-sec/guardian/internal/logtest"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

var testKey = func() secret.Key {
	k, err := secret.New([]byte("decision-log-test-signing-key-0123456789"))
	if err != nil {
		panic(err)
	}
	return k
}()

// testEngine is an engine on the embedded store, on a test clock.
type testEngine struct {
	eng   *engine.Engine
	clock *testclock.Clock
	book  *shadow.Book
}

func newEngine(tb testing.TB, yaml string) *testEngine {
	tb.Helper()
	set, err := rules.Parse("test.yaml", []byte(yaml), t0)
	if err != nil {
		tb.Fatal(err)
	}
	var holder rules.Holder
	holder.Store(set)
	clock := testclock.New(t0)
	book := shadow.NewBook()
	book.Sync(set.ShadowNames())
	return &testEngine{
		eng: engine.New(engine.Config{
			Rules:     &holder,
			Store:     memstore.New(memstore.Config{Now: clock.Now}),
			Key:       testKey,
			Aggregate: aggregate.New(aggregate.Config{Now: clock.Now}),
			Shadow:    book,
			Metrics:   metrics.New(prometheus.NewRegistry()),
			Now:       clock.Now,
		}),
		clock: clock,
		book:  book,
	}
}

// events parses every line of a log.
func events(tb testing.TB, log string) []event.Event {
	tb.Helper()
	var out []event.Event
	for i, line := range strings.Split(strings.TrimSuffix(log, "\n"), "\n") {
		if line == "" {
			continue
		}
		ev, err := event.Parse([]byte(line))
		if err != nil {
			tb.Fatalf("line %d %q: %v", i+1, line, err)
		}
		out = append(out, ev)
	}
	return out
}

const oneAccountRule = `version: 1
rules:
  - name: acct
    flows: [login, otp_send]
    key: account
    type: rate
    limit: 1
    per: 1h
    burst: 1
`

var (
	secretPseudonym = regexp.MustCompile(`^h-[0-9a-f]{32}$`)
	eventID         = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
)

func TestLogWritesChecksAndReportsAsReplayEvents(t *testing.T) {
	// A burst of 3: the second check's cost of 3 fits it, but not after the
	// first check's failure.
	te := newEngine(t, strings.Replace(oneAccountRule, "burst: 1", "burst: 3", 1))
	var out logtest.Buffer
	l := decisionlog.New(decisionlog.Config{Out: &out, Key: testKey, Now: te.clock.Now})
	e := decisionlog.Wrap(te.eng, l)
	ctx := context.Background()

	allowed, err := e.Check(ctx, engine.CheckRequest{Flow: rules.Login, Account: "Alice@Example.com", IP: "203.0.113.7"})
	if err != nil || allowed.AttemptID == "" {
		t.Fatalf("first check: %+v, %v", allowed, err)
	}
	te.clock.Advance(250 * time.Millisecond)
	if _, err := e.Report(ctx, allowed.AttemptID, engine.Failure); err != nil {
		t.Fatal(err)
	}
	te.clock.Advance(time.Second)
	slowed, err := e.Check(ctx, engine.CheckRequest{Flow: rules.OTPSend, Account: "alice@example.com", IP: "203.0.113.7", Recipient: "+1 (555) 010-0000", Cost: 3})
	if err != nil || slowed.Action != rules.Slow {
		t.Fatalf("second check: %+v, %v", slowed, err)
	}
	// Neither a refused check nor a refused report is logged.
	if _, err := e.Check(ctx, engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: "300.1.1.1"}); err == nil {
		t.Fatal("a check with a bad ip was decided")
	}
	if _, err := e.Report(ctx, allowed.AttemptID, engine.Success); !errors.Is(err, engine.ErrAlreadyReported) {
		t.Fatalf("second report: %v, want ErrAlreadyReported", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	log := out.String()
	for _, clear := range []string{"alice", "Alice", "example.com", "203.0.113", "5550100000", allowed.AttemptID} {
		if strings.Contains(log, clear) {
			t.Errorf("the log holds %q in clear:\n%s", clear, log)
		}
	}
	evs := events(t, log)
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3:\n%s", len(evs), log)
	}
	check, report, slow := evs[0], evs[1], evs[2]
	if check.Kind != event.Check || !check.Time.Equal(t0) || check.Flow != rules.Login || check.Account != keys.NewHasher(testKey).Pseudonym(keys.PseudonymAccount, "alice@example.com") || !eventID.MatchString(check.ID) {
		t.Errorf("check event = %+v", check)
	}
	if ip, err := netip.ParseAddr(check.IP); err != nil || !ip.Is4() {
		t.Errorf("check ip %q: want an IPv4 pseudonym (%v)", check.IP, err)
	}
	if report.Kind != event.Report || report.ID != check.ID || report.Outcome != engine.Failure || !report.Time.Equal(t0.Add(250*time.Millisecond)) {
		t.Errorf("report event = %+v, want the failure of %s", report, check.ID)
	}
	if slow.Kind != event.Check || slow.ID == check.ID || !eventID.MatchString(slow.ID) || slow.Account != check.Account || slow.IP != check.IP || slow.Cost != 3 || slow.Flow != rules.OTPSend {
		t.Errorf("slowed check event = %+v; want a fresh id, the same pseudonyms as %+v, cost 3", slow, check)
	}
	if want := keys.NewHasher(testKey).Pseudonym(keys.PseudonymRecipient, "+15550100000"); slow.Recipient != want {
		t.Errorf("recipient pseudonym %q, want %q", slow.Recipient, want)
	}
}

// TestTenantChecks: a tenant's check line names the tenant, its account's
// pseudonym is the tenant's own, its address's everyone's; its report,
// in the same tenant, is logged too.
func TestTenantChecks(t *testing.T) {
	te := newEngine(t, oneAccountRule)
	var out logtest.Buffer
	l := decisionlog.New(decisionlog.Config{Out: &out, Key: testKey, Now: te.clock.Now})
	e := decisionlog.Wrap(te.eng, l)
	req := engine.CheckRequest{Flow: rules.Login, Account: "alice@example.com", IP: "203.0.113.7"}
	acme := keys.WithTenant(context.Background(), "acme")
	d, err := e.Check(acme, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Report(acme, d.AttemptID, engine.Success); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Check(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	evs := events(t, out.String())
	if len(evs) != 3 {
		t.Fatalf("%d events, want 3:\n%s", len(evs), out.String())
	}
	inAcme, report, plain := evs[0], evs[1], evs[2]
	if inAcme.Tenant != "acme" || plain.Tenant != "" || report.Kind != event.Report || report.ID != inAcme.ID {
		t.Errorf("events %+v, %+v, %+v; want tenant acme's check and report, then a default-tenant check", inAcme, report, plain)
	}
	if inAcme.Account == plain.Account || !keys.IsPseudonym(inAcme.Account) {
		t.Errorf("alice in acme is %q, in the default tenant %q: want two pseudonyms", inAcme.Account, plain.Account)
	}
	if inAcme.IP != plain.IP {
		t.Errorf("one address has pseudonyms %q and %q across tenants, want one", inAcme.IP, plain.IP)
	}
}

// TestPseudonymsKeepTheGroupingOfTheRules logs checks whose identifiers
// group in various ways, and reads the grouping back from the log.
func TestPseudonymsKeepTheGroupingOfTheRules(t *testing.T) {
	te := newEngine(t, oneAccountRule)
	var out logtest.Buffer
	l := decisionlog.New(decisionlog.Config{Out: &out, Key: testKey, Now: te.clock.Now})
	reqs := []engine.CheckRequest{
		/* 0 */ {Flow: rules.OTPSend, Account: "Alice", IP: "2001:db8:1:2::1", Recipient: "+1 (555) 010-0000"},
		/* 1 */ {Flow: rules.OTPSend, Account: " ALICE ", IP: "2001:db8:1:2:ffff:ffff:ffff:fffe", Recipient: "+15550100000"},
		/* 2 */ {Flow: rules.OTPSend, Account: "ａｌｉｃｅ", IP: "2001:db8:1:3::1", Recipient: "Eve@Example.COM"},
		/* 3 */ {Flow: rules.OTPSend, Account: "bob", IP: "2001:db9::1", Recipient: "eve@example.com"},
		/* 4 */ {Flow: rules.Login, Account: "alicia", IP: "192.0.2.1"},
		/* 5 */ {Flow: rules.Login, IP: "::ffff:192.0.2.200"},
		/* 6 */ {Flow: rules.Login, IP: "192.0.3.1"},
	}
	for _, req := range reqs {
		l.Check(context.Background(), req, engine.Decision{Action: rules.Allow})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	evs := events(t, out.String())
	if len(evs) != len(reqs) {
		t.Fatalf("%d events, want %d", len(evs), len(reqs))
	}
	ip := func(i int) netip.Addr {
		a, err := keys.IP(evs[i].IP)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	shared := func(i, j int) int {
		a, b := ip(i).AsSlice(), ip(j).AsSlice()
		if len(a) != len(b) {
			return -1
		}
		for bits := 0; bits < len(a)*8; bits++ {
			m := byte(0x80) >> (bits % 8)
			if a[bits/8]&m != b[bits/8]&m {
				return bits
			}
		}
		return len(a) * 8
	}
	tests := []struct {
		name string
		ok   bool
	}{
		{"accounts differing in case, space and width are one account", evs[0].Account == evs[1].Account && evs[1].Account == evs[2].Account},
		{"other accounts are other accounts", evs[0].Account != evs[3].Account && evs[0].Account != evs[4].Account},
		{"a phone in two formats is one recipient", evs[0].Recipient == evs[1].Recipient},
		{"an e-mail in two cases is one recipient", evs[2].Recipient == evs[3].Recipient},
		{"a phone and an e-mail are two recipients", evs[0].Recipient != evs[2].Recipient},
		{"two addresses of one /64 stay in one /64, as two addresses", shared(0, 1) == 64},
		{"two /64s sharing 63 bits share 63 bits", shared(0, 2) == 63},
		{"other /32s stay apart from the first bit they differ at", shared(0, 3) == 31},
		{"an IPv4-mapped address is the IPv4 address", ip(5).Is4()},
		{"two addresses of one IPv4 /24 stay in one /24", shared(4, 5) == 24},
		{"neighbouring /24s stay neighbours", shared(4, 6) == 23},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: not so in\n%s", tt.name, out.String())
		}
	}
}

// TestReplayOfTheLogCountsWhatProductionCounted runs random traffic through
// an engine whose rules are all in shadow mode, logging it, then replays
// the log: the replay evaluates every rule in shadow mode too, so each
// rule's counts must be exactly production's, which only holds if the
// pseudonyms group checks exactly as the real identifiers did.
func TestReplayOfTheLogCountsWhatProductionCounted(t *testing.T) {
	const shadowRules = `version: 1
rules:
  - name: per-account
    flows: [login, otp_verify]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 3
    mode: shadow
  - name: per-64
    flows: [login]
    key: ip
    type: rate
    limit: 1
    per: 10s
    burst: 4
    mode: shadow
  - name: per-24
    flows: [login]
    key: ip
    ipv4_prefix: 24
    ipv6_prefix: 48
    type: rate
    limit: 1
    per: 20s
    burst: 6
    mode: shadow
  - name: per-pair
    flows: [login]
    key: account+ip
    type: rate
    limit: 1
    per: 30s
    burst: 2
    action: challenge
    mode: shadow
  - name: per-recipient
    flows: [otp_verify]
    key: recipient
    type: rate
    limit: 1
    per: 1m
    burst: 2
    mode: shadow
  - name: streak
    flows: [login]
    key: account
    type: consecutive_failures
    limit: 4
    mode: shadow
  - name: per-secret
    flows: [login]
    key: secret
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 3
    action: challenge
    mode: shadow
`
	te := newEngine(t, shadowRules)
	var out logtest.Buffer
	l := decisionlog.New(decisionlog.Config{Out: &out, Key: testKey, Now: te.clock.Now})
	e := decisionlog.Wrap(te.eng, l)
	ctx := context.Background()

	accounts := []string{"alice", "ALICE", "bob", "Bob ", "carol"}
	ips := []string{"192.0.2.1", "192.0.2.77", "192.0.3.1", "2001:db8:1:2::1", "2001:db8:1:2::abcd", "2001:db8:1:3::1", "2001:db8:2::1"}
	recipients := []string{"+15550100000", "+1 555 010 0000", "Eve@example.com", "eve@EXAMPLE.com"}
	// A few guessed secrets, sprayed over the accounts and repeated on
	// each: the replay must count key: secret rules, and the repeated
	// guesses that spend nothing on the account rules, as production did.
	fingerprints := []string{"fp-summer2026-aaaaaaaa", "fp-winter2026-bbbbbbbb", "fp-letmein00-cccccccc"}
	var pending []string
	steps := []time.Duration{0, time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second}
	for i := range 1500 {
		te.clock.Advance(steps[i*7%len(steps)])
		if len(pending) > 0 && i%3 == 0 {
			outcome := engine.Failure
			if i%9 == 0 {
				outcome = engine.Success
			}
			// The newest attempt: an old one may have expired, and a report
			// guardian refuses is not logged.
			if _, err := e.Report(ctx, pending[len(pending)-1], outcome); err != nil && !errors.Is(err, tokens.ErrExpiredAttempt) {
				t.Fatal(err)
			}
			pending = pending[:len(pending)-1]
			continue
		}
		req := engine.CheckRequest{Flow: rules.Login, Account: accounts[i%len(accounts)], IP: ips[i*3%len(ips)]}
		switch i % 4 {
		case 1:
			req.Flow, req.Recipient = rules.OTPVerify, recipients[i%len(recipients)]
		case 2, 3:
			req.SecretFingerprint = fingerprints[i/4%len(fingerprints)]
		}
		d, err := e.Check(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if d.AttemptID != "" {
			pending = append(pending, d.AttemptID)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	set, _ := rules.Parse("test.yaml", []byte(shadowRules), t0)
	got, err := replay.Run(ctx, set, strings.NewReader(out.String()), replay.Config{
		Malformed: func(e *replay.LineError) { t.Errorf("the log has a malformed line: %v", e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	production := map[string]shadow.RuleReport{}
	for _, r := range te.book.Report() {
		production[r.Rule] = r
	}
	for _, r := range got.Rules {
		p := production[r.Rule]
		if r.Checks != p.Evaluated || r.WouldSlow != p.WouldSlow || r.WouldBlock != p.WouldBlock || r.WouldChallenge != p.WouldChallenge {
			t.Errorf("%s: replay %d checks, %d/%d/%d would slow/block/challenge; production %d, %d/%d/%d",
				r.Rule, r.Checks, r.WouldSlow, r.WouldBlock, r.WouldChallenge, p.Evaluated, p.WouldSlow, p.WouldBlock, p.WouldChallenge)
		}
		if r.WouldSlow+r.WouldBlock+r.WouldChallenge == 0 {
			t.Errorf("%s never tripped: the traffic proves nothing about it", r.Rule)
		}
	}
	if got.Reports.Applied != got.Input.Reports || got.Input.OutOfOrder != 0 {
		t.Errorf("replay input %+v, reports %+v: every report must find its check, in order", got.Input, got.Reports)
	}
	for _, fp := range fingerprints {
		if strings.Contains(out.String(), fp) {
			t.Errorf("the log holds the fingerprint %q", fp)
		}
	}
}

// TestSecretPseudonyms: the log names a check's fingerprint by a
// pseudonym, the same for one fingerprint whatever the account, another
// for another fingerprint or under another key, and never the fingerprint
// nor the guess the store counts it by.
func TestSecretPseudonyms(t *testing.T) {
	otherKey, err := secret.New([]byte("decision-log-test-other-signing-key-9876543210"))
	if err != nil {
		t.Fatal(err)
	}
	logged := func(key secret.Key, reqs ...engine.CheckRequest) []event.Event {
		var out logtest.Buffer
		l := decisionlog.New(decisionlog.Config{Out: &out, Key: key, Now: func() time.Time { return t0 }})
		for _, req := range reqs {
			l.Check(context.Background(), req, engine.Decision{Action: rules.Allow})
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "fp-") {
			t.Errorf("the log holds a fingerprint:\n%s", out.String())
		}
		return events(t, out.String())
	}
	const fpA, fpB = "fp-aaaaaaaaaaaaaaaa", "fp-bbbbbbbbbbbbbbbb"
	evs := logged(testKey,
		engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: "192.0.2.1", SecretFingerprint: fpA},
		engine.CheckRequest{Flow: rules.Login, Account: "bob", IP: "192.0.2.9", SecretFingerprint: fpA},
		engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: "192.0.2.1", SecretFingerprint: fpB},
		engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: "192.0.2.1"},
	)
	other := logged(otherKey, engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: "192.0.2.1", SecretFingerprint: fpA})
	guess := strconv.FormatUint(keys.NewGuesser(testKey).Guess(fpA), 16)
	tests := []struct {
		name string
		ok   bool
	}{
		{"a pseudonym is h- and 32 hex digits, a valid fingerprint", secretPseudonym.MatchString(evs[0].SecretFingerprint) && engine.CheckFingerprint(evs[0].SecretFingerprint) == nil},
		{"one fingerprint on two accounts is one pseudonym", evs[0].SecretFingerprint == evs[1].SecretFingerprint},
		{"another fingerprint is another pseudonym", evs[0].SecretFingerprint != evs[2].SecretFingerprint},
		{"a check without a fingerprint has none", evs[3].SecretFingerprint == ""},
		{"another key gives another pseudonym", other[0].SecretFingerprint != evs[0].SecretFingerprint},
		{"the pseudonym is not the guess the store counts", !strings.Contains(evs[0].SecretFingerprint, guess)},
	}
	for _, tt := range tests {
		if !tt.ok {
			t.Errorf("%s: not so in %+v", tt.name, evs)
		}
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteErrorsAreCountedAndNeverFailACheck(t *testing.T) {
	te := newEngine(t, oneAccountRule)
	var logged logtest.Buffer
	reg := prometheus.NewRegistry()
	l := decisionlog.New(decisionlog.Config{
		Out:        failingWriter{},
		Key:        testKey,
		Logger:     slog.New(slog.NewTextHandler(&logged, nil)),
		Registerer: reg,
		FlushEvery: time.Hour,
	})
	e := decisionlog.Wrap(te.eng, l)
	for round := range 2 {
		for i := range 5 {
			if _, err := e.Check(context.Background(), engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: "192.0.2.1"}); err != nil {
				t.Fatalf("round %d check %d: %v", round, i, err)
			}
		}
		if err := l.Flush(); err == nil {
			t.Fatal("Flush to a failing writer succeeded")
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close with nothing left to write: %v", err)
	}
	if got := l.Dropped(); got != 10 {
		t.Errorf("Dropped() = %d, want 10", got)
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || mfs[0].GetMetric()[0].GetCounter().GetValue() != 10 {
		t.Errorf("guardian_decision_log_dropped_total: %v, %v; want 10", mfs, err)
	}
	if n := strings.Count(logged.String(), "write failed"); n != 1 {
		t.Errorf("the write error was logged %d times, want once:\n%s", n, logged.String())
	}
}

func TestLinesAreWrittenWithoutAFlushAndDroppedAfterClose(t *testing.T) {
	var out logtest.Buffer
	l := decisionlog.New(decisionlog.Config{Out: &out, Key: testKey, FlushEvery: 10 * time.Millisecond})
	l.Check(context.Background(), engine.CheckRequest{Flow: rules.Login, IP: "192.0.2.1"}, engine.Decision{Action: rules.Allow})
	deadline := time.Now().Add(5 * time.Second)
	for !strings.HasSuffix(out.String(), "}\n") {
		if time.Now().After(deadline) {
			t.Fatal("the line was not written within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Report(context.Background(), "some-attempt", engine.Failure)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(events(t, out.String())); got != 1 || l.Dropped() != 1 {
		t.Fatalf("%d lines written, %d dropped; want 1 and 1", got, l.Dropped())
	}
}

// gate blocks writes until it is opened.
type gate struct {
	open chan struct{}
	logtest.Buffer
}

func (g *gate) Write(p []byte) (int, error) {
	<-g.open
	return g.Buffer.Write(p)
}

func TestASlowOutputNeverBlocksChecks(t *testing.T) {
	g := &gate{open: make(chan struct{})}
	l := decisionlog.New(decisionlog.Config{Out: g, Key: testKey, FlushEvery: time.Millisecond})
	const n = 80_000 // well over the 8 MiB that may wait
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			l.Check(context.Background(), engine.CheckRequest{Flow: rules.Login, Account: "alice", IP: "192.0.2.1"}, engine.Decision{Action: rules.Slow})
		}
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("logging blocked behind a stuck output")
	}
	close(g.open)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	written := int64(len(events(t, g.String())))
	if written == 0 || l.Dropped() == 0 || written+int64(l.Dropped()) != n {
		t.Fatalf("%d written + %d dropped, want some of each adding up to %d", written, l.Dropped(), n)
	}
}

func TestConcurrentChecksLogInOrder(t *testing.T) {
	te := newEngine(t, `version: 1
rules:
  - name: ip
    flows: [login]
    key: ip
    type: rate
    limit: 1000
    per: 1s
`)
	var out logtest.Buffer
	l := decisionlog.New(decisionlog.Config{Out: &out, Key: testKey, FlushEvery: time.Millisecond})
	e := decisionlog.Wrap(te.eng, l)
	const workers, each = 20, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				d, err := e.Check(context.Background(), engine.CheckRequest{Flow: rules.Login, IP: "192.0.2.1"})
				if err != nil {
					t.Error(err)
					return
				}
				if d.AttemptID != "" && (w+i)%2 == 0 {
					if _, err := e.Report(context.Background(), d.AttemptID, engine.Success); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	evs := events(t, out.String())
	checks := 0
	seen := map[string]bool{}
	for i, ev := range evs {
		if i > 0 && ev.Time.Before(evs[i-1].Time) {
			t.Fatalf("line %d goes back in time: %v after %v", i+1, ev.Time, evs[i-1].Time)
		}
		switch ev.Kind {
		case event.Check:
			checks++
			seen[ev.ID] = true
		case event.Report:
			if !seen[ev.ID] {
				t.Fatalf("line %d reports %s before its check", i+1, ev.ID)
			}
		}
	}
	if checks != workers*each {
		t.Fatalf("%d checks logged, want %d", checks, workers*each)
	}
}
