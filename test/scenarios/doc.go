// Package scenarios holds guardian's attack scenarios: end-to-end tests that
// start a real guardian in-process, on a loopback port with the embedded
// store and an injected clock, and play an attacker and the real user
// against it through HTTP. Each scenario names the attack, the rules that
// stop it, and asserts the exact numbers the contract promises. The package
// has no code of its own; the scenarios are its tests.
package scenarios
