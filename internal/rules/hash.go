package rules

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// hashLen is the length of a rules hash in hex digits: 64 bits, so that two
// different definitions in one fleet share a hash with a chance of about
// one in 10^19.
const hashLen = 16

// Hash identifies the rule's definition: the first 16 hex digits of the
// SHA-256 of its canonical form, the JSON GET /v1/rules shows (the fields of
// its type and key, defaults applied, durations in the rules-file syntax).
// Two rules have the same Hash exactly when they decide alike: a rule moved
// to another line, or written with a default spelled out, keeps its Hash;
// any change of name, flows, numbers, mode or action gives another.
func (r *Rule) Hash() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic("rules: a rule does not encode: " + err.Error()) // MarshalJSON never fails
	}
	return digest(b)
}

// Hash identifies the set's definition, as Rule.Hash does one rule's: the
// first 16 hex digits of the SHA-256 of the canonical form of every rule, in
// file order, and of familiar_networks when the set learns networks (a set
// without them hashes as its rules alone). Instances running the same rules report the same Hash, whatever
// the file's layout, comments or source path; it is what GET /v1/fleet and
// guardian_rules_info compare.
func (s *Set) Hash() string {
	if s.hash == "" {
		return setHash(s.Rules, s.Familiar)
	}
	return s.hash
}

// setHash is the Hash of a set of rules learning networks as fam says.
func setHash(rs []Rule, fam FamiliarNetworks) string {
	if rs == nil {
		rs = []Rule{}
	}
	var v any = rs
	if fam.On() {
		v = struct {
			Rules    []Rule `json:"rules"`
			Familiar [3]any `json:"familiar_networks"`
		}{rs, [3]any{fam.IPv4Prefix, fam.IPv6Prefix, FormatDuration(fam.Hold)}}
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic("rules: a rule set does not encode: " + err.Error()) // MarshalJSON never fails
	}
	return digest(b)
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:hashLen/2])
}
