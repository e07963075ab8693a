package keys

import "net/netip"

// Key is what a rule counts a check by, normalised and not yet hashed: the
// kind of key and the identifiers of that kind. The zero Key is a check that
// lacks them.
type Key struct {
	// Kind keeps keys of different sorts apart once hashed: guardian uses
	// the names of the rules' keys ("account", "ip", "account+ip",
	// "recipient").
	Kind string
	// ID is a normalised identifier (Account, Recipient); "" for none.
	ID string
	// Net is a client network (Prefix); the zero Prefix for none.
	Net netip.Prefix
}

// KindAccount is the kind of an account's key, the name of the rules' key:
// account.
const KindAccount = "account"

// AccountKey returns the key of the normalised account: what key: account
// rules count an untrusted check by, and what device tokens, the audit
// trail and the account calls name an account by once hashed.
func AccountKey(account string) Key { return Key{Kind: KindAccount, ID: account} }

// AccountSubject returns the subject h hashes account to, normalised with
// n (nil: the defaults) as a check's account is: the subject of
// AccountKey.
func (h *Hasher) AccountSubject(n *Normalizer, account string) (string, error) {
	norm, err := n.Account(account)
	if err != nil {
		return "", err
	}
	return h.KeySubject(AccountKey(norm)), nil
}

// IsZero reports whether k is the zero Key.
func (k Key) IsZero() bool { return k == Key{} }

// String is k as people read it, before hashing: its ID, its network, or
// both separated by a space; its kind when it has neither.
func (k Key) String() string {
	switch {
	case k.ID != "" && k.Net.IsValid():
		return k.ID + " " + k.Net.String()
	case k.ID != "":
		return k.ID
	case k.Net.IsValid():
		return k.Net.String()
	}
	return k.Kind
}

// KeySubject returns the subject of k: Subject(k.Kind, k.ID, k.Net.String()),
// each of ID and Net only when set, without formatting Net on the heap; a
// tenant's Hasher namespaces it as Subject does.
func (h *Hasher) KeySubject(k Key) string {
	st := h.pool.Get().(*hashState)
	b := h.appendKind(st.buf[:0], k.Kind)
	if k.ID != "" {
		b = appendField(b, k.ID)
	}
	if k.Net.IsValid() {
		var text [64]byte // the longest prefix text is 43 bytes
		t := k.Net.AppendTo(text[:0])
		b = append(appendLen(b, len(t)), t...)
	}
	s := st.finish(b)
	h.pool.Put(st)
	return s
}
