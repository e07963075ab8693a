package rules

import (
	"errors"
	"testing"
	"time"
)

// parseDurationErr is parseDuration with its reason as an error.
func parseDurationErr(s string) (time.Duration, error) {
	d, why := parseDuration(s)
	if why != "" {
		return d, errors.New(why)
	}
	return d, nil
}

func TestParseDuration(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"0s", 0},
		{"0ms", 0},
		{"1ms", time.Millisecond},
		{"1500ms", 1500 * time.Millisecond},
		{"90s", 90 * time.Second},
		{"10m", 10 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"1d", day},
		{"90d", 90 * day},
		{"1d2h3m4s5ms", day + 2*time.Hour + 3*time.Minute + 4*time.Second + 5*time.Millisecond},
		{"30m1h", 90 * time.Minute},
		{"007s", 7 * time.Second},
		{"366d", 366 * day},
		{"365d24h", 366 * day},
		{"31622400000ms", 366 * day},
	}
	for _, tt := range tests {
		got, err := parseDurationErr(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestParseDurationErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"", `empty, want a number and a unit, like 1m`},
		{"60", `missing unit after 60 (want ms, s, m, h or d)`},
		{"1m30", `missing unit after 30 (want ms, s, m, h or d)`},
		{"1w", `unknown unit "w" (want ms, s, m, h or d)`},
		{"5us", `unknown unit "us" (want ms, s, m, h or d)`},
		{"1 m", `unknown unit " m" (want ms, s, m, h or d)`},
		{"1.5h", `want whole numbers, like 1h30m rather than 1.5h`},
		{"-1m", `must not be negative`},
		{"+1m", `want a number at "+1m"`},
		{"m", `want a number at "m"`},
		{"366d1ms", `above the 366d maximum`},
		{"367d", `above the 366d maximum`},
		{"200d200d", `above the 366d maximum`},
		{"99999999999999999999ms", `above the 366d maximum`},
	}
	for _, tt := range tests {
		got, why := parseDuration(tt.in)
		if why != tt.want {
			t.Errorf("parseDuration(%q) = %v, %q; want the reason %q", tt.in, got, why, tt.want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{time.Millisecond, "1ms"},
		{1500 * time.Millisecond, "1s500ms"},
		{90 * time.Second, "1m30s"},
		{10 * time.Minute, "10m"},
		{90 * time.Minute, "1h30m"},
		{25 * time.Hour, "1d1h"},
		{90 * day, "90d"},
		{366 * day, "366d"},
		{day + time.Millisecond, "1d1ms"},
		{time.Second + 999*time.Microsecond, "1s"},
		{999 * time.Microsecond, "0s"},
		{-90 * time.Second, "-1m30s"},
		{-time.Microsecond, "0s"},
		{time.Duration(-1 << 63), "-106751d23h47m16s854ms"},
		{time.Duration(1<<63 - 1), "106751d23h47m16s854ms"},
	}
	for _, tt := range tests {
		if got := FormatDuration(tt.in); got != tt.want {
			t.Errorf("FormatDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDurationRoundTrip(t *testing.T) {
	const day = 24 * time.Hour
	for _, d := range []time.Duration{
		0, time.Millisecond, 999 * time.Millisecond, time.Second, 61 * time.Second, time.Hour - time.Millisecond,
		23*time.Hour + 59*time.Minute, day, 90 * day, 366*day - time.Millisecond, 366 * day,
	} {
		s := FormatDuration(d)
		got, err := parseDurationErr(s)
		if err != nil || got != d {
			t.Errorf("parseDuration(FormatDuration(%v) = %q) = %v, %v; want %v, nil", d, s, got, err, d)
		}
	}
}

// FuzzDuration checks that whatever parseDuration accepts lies in
// [0, MaxDuration] on a whole millisecond, and that FormatDuration renders it
// back to a string that parses to the same duration.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{"0s", "1ms", "90s", "1h30m", "90d", "366d", "30m1h", "1d2h3m4s5ms", "1.5h", "-1m", "60", "367d", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, why := parseDuration(s)
		if why != "" {
			return
		}
		if d < 0 || d > MaxDuration || d%time.Millisecond != 0 {
			t.Fatalf("parseDuration(%q) = %v, outside [0, 366d] or not whole milliseconds", s, d)
		}
		out := FormatDuration(d)
		back, err := parseDurationErr(out)
		if err != nil || back != d {
			t.Fatalf("parseDuration(FormatDuration(%v) = %q) = %v, %v; want %v", d, out, back, err, d)
		}
	})
}

// FuzzFormatDuration checks that every duration from 0 to MaxDuration
// survives FormatDuration then parseDuration, truncated to the millisecond.
func FuzzFormatDuration(f *testing.F) {
	for _, n := range []int64{0, 1, int64(time.Millisecond), int64(90 * time.Second), int64(MaxDuration), -1, 1<<63 - 1} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := time.Duration(n)
		if d < 0 {
			d = -(d + 1)
		}
		d %= MaxDuration + 1
		s := FormatDuration(d)
		got, err := parseDurationErr(s)
		if want := d.Truncate(time.Millisecond); err != nil || got != want {
			t.Fatalf("parseDuration(FormatDuration(%v) = %q) = %v, %v; want %v", d, s, got, err, want)
		}
	})
}
