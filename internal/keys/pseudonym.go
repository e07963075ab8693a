package keys

// Pseudonym kinds: what a pseudonym stands for. A pseudonym of one kind
// never equals one of another kind for the same value.
const (
	PseudonymAccount   = "account"
	PseudonymRecipient = "recipient"
	PseudonymNetwork   = "network"
)

// Pseudonym returns the one name guardian gives a normalised identifier
// wherever it must name one without revealing it (audit lines, the decision
// log, shadow top keys, lists, the console, webhooks): "h-" and SubjectLen
// characters of unpadded base64url, a keyed hash under the hash key. Every
// instance sharing the hash key gives one identifier the same pseudonym;
// nobody without the key can tell which identifier it names. A tenant's
// Hasher gives accounts and recipients pseudonyms of the tenant's own;
// networks are every tenant's, as key: ip rules are (tenant.go).
func (h *Hasher) Pseudonym(kind, norm string) string {
	if kind == PseudonymNetwork {
		h = h.Tenant("")
	}
	return "h-" + h.Subject("pseudonym", kind, norm)
}
