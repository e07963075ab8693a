//go:build race

package simulate_test

// raceEnabled reports a build with the race detector, under which a check
// takes ten times longer: the tests run smaller attacks.
const raceEnabled = true
