package client_test

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"testing"

	"github.com/guardian-sec/guardian/client"
)

func TestSolveChallenge(t *testing.T) {
	for _, difficulty := range []int{0, 1, 8, 12} {
		tok := "challenge-token-" + strconv.Itoa(difficulty)
		nonce := client.SolveChallenge(tok, difficulty)
		sum := sha256.Sum256([]byte(tok + ":" + nonce))
		if bitsSet := fmt.Sprintf("%08b%08b", sum[0], sum[1]); difficulty > 0 && bitsSet[:difficulty] != "000000000000"[:difficulty] {
			t.Errorf("difficulty %d: nonce %s gives %s…", difficulty, nonce, bitsSet)
		}
		// The smallest nonce: none before it solves.
		n, _ := strconv.Atoi(nonce)
		for i := range n {
			if client.ChallengeSolved(tok, strconv.Itoa(i), difficulty) {
				t.Fatalf("difficulty %d: %d solves before %s", difficulty, i, nonce)
			}
		}
	}
	if client.ChallengeSolved("t", "0", 257) {
		t.Error("more zero bits than SHA-256 has")
	}
}
