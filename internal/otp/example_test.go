package otp_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/otp"
	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/secret"
)

func ExamplePolicy_Recipient() {
	k, _ := secret.New(bytes.Repeat([]byte{1}, secret.MinLen))
	p := otp.New(keys.NewHasher(k), nil)

	a, _ := p.Recipient(rules.OTPSend, "+1 (555) 010-0000")
	b, _ := p.Recipient(rules.OTPSend, "1.555.010.0000")
	fmt.Println(a == b)

	_, err := p.Recipient(rules.OTPSend, "555-0100")
	fmt.Println(errors.Is(err, keys.ErrInvalidRecipient))

	_, err = p.Recipient(rules.OTPSend, "")
	fmt.Println(err)
	none, err := p.Recipient(rules.OTPVerify, "")
	fmt.Printf("%q %v\n", none, err)
	// Output:
	// true
	// true
	// otp: recipient required
	// "" <nil>
}

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
