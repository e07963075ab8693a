//go:build !race

package integration

// raceEnabled reports a build with the race detector.
const raceEnabled = false
