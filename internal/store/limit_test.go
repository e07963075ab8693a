package store

import (
	"testing"
	"time"
)

// TestDividedKeepsTheTime: dividing a limit among a fleet's deciders
// divides what it counts, never how long it keeps what it counted.
func TestDividedKeepsTheTime(t *testing.T) {
	for _, c := range []struct {
		l, want Limit
	}{
		{Distinct{Step: time.Hour, Max: 10, Hold: 20 * time.Minute}, Distinct{Step: time.Hour, Max: 3, Hold: 20 * time.Minute}},
		{Distinct{Step: time.Hour, Max: 2, Hold: 20 * time.Minute}, Distinct{Step: time.Hour, Max: 1, Hold: 20 * time.Minute}},
		{Counter{Max: 10, Hold: time.Hour}, Counter{Max: 3, Hold: time.Hour}},
	} {
		if got := c.l.Divided(3); got != c.want {
			t.Errorf("%+v divided among 3: %+v, want %+v", c.l, got, c.want)
		}
	}
}
