package otp_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/otp"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
)

func newPolicy(tb testing.TB) (*otp.Policy, *keys.Hasher) {
	tb.Helper()
	k, err := secret.New(bytes.Repeat([]byte{7}, secret.MinLen))
	if err != nil {
		tb.Fatal(err)
	}
	h := keys.NewHasher(k)
	return otp.New(h, nil), h
}

func TestRecipientFormatsShareOneSubject(t *testing.T) {
	p, h := newPolicy(t)
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
			got, err := p.Recipient(flow, tt.in)
			if err != nil {
				t.Fatalf("Recipient(%s, %q): %v", flow, tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Recipient(%s, %q) = %q, want %q", flow, tt.in, got, tt.want)
			}
		}
	}
	other, err := p.Recipient(rules.OTPSend, "+15550100001")
	if err != nil || other == phone {
		t.Fatalf("another number = %q, %v; want a subject of its own", other, err)
	}
}

func TestRecipientRejectsWhatIsNeitherPhoneNorEmail(t *testing.T) {
	p, _ := newPolicy(t)
	for _, in := range []string{
		"12ab",                  // letters in a number
		"555-0100",              // 7 digits: too short for E.164
		"+1234567890123456",     // 16 digits: too long
		"++15550100000",         // two plus signs
		"1555010000+0",          // a plus sign inside
		"alice@",                // no domain
		"@example.com",          // no local part
		"a@b@example.com",       // two @
		"a b@example.com",       // space inside
		"alice@example.com\x00", // control character
		"tel:+15550100000",      // a URI, not a number
		"\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668", // non-ASCII digits
	} {
		for _, flow := range []rules.Flow{rules.OTPSend, rules.OTPVerify, rules.Login} {
			_, err := p.Recipient(flow, in)
			if !errors.Is(err, keys.ErrInvalidRecipient) {
				t.Errorf("Recipient(%s, %q) err = %v, want keys.ErrInvalidRecipient", flow, in, err)
			}
			if err != nil && bytes.Contains([]byte(err.Error()), []byte(in)) {
				t.Errorf("error %q echoes the recipient", err)
			}
		}
	}
}

func TestMissingRecipient(t *testing.T) {
	p, _ := newPolicy(t)
	tests := []struct {
		flow    rules.Flow
		wantErr error
	}{
		{rules.OTPSend, otp.ErrNoRecipient},
		{rules.OTPVerify, nil}, // limited by its IP rules only
		{rules.Login, nil},
		{rules.PasswordReset, nil},
	}
	for _, tt := range tests {
		got, err := p.Recipient(tt.flow, "")
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("Recipient(%s, \"\") err = %v, want %v", tt.flow, err, tt.wantErr)
		}
		if got != "" {
			t.Errorf("Recipient(%s, \"\") = %q, want \"\"", tt.flow, got)
		}
		if got, want := otp.NeedsRecipient(tt.flow), tt.wantErr != nil; got != want {
			t.Errorf("NeedsRecipient(%s) = %v, want %v", tt.flow, got, want)
		}
	}
}

func TestSettles(t *testing.T) {
	tests := []struct {
		flow rules.Flow
		want bool
	}{
		{rules.Login, true},
		{rules.PasswordReset, true},
		{rules.OTPSend, false},
		{rules.OTPVerify, true},
	}
	for _, tt := range tests {
		if got := otp.Settles(tt.flow); got != tt.want {
			t.Errorf("Settles(%s) = %v, want %v", tt.flow, got, tt.want)
		}
	}
}
