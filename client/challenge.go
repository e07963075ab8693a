package client

import (
	"crypto/sha256"
	"math/bits"
	"strconv"
)

// SolveChallenge solves a proof-of-work challenge of guardian's gateway mode:
// the "challenge" of a 403 challenge_required answer gives token and
// difficulty, and the answer is the decimal nonce, counting from 0, such
// that SHA-256 of token, ":" and the nonce starts with difficulty zero bits
// (ChallengeSolved). POST {"token": token, "nonce": nonce} to the
// challenge's url, then repeat the request with the "pass" it answers in
// the X-Guardian-Challenge header. A difficulty of 18 takes about 260,000
// hashes on average.
func SolveChallenge(token string, difficulty int) string {
	for n := uint64(0); ; n++ {
		nonce := strconv.FormatUint(n, 10)
		if ChallengeSolved(token, nonce, difficulty) {
			return nonce
		}
	}
}

// ChallengeSolved reports whether nonce solves token at difficulty: SHA-256
// of token + ":" + nonce has difficulty leading zero bits. It is the one
// definition guardian checks solutions with.
func ChallengeSolved(token, nonce string, difficulty int) bool {
	sum := sha256.Sum256([]byte(token + ":" + nonce))
	zeros := 0
	for _, b := range sum {
		if b != 0 {
			zeros += bits.LeadingZeros8(b)
			break
		}
		zeros += 8
	}
	return zeros >= difficulty
}
