package scenarios_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// phoneFormats are one number, +15550100000, written the ways users and
// attackers write it.
var phoneFormats = []string{
	"+15550100000",
	"+1 (555) 010-0000",
	"1.555.010.0000",
	"1-555-010-0000",
	"+1 555 010 0000",
	"(1) 555-010-0000",
	" 15550100000 ",
}

// rotatingIP is the i-th of many client addresses, IPv4 and IPv6 in turn.
func rotatingIP(i int) string {
	if i%2 == 0 {
		return fmt.Sprintf("10.2.%d.%d", i/256%256, i%256)
	}
	return fmt.Sprintf("2001:db8:%x::1", i)
}

// SMS bombing: 50 send requests for one number, in every format, from
// rotating addresses. otp-send-recipient lets 3 through per 15 minutes:
// GCRA with T = 5 minutes and a burst of 3.
func TestSMSBombing(t *testing.T) {
	g := start(t, "")
	bomb := func(at string) (allowed int) {
		t.Helper()
		for i := range 50 {
			d := g.check(t, attempt{Flow: "otp_send", Recipient: phoneFormats[i%len(phoneFormats)], IP: rotatingIP(i)})
			switch {
			case d.Decision == "allow":
				allowed++
			case d.Decision != "slow" || d.Rule != "otp-send-recipient" || d.RetryAfterMS != 5*minuteMS:
				t.Fatalf("%s, request %d: %v, want allow or slow by otp-send-recipient for 5 minutes", at, i, d)
			}
		}
		return allowed
	}
	if got := bomb("at once"); got != 3 {
		t.Fatalf("50 sends at once: %d allowed, want 3", got)
	}
	g.clock.Advance(15 * time.Minute)
	if got := bomb("15 minutes later"); got != 3 {
		t.Fatalf("50 sends 15 minutes later: %d allowed, want 3", got)
	}
}

// SMS bombing over a day: one send request a minute for 24 hours gets the
// burst of 3, then one every 5 minutes: 3 + 1440/5 = 291 codes, never more.
func TestSMSBombingForADay(t *testing.T) {
	g := start(t, "")
	var allowedAt []int
	for m := 0; m <= 24*60; m++ {
		d := g.check(t, attempt{Flow: "otp_send", Recipient: phoneFormats[m%len(phoneFormats)], IP: rotatingIP(m)})
		if d.Decision == "allow" {
			allowedAt = append(allowedAt, m)
		}
		g.clock.Advance(time.Minute)
	}
	if got, want := len(allowedAt), 3+24*60/5; got != want {
		t.Fatalf("a day of one request a minute: %d codes sent, want %d", got, want)
	}
	// The burst at minutes 0, 1 and 2, then minutes 5, 10, 15, ...
	for i, m := range allowedAt {
		want := i
		if i >= 3 {
			want = 5 * (i - 2)
		}
		if m != want {
			t.Fatalf("code %d sent at minute %d, want minute %d", i+1, m, want)
		}
	}
}

// SMS budget burning from one source: many numbers, one prefix. A key: ip
// rule on otp_send (not among the built-in rules) stops it whatever the
// numbers.
func TestSMSBudgetBurningFromOnePrefix(t *testing.T) {
	g := start(t, builtinRules(t)+`
  - name: otp-send-ip
    flows: [otp_send]
    key: ip
    type: rate
    limit: 10
    per: 1h
    burst: 10
`)
	allowed := 0
	for i := range 100 {
		d := g.check(t, attempt{Flow: "otp_send", Recipient: fmt.Sprintf("+4420790%05d", i), IP: fmt.Sprintf("2001:db8:9:9:%x::1", i)})
		switch {
		case d.Decision == "allow":
			allowed++
		case d.Decision != "slow" || d.Rule != "otp-send-ip" || d.RetryAfterMS != 6*minuteMS || d.remaining(t, "otp-send-recipient") != 3:
			t.Fatalf("number %d: %v, want slow by otp-send-ip for 6 minutes, the number untouched", i, d)
		}
	}
	if allowed != 10 {
		t.Fatalf("100 numbers from one /64: %d codes sent, want 10", allowed)
	}
	if d := g.check(t, attempt{Flow: "otp_send", Recipient: "+442079000000", IP: "2001:db8:9:a::1"}); d.Decision != "allow" {
		t.Fatalf("from another /64: %v, want allow", d)
	}
}

