//go:build race

package integration

// raceEnabled reports a build with the race detector, under which a TLS
// handshake takes tens of times longer than in guardian's own build.
const raceEnabled = true
