package shadow_test

import (
	"fmt"

	"github.com/guardian-sec/guardian/internal/rules"
	"github.com/guardian-sec/guardian/internal/shadow"
)

func ExampleBook() {
	book := shadow.NewBook()
	// After loading rules, name the shadow rules.
	book.Sync([]string{"login-ip-strict"})

	// Each check the rule is evaluated on records what it would have done.
	book.Record("login-ip-strict", "", "3b1f")
	book.Record("login-ip-strict", rules.Slow, "9c2e")
	book.Record("login-ip-strict", rules.Slow, "9c2e")

	for _, r := range book.Report() {
		fmt.Println(r.Rule, r.Evaluated, r.WouldSlow, r.TopKeys)
	}
	// Output:
	// login-ip-strict 3 2 [{9c2e 2}]
}

func ExampleTopK() {
	top := shadow.NewTopK(2)
	for _, k := range []string{"a", "b", "a", "c", "a"} {
		top.Add(k)
	}
	// c took over b's counter, so its count may be over by b's count (1).
	fmt.Println(top.Top(2))
	// Output:
	// [{a 3} {c 2}]
}
