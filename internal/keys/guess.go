package keys

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"strconv"
	"sync"

	"github.com/guardian-sec/guardian/internal/secret"
)

// guessPurpose is the secret.Key purpose of the guess hashing key.
const guessPurpose = "guardian guesses v1"

// KindSecret is the kind of the key a key: secret rule counts a guess by.
const KindSecret = "secret"

// Guesser turns a check's secret fingerprint (itself the auth service's
// keyed hash of a guessed secret) into a guess: 64 bits of guardian's own
// keyed hash of it, all guardian keeps. The key is derived from the hashing
// key for this purpose alone. 64 bits tell one account's last guesses apart
// with a chance of a collision near 2^-62, and name a sprayed guess across
// every account with a collision only between guesses tried 2^32 apart;
// what they let someone holding both keys learn is said in the README's
// threat model. A Guesser is safe for concurrent use; build one with
// NewGuesser.
type Guesser struct {
	pool sync.Pool // of *guessState
}

// guessState is one HMAC and its output, reused through the pool.
type guessState struct {
	mac hash.Hash
	sum [sha256.Size]byte
}

// NewGuesser returns a Guesser keyed from k.
func NewGuesser(k secret.Key) *Guesser {
	key := k.Derive(guessPurpose)
	g := &Guesser{}
	g.pool.New = func() any { return &guessState{mac: hmac.New(sha256.New, key)} }
	return g
}

// Guess returns the guess of fingerprint, the same whatever the account
// (what key: secret rules count): the first 8 bytes of HMAC-SHA256 over
// it, never 0 (a hash of 0 counts as 1), so that 0 can mean no guess.
func (g *Guesser) Guess(fingerprint string) uint64 {
	var b [binary.MaxVarintLen64 + 128]byte // a valid fingerprint fits
	return g.sum(appendField(b[:0], fingerprint))
}

// AccountGuess returns the guess an account's memory holds for guess, made
// by the account whose subject is account: another keyed hash, of both, so
// that the memories of two accounts tried with one password share nothing
// that would show it. Never 0.
func (g *Guesser) AccountGuess(account string, guess uint64) uint64 {
	var b [64]byte
	m := binary.BigEndian.AppendUint64(appendField(b[:0], account), guess)
	return g.sum(m)
}

// sum returns the first 8 bytes of the HMAC of m, at least 1.
func (g *Guesser) sum(m []byte) uint64 {
	st := g.pool.Get().(*guessState)
	st.mac.Reset()
	st.mac.Write(m)
	st.mac.Sum(st.sum[:0])
	v := binary.BigEndian.Uint64(st.sum[:8])
	g.pool.Put(st)
	return max(v, 1)
}

// GuessKey returns the key a key: secret rule counts guess by: its kind and
// the guess in hex, never the fingerprint.
func GuessKey(guess uint64) Key {
	return Key{Kind: KindSecret, ID: strconv.FormatUint(guess, 16)}
}