// OTP guessing: wrong codes for one recipient are limited to 5 back to back,
// then one every 3 minutes, and asking for a new code does not reset that
// count (NIST SP 800-63B rev. 4).
func TestOTPGuessing(t *testing.T) {
	g := start(t, "")
	send := attempt{Flow: "otp_send", Account: "bob", Recipient: "bob@example.org", IP: "198.51.100.7"}
	newCode := func() {
		t.Helper()
		d := g.check(t, send)
		if d.Decision != "allow" {
			t.Fatalf("send: %v, want allow", d)
		}
		if tok := g.report(t, d, "success"); tok != "" {
			t.Fatal("a sent code earned a device token")
		}
	}
	guesses := 0
	guess := func() decision {
		t.Helper()
		guesses++
		return g.fail(t, attempt{Flow: "otp_verify", Recipient: " Bob@Example.ORG", IP: rotatingIP(guesses)})
	}

	newCode()
	for i := range 3 {
		if d := guess(); d.Decision != "allow" || d.remaining(t, "otp-verify-recipient") != int64(4-i) {
			t.Fatalf("wrong code %d: %v, want allow", i+1, d)
		}
	}
	newCode()
	for i := 3; i < 5; i++ {
		if d := guess(); d.Decision != "allow" || d.remaining(t, "otp-verify-recipient") != int64(4-i) {
			t.Fatalf("wrong code %d after a new code: %v, want allow with %d left", i+1, d, 4-i)
		}
	}
	slowed := func(when string) {
		t.Helper()
		d := guess()
		if d.status != http.StatusTooManyRequests || d.Decision != "slow" || d.Rule != "otp-verify-recipient" || d.RetryAfterMS != 3*minuteMS {
			t.Fatalf("%s: %v, want slow by otp-verify-recipient for 3 minutes", when, d)
		}
	}
	slowed("sixth guess")
	newCode()
	slowed("after a third new code")

	g.clock.Advance(3 * time.Minute)
	if d := guess(); d.Decision != "allow" || d.remaining(t, "otp-verify-recipient") != 0 {
		t.Fatalf("3 minutes later: %v, want one more guess", d)
	}
	slowed("right after it")

	// The right code: its success gives back its own unit, not a burst.
	g.clock.Advance(3 * time.Minute)
	d := g.check(t, attempt{Flow: "otp_verify", Recipient: "bob@example.org", IP: "198.51.100.7"})
	if d.Decision != "allow" {
		t.Fatalf("the right code: %v, want allow", d)
	}
	g.report(t, d, "success")
	if d := guess(); d.Decision != "allow" || d.remaining(t, "otp-verify-recipient") != 0 {
		t.Fatalf("after the right code: %v, want allow with nothing left", d)
	}
	slowed("after the right code and one more guess")
}

// A verify check without a recipient is limited by its IP rules alone; with
// the built-in rules, by none. An auth service must send the recipient.
func TestVerifyWithoutRecipientIsLimitedByIPRulesOnly(t *testing.T) {
	g := start(t, builtinRules(t)+`
  - name: otp-verify-ip
    flows: [otp_verify]
    key: ip
    type: rate
    count: failures
    limit: 20
    per: 1h
    burst: 20
`)
	d := g.check(t, attempt{Flow: "otp_verify", IP: "198.51.100.7"})
	if d.Decision != "allow" || len(d.Limits) != 1 || d.Limits[0].Rule != "otp-verify-ip" {
		t.Fatalf("verify without recipient: %v, want allow limited by otp-verify-ip alone", d)
	}
}

// Recipients that are neither a phone number nor an e-mail address get a
// clear 400 and spend nothing; an otp_send without a recipient is a missing
// field.
func TestRecipientErrors(t *testing.T) {
	g := start(t, "")
	tests := []struct {
		recipient string
		message   string
	}{
		{"12ab", "recipient: not a phone number (8 to 15 digits) or an e-mail address"},
		{"555-0100", "recipient: not a phone number (8 to 15 digits) or an e-mail address"},
		{"+1234567890123456", "recipient: not a phone number (8 to 15 digits) or an e-mail address"},
		{"tel:+15550100000", "recipient: not a phone number (8 to 15 digits) or an e-mail address"},
		{"alice@", "recipient: e-mail address must be local@domain, without spaces or control characters"},
		{"a b@example.com", "recipient: e-mail address must be local@domain, without spaces or control characters"},
		{"a@b@example.com", "recipient: e-mail address must be local@domain, without spaces or control characters"},
		{strings.Repeat("a", 250) + "@example.com", "recipient: e-mail address longer than 254 bytes"},
	}
	for _, flow := range []string{"otp_send", "otp_verify"} {
		for _, tt := range tests {
			code, e := g.checkError(t, attempt{Flow: flow, Recipient: tt.recipient, IP: "192.0.2.1"})
			if code != http.StatusBadRequest || e.Error.Code != "invalid_recipient" || e.Error.Message != tt.message {
				t.Errorf("%s %q: %d %+v, want 400 invalid_recipient %q", flow, tt.recipient, code, e.Error, tt.message)
			}
		}
	}
	code, e := g.checkError(t, attempt{Flow: "otp_send", IP: "192.0.2.1"})
	if code != http.StatusBadRequest || e.Error.Code != "missing_field" || e.Error.Message != "recipient: required for flow otp_send" {
		t.Errorf("otp_send without recipient: %d %+v, want 400 missing_field", code, e.Error)
	}
	// A bad format of a good number was refused, not counted.
	d := g.check(t, attempt{Flow: "otp_send", Recipient: "+1 555 010 0000", IP: "192.0.2.1"})
	if d.Decision != "allow" || d.remaining(t, "otp-send-recipient") != 2 {
		t.Fatalf("first good send: %v, want allow with 2 left", d)
	}
}
