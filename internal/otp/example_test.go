package otp_test

import (
	"fmt"

	"github.com/guardian-sec/guardian/internal/otp"
	"github.com/guardian-sec/guardian/internal/rules"
)

func ExampleSettles() {
	for _, f := range rules.Flows {
		fmt.Println(f, otp.Settles(f))
	}
	// Output:
	// login true
	// password_reset true
	// otp_send false
	// otp_verify true
}

func ExampleNeedsRecipient() {
	for _, f := range rules.Flows {
		fmt.Println(f, otp.NeedsRecipient(f))
	}
	// Output:
	// login false
	// password_reset false
	// otp_send true
	// otp_verify false
}
