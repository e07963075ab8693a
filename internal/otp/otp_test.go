package otp_test

import (
	"testing"

	"github.com/guardian-sec/guardian/internal/otp"
	"github.com/guardian-sec/guardian/internal/rules"
)

func TestNeedsRecipient(t *testing.T) {
	for _, f := range rules.Flows {
		if got, want := otp.NeedsRecipient(f), f == rules.OTPSend; got != want {
			t.Errorf("NeedsRecipient(%s) = %v, want %v", f, got, want)
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
