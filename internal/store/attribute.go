package store

// Attributed counts: which source spent a Counter's count.
//
// A Counter op with a Member attributes the units it spends to that member:
// guardian's keyed hash of the check's source address (an IPv4 address, an
// IPv6 /64) for the account. A Counter key remembers the units of at most
// MaxAttributed members, the most recently spending ones; the units of a
// member it forgets stay counted, attributed to nobody. A Lift settlement
// takes the units of its Member off the count and forgets the member, so
// that the owner's success takes back the failures made from the owner's
// address and nothing else: what others spent stays spent until the key
// expires or is reset. A Reset still removes the whole key, and a Confirm
// keeps the attributions with the count.
//
// Forgetting the least recent member when a ninth one spends is the choice
// that favours the owner: the owner's own typos come just before the
// owner's success, and an attacker who floods the attributions only makes
// the owner's earlier failures count for good, never lifts their own.
// Memory: at most MaxAttributed members of 16 characters and a count each,
// under 200 bytes per key.

// MaxAttributed is how many members a Counter key remembers the units of.
const MaxAttributed = 8
