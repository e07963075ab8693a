package store

// Distinct ops: how many distinct members a key saw over a sliding window,
// estimated with HyperLogLog.
//
// A Distinct key keeps DistinctSlots sub-windows of Step each (a rule's
// per/4), each a HyperLogLog of the members added during it. The window
// counted is the current sub-window and the DistinctSlots−1 before it, so
// it spans at least 4 × Step (the rule's per) and advances in steps of
// Step. An op's Count is the estimate of the distinct members in that
// window as found, before this op; it fits while Count is at most Max.
// When it is spent (Cost > 0, and its batch spends as any enforced op's
// would; a Shadow op on its own) it adds Member to the current sub-window:
// a member adds nothing to the count the second time. Remaining is
// Max − Count (at least 0), RetryAfter, when it does not fit, how long
// until the first live sub-window ends, and ResetAfter how long until the
// last does. Nothing is ever given back: a member once added stays counted
// until its sub-window ends.
//
// A sub-window ends when it leaves the window, or sooner while only
// unconfirmed spends added to it: a spend of an op with a Hold makes it
// end at now + Hold (never past the window) unless it already ends no more
// than Hold/8 before that, so that a busy key is not rewritten on every
// spend; it never makes it end sooner. A ConfirmDistinct settlement keeps
// every live sub-window of its key until it leaves the window, and so does
// an Add. So a flood of checks that nobody reports leaves state that is
// gone at most Hold after the last of them, sooner than what a report
// confirmed, and under eviction by expiry it goes first.
//
// An op with an Except key counts only the members of its window that are
// not in the window of that key, a Distinct of the same Step: its Count is
// estimated as |own ∪ except| − |except| (never below 0), exact for small
// counts like the estimate itself. An Add settlement puts a member in the
// current sub-window of its key, confirmed: so a success report names an
// account that stops counting (the accounts of failed or never reported
// checks).
//
// The estimate is Redis's HyperLogLog (PFADD, PFCOUNT over the sub-windows:
// exact for small counts, about 0.81% standard error) or, in the embedded
// store, one of its own with Redis's 16,384 registers (exact for small
// counts, about 0.81% standard error); both stay within 5% past 100.
// Memory per key is bounded: at most DistinctSlots HyperLogLogs of 12 KB
// (Redis, dense) or 16 KB (embedded), far less while few members were
// seen.

// DistinctSlots is how many sub-windows a Distinct key keeps.
const DistinctSlots = 5
