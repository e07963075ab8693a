package main

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
)

// kind is who sends an attempt.
type kind uint8

const (
	// legit is a distinct legitimate user: a login that succeeds.
	legit kind = iota
	// attacker is a guess against one of a few accounts, from one of a few
	// IP prefixes: a login that fails.
	attacker
	// otpSend is a one-time code sent to a distinct phone number.
	otpSend
)

// String names k as the summaries do.
func (k kind) String() string {
	switch k {
	case legit:
		return "legit"
	case attacker:
		return "attacker"
	}
	return "otp_send"
}

// outcome is what the auth service reports after the check: legitimate users
// and code sends succeed, attackers fail.
func (k kind) outcome() []byte {
	if k == attacker {
		return []byte("failure")
	}
	return []byte("success")
}

// mix describes the traffic: of all attempts a share OTPShare are code
// sends; of the logins a share AttackShare come from attackers, who take
// turns over AttackAccounts accounts from AttackPrefixes IPv4 /24 prefixes.
// Every legitimate user and every phone number is new. A mix is safe for
// concurrent use.
type mix struct {
	AttackShare    float64
	OTPShare       float64
	AttackAccounts int
	AttackPrefixes int
	// Tag makes this run's identities differ from any earlier run's against
	// the same Redis.
	Tag string

	users atomic.Uint64
}

// next appends the body of the next attempt's check to b and says whose
// attempt it is.
func (m *mix) next(rng *rand.Rand, b []byte) (kind, []byte) {
	k := legit
	switch r := rng.Float64(); {
	case r < m.OTPShare:
		k = otpSend
	case rng.Float64() < m.AttackShare:
		k = attacker
	}
	return k, m.body(k, rng, b)
}

// body appends a check body of kind k.
func (m *mix) body(k kind, rng *rand.Rand, b []byte) []byte {
	switch k {
	case attacker:
		b = append(b, `{"flow":"login","account":"victim-`...)
		b = strconv.AppendInt(b, int64(rng.IntN(m.AttackAccounts)), 10)
		b = append(b, '-')
		b = append(b, m.Tag...)
		b = append(b, `@example.com","ip":"198.18.`...)
		b = strconv.AppendInt(b, int64(rng.IntN(m.AttackPrefixes)), 10)
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(1+rng.IntN(254)), 10)
		return append(b, `"}`...)
	case otpSend:
		n := m.users.Add(1)
		b = append(b, `{"flow":"otp_send","recipient":"+4479`...)
		b = appendDigits(b, n, 8)
		b = append(b, `","ip":"`...)
		b = appendIP(b, rng)
		return append(b, `"}`...)
	}
	n := m.users.Add(1)
	b = append(b, `{"flow":"login","account":"user-`...)
	b = strconv.AppendUint(b, n, 10)
	b = append(b, '-')
	b = append(b, m.Tag...)
	b = append(b, `@example.com","ip":"`...)
	b = appendIP(b, rng)
	return append(b, `"}`...)
}

// appendDigits appends the last n decimal digits of v, zero-padded.
func appendDigits(b []byte, v uint64, n int) []byte {
	start := len(b)
	for range n {
		b = append(b, byte('0'+v%10))
		v /= 10
	}
	d := b[start:]
	for i, j := 0, len(d)-1; i < j; i, j = i+1, j-1 {
		d[i], d[j] = d[j], d[i]
	}
	return b
}

// appendIP appends a random address in 10.0.0.0/8, where legitimate users
// come from: about sixteen million of them, so they rarely share one.
func appendIP(b []byte, rng *rand.Rand) []byte {
	v := rng.Uint32()
	b = append(b, "10."...)
	b = strconv.AppendUint(b, uint64(v>>16&0xff), 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(v>>8&0xff), 10)
	b = append(b, '.')
	return strconv.AppendUint(b, uint64(v&0xff), 10)
}

// reportBody appends the body of the report of an attempt of kind k.
func reportBody(b []byte, attemptID []byte, k kind) []byte {
	b = append(b, `{"attempt_id":"`...)
	b = append(b, attemptID...)
	b = append(b, `","outcome":"`...)
	b = append(b, k.outcome()...)
	return append(b, `"}`...)
}

// attemptID returns the attempt_id of a check response, or nil when it has
// none. guardian's attempt ids are base64url, so the value needs no
// unescaping.
func attemptID(body []byte) []byte {
	const field = `"attempt_id":"`
	i := bytes.Index(body, []byte(field))
	if i < 0 {
		return nil
	}
	rest := body[i+len(field):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return nil
	}
	return rest[:j]
}

// decision returns the decision of a check response: allow, challenge, slow
// or block, or "" when it has none.
func decision(body []byte) string {
	const field = `"decision":"`
	i := bytes.Index(body, []byte(field))
	if i < 0 {
		return ""
	}
	rest := body[i+len(field):]
	switch {
	case bytes.HasPrefix(rest, []byte(`allow"`)):
		return "allow"
	case bytes.HasPrefix(rest, []byte(`challenge"`)):
		return "challenge"
	case bytes.HasPrefix(rest, []byte(`slow"`)):
		return "slow"
	case bytes.HasPrefix(rest, []byte(`block"`)):
		return "block"
	}
	return ""
}

// degraded reports whether a check response says the fallback decided.
func degraded(body []byte) bool {
	return bytes.Contains(body, []byte(`"degraded":true`))
}
