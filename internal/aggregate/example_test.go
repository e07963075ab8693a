package aggregate_test

import (
	"fmt"
	"time"

	"github.com/guardian-sec/guardian/internal/aggregate"
)

func ExampleAggregate_InForce() {
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	a := aggregate.New(aggregate.Config{Now: func() time.Time { return now }})
	flows := []string{"login"}

	// A global login rule: challenge when more than 3 failures a minute,
	// held for 30s after the rate falls back.
	a.Add("login", 3)
	fmt.Println(a.InForce("login-global", flows, time.Minute, 3, 30*time.Second))
	a.Add("login", 1)
	fmt.Println(a.InForce("login-global", flows, time.Minute, 3, 30*time.Second))

	now = now.Add(time.Minute) // every failure has left the window
	fmt.Println(a.InForce("login-global", flows, time.Minute, 3, 30*time.Second))
	now = now.Add(30 * time.Second)
	fmt.Println(a.InForce("login-global", flows, time.Minute, 3, 30*time.Second))
	// Output:
	// false 3
	// true 4
	// true 0
	// false 0
}
