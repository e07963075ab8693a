package engine_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
)

// ruleKeyed returns a rule of the built-in set keyed by k.
func ruleKeyed(tb testing.TB, k rules.Key) *rules.Rule {
	tb.Helper()
	for i := range rules.Default().Rules {
		if r := &rules.Default().Rules[i]; r.Key == k {
			return r
		}
	}
	tb.Fatalf("no built-in rule keyed by %s", k)
	return nil
}

func mustNormalise(tb testing.TB, req engine.CheckRequest) engine.Identifiers {
	tb.Helper()
	ids, err := req.Normalise(nil)
	if err != nil {
		tb.Fatalf("Normalise(%+v): %v", req, err)
	}
	return ids
}

func TestRecipientFormatsShareOneSubject(t *testing.T) {
	k, err := secret.New(bytes.Repeat([]byte{7}, secret.MinLen))
	if err != nil {
		t.Fatal(err)
	}
	h := keys.NewHasher(k)
	r := ruleKeyed(t, rules.KeyRecipient)
	phone := h.Subject("recipient", "+15550100000")
	mail := h.Subject("recipient", "bob@example.org")
	tests := []struct {
		in   string
		want string
	}{
		{"+15550100000", phone},
		{"+1 (555) 010-0000", phone},
		{"1.555.010.0000", phone},
		{"1-555-010-0000", phone},
		{" +1 555 0100 000 ", phone},
		{"(1) 5550100000", phone},
		{"bob@example.org", mail},
		{"Bob@Example.ORG", mail},
		{"  BOB@EXAMPLE.ORG\t", mail},
	}
	for _, flow := range []rules.Flow{rules.OTPSend, rules.OTPVerify} {
		for _, tt := range tests {
			ids := mustNormalise(t, engine.CheckRequest{Flow: flow, IP: "192.0.2.1", Recipient: tt.in})
			if got := h.KeySubject(ids.Key(r)); got != tt.want {
				t.Errorf("%s, %q: subject %q, want %q", flow, tt.in, got, tt.want)
			}
		}
	}
	other := mustNormalise(t, engine.CheckRequest{Flow: rules.OTPSend, IP: "192.0.2.1", Recipient: "+15550100001"})
	if h.KeySubject(other.Key(r)) == phone {
		t.Fatal("another number shares a subject")
	}
}

func TestValidateRefusesWhatGuardianAnswers400(t *testing.T) {
	const ip = "192.0.2.1"
	tests := []struct {
		name string
		req  engine.CheckRequest
		want error
	}{
		{"unknown flow", engine.CheckRequest{Flow: "signup", IP: ip}, rules.ErrUnknownFlow},
		{"cost too high", engine.CheckRequest{Flow: rules.Login, IP: ip, Cost: rules.MaxCost + 1}, engine.ErrInvalidField},
		{"negative cost", engine.CheckRequest{Flow: rules.Login, IP: ip, Cost: -1}, engine.ErrInvalidField},
		{"no ip", engine.CheckRequest{Flow: rules.Login}, keys.ErrInvalidIP},
		{"otp_send without recipient", engine.CheckRequest{Flow: rules.OTPSend, IP: ip}, engine.ErrMissingField},
		{"blank account", engine.CheckRequest{Flow: rules.Login, IP: ip, Account: "   "}, keys.ErrInvalidAccount},
		{"control character", engine.CheckRequest{Flow: rules.Login, IP: ip, Account: "a\x00b"}, keys.ErrInvalidAccount},
		{"long account", engine.CheckRequest{Flow: rules.Login, IP: ip, Account: strings.Repeat("x", 300)}, keys.ErrInvalidAccount},
	}
	for _, tt := range tests {
		if err := tt.req.Validate(nil); !errors.Is(err, tt.want) {
			t.Errorf("%s: Validate = %v, want %v", tt.name, err, tt.want)
		}
	}
	for _, in := range []string{
		"12ab",                  // letters in a number
		"555-0100",              // 7 digits: too short for E.164
		"+1234567890123456",     // 16 digits: too long
		"++15550100000",         // two plus signs
		"1555010000+0",          // a plus sign inside
		"alice@",                // no domain
		"@example.com",          // no local part
		"a b@example.com",       // space inside
		"alice@example.com\x00", // control character
		"tel:+15550100000",      // a URI, not a number
	} {
		for _, flow := range rules.Flows {
			err := (&engine.CheckRequest{Flow: flow, IP: ip, Recipient: in}).Validate(nil)
			if !errors.Is(err, keys.ErrInvalidRecipient) {
				t.Errorf("%s, recipient %q: Validate = %v, want keys.ErrInvalidRecipient", flow, in, err)
			}
			if err != nil && strings.Contains(err.Error(), in) {
				t.Errorf("error %q echoes the recipient", err)
			}
		}
	}
	for _, req := range []engine.CheckRequest{
		{Flow: rules.Login, IP: ip},
		{Flow: rules.PasswordReset, IP: ip, Cost: rules.MaxCost},
		{Flow: rules.OTPVerify, IP: ip}, // limited by its IP rules only
		{Flow: rules.OTPSend, IP: ip, Recipient: "+15550100000"},
	} {
		if err := req.Validate(nil); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", req, err)
		}
	}
}

func TestKeys(t *testing.T) {
	check := func(account, ip string) engine.Identifiers {
		return mustNormalise(t, engine.CheckRequest{Flow: rules.Login, Account: account, IP: ip})
	}
	pair := &rules.Rule{Key: rules.KeyAccountIP}
	base := check("alice", "2001:db8:1:2::1")
	tests := []struct {
		name     string
		ids      engine.Identifiers
		wantSame bool
	}{
		{"same /64, other spelling", check("ALICE ", "2001:db8:1:2:ffff:ffff:ffff:ffff"), true},
		{"another /64", check("alice", "2001:db8:1:3::1"), false},
		{"another account", check("bob", "2001:db8:1:2::1"), false},
	}
	for _, tt := range tests {
		if got := tt.ids.Key(pair) == base.Key(pair); got != tt.wantSame {
			t.Errorf("%s: same pair = %v, want %v", tt.name, got, tt.wantSame)
		}
	}
	v4 := check("alice", "192.0.2.1")
	next, mapped := check("alice", "192.0.2.2"), check("alice", "::ffff:192.0.2.1")
	if v4.Key(pair) == next.Key(pair) {
		t.Error("two IPv4 addresses share a pair: IPv4 counts per address")
	}
	if v4.Key(pair) != mapped.Key(pair) {
		t.Error("an IPv4-mapped address is another pair")
	}
	if got, want := v4.Key(pair).String(), "alice 192.0.2.1/32"; got != want {
		t.Errorf("pair key = %q, want %q", got, want)
	}
	ipRule := ruleKeyed(t, rules.KeyIP)
	if got, want := v4.Key(ipRule).String(), "192.0.2.0/24"; ipRule.IPv4Prefix == 24 && got != want {
		t.Errorf("ip key = %q, want %q", got, want)
	}
	none := check("", "192.0.2.1")
	for _, k := range []rules.Key{rules.KeyAccount, rules.KeyAccountIP, rules.KeyRecipient} {
		if key := none.Key(&rules.Rule{Key: k}); !key.IsZero() {
			t.Errorf("key %s of a check without its fields = %+v, want the zero Key", k, key)
		}
	}
	if got := none.Key(&rules.Rule{Key: rules.KeyGlobal}).String(); got != "global" {
		t.Errorf("global key = %q, want \"global\"", got)
	}
}
