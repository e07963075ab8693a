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
// until the oldest sub-window holding members leaves the window, and
// ResetAfter how long until the newest does. Nothing is ever given back: a
// member once added stays counted until its sub-window leaves.
//
// An op with an Except key counts only the members of its window that are
// not in the window of that key, a Distinct of the same Step: its Count is
// estimated as |own ∪ except| − |except| (never below 0), exact for small
// counts like the estimate itself. An Add settlement puts a member in the
// current sub-window of its key: so a success report names an account
// that stops counting (the accounts of failed or never reported checks).
//
// The estimate is Redis's HyperLogLog (PFADD, PFCOUNT over the sub-windows:
// exact for small counts, about 0.81% standard error) or, in the embedded
// store, one of its own with 4,096 registers (exact for small counts, about
// 1.6% standard error); both stay within 5% past 100. Memory per key is
// bounded: at most DistinctSlots HyperLogLogs of 12 KB (Redis, dense) or
// 4 KB (embedded), far less while few members were seen.

// DistinctSlots is how many sub-windows a Distinct key keeps.
const DistinctSlots = 5
