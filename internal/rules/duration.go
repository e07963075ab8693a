package rules

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// day is the rules file's "d" unit.
const day = 24 * time.Hour

// MaxDuration is the longest duration a rules file may state. Keeping every
// duration, and a rate rule's tolerance, under it means the store's
// microsecond arithmetic cannot overflow.
const MaxDuration = 366 * day

// units are the rules file's duration units, largest first.
var units = []struct {
	name string
	d    time.Duration
}{
	{"d", day},
	{"h", time.Hour},
	{"m", time.Minute},
	{"s", time.Second},
	{"ms", time.Millisecond},
}

// unitNames lists the units for error messages.
const unitNames = "ms, s, m, h or d"

// parseDuration parses a duration in the rules-file syntax: one or more
// whole numbers, each followed by a unit ms, s, m, h or d (24h), as in "90s",
// "1h30m" or "90d". The result is between 0 and MaxDuration; "0s" is valid,
// negative durations and fractions are not. It returns the reason s is
// invalid, or "".
func parseDuration(s string) (time.Duration, string) {
	if s == "" {
		return 0, "empty, want a number and a unit, like 1m"
	}
	if s[0] == '-' {
		return 0, "must not be negative"
	}
	var total time.Duration
	for rest := s; rest != ""; {
		i := 0
		for i < len(rest) && isDigit(rest[i]) {
			i++
		}
		if i == 0 {
			return 0, fmt.Sprintf("want a number at %q", rest)
		}
		digits := rest[:i]
		rest = rest[i:]
		j := 0
		for j < len(rest) && !isDigit(rest[j]) {
			j++
		}
		name := rest[:j]
		rest = rest[j:]
		if name == "" {
			return 0, fmt.Sprintf("missing unit after %s (want %s)", digits, unitNames)
		}
		if name[0] == '.' {
			return 0, "want whole numbers, like 1h30m rather than 1.5h"
		}
		unit, ok := unitNamed(name)
		if !ok {
			return 0, fmt.Sprintf("unknown unit %q (want %s)", name, unitNames)
		}
		n, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || n > int64((MaxDuration-total)/unit) {
			return 0, "above the 366d maximum"
		}
		total += time.Duration(n) * unit
	}
	return total, ""
}

// unitNamed returns the length of the unit called name.
func unitNamed(name string) (time.Duration, bool) {
	for _, u := range units {
		if u.name == name {
			return u.d, true
		}
	}
	return 0, false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// FormatDuration renders d in the rules-file syntax as the largest exact
// combination of units: 90 days is "90d", 90 seconds "1m30s", 1500
// milliseconds "1s500ms", zero "0s". The file's smallest unit is the
// millisecond, so any remainder below one is dropped. For d between 0 and
// MaxDuration, the rules file reads the result back as d truncated to the
// millisecond. A negative d gets a leading "-", which the rules file refuses.
func FormatDuration(d time.Duration) string {
	mag := uint64(d)
	if d < 0 {
		mag = -mag
	}
	mag -= mag % uint64(time.Millisecond)
	if mag == 0 {
		return "0s"
	}
	var b strings.Builder
	if d < 0 {
		b.WriteByte('-')
	}
	for _, u := range units {
		if q := mag / uint64(u.d); q > 0 {
			b.WriteString(strconv.FormatUint(q, 10))
			b.WriteString(u.name)
			mag -= q * uint64(u.d)
		}
	}
	return b.String()
}
