package keys_test

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/guardian-sec/guardian/internal/keys"
	"github.com/guardian-sec/guardian/internal/secret"
)

func ExampleAccount() {
	for _, in := range []string{"  ALICE@Example.com ", "ａｌｉｃｅ@example.com", "Straße"} {
		a, err := keys.Account(in)
		fmt.Printf("%q %v\n", a, err)
	}
	// Output:
	// "alice@example.com" <nil>
	// "alice@example.com" <nil>
	// "strasse" <nil>
}

func ExampleRecipient() {
	for _, in := range []string{"+1 (555) 010-0000", "1.555.010.0000", "Bob@Example.ORG", "555-0100"} {
		r, err := keys.Recipient(in)
		fmt.Printf("%q %v\n", r, err)
	}
	// Output:
	// "+15550100000" <nil>
	// "+15550100000" <nil>
	// "bob@example.org" <nil>
	// "" keys: invalid recipient: not a phone number (8 to 15 digits) or an e-mail address
}

func ExampleIP() {
	a, err := keys.IP("::ffff:203.0.113.7")
	fmt.Println(a, err)
	_, err = keys.IP("300.1.1.1")
	fmt.Println(errors.Is(err, keys.ErrInvalidIP), err)
	// Output:
	// 203.0.113.7 <nil>
	// true keys: invalid ip: "300.1.1.1" is not an IP address
}

func ExamplePrefix() {
	a, _ := keys.IP("2001:db8:aa:bb:1:2:3:4")
	fmt.Println(keys.Prefix(a, 32, 64))
	// Output:
	// 2001:db8:aa:bb::/64
}

func ExampleStoreKey() {
	k, _ := secret.New(bytes.Repeat([]byte{1}, secret.MinLen))
	h := keys.NewHasher(k)
	account, _ := keys.Account("ALICE@example.com")
	subject := h.Subject("account", account)
	key := keys.StoreKey(subject, "login-account")
	fmt.Println(len(subject), key == "guardian:v3:{"+subject+"}:login-account")
	// Output:
	// 22 true
}
