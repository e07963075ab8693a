// Package testclock is a settable clock for tests: stores, engines and
// anything else that takes a now func() time.Time read it, and the test
// moves it between fixed instants.
package testclock

import (
	"sync"
	"time"
)

// Clock is a settable clock: its Now method is the clock of the code under
// test, and only Advance and Set move it. It is safe for concurrent
// use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a Clock reading t.
func New(t time.Time) *Clock {
	return &Clock{t: t}
}

// Now returns the clock's current instant.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
