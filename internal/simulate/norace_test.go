//go:build !race

package simulate_test

// raceEnabled reports a build with the race detector.
const raceEnabled = false
