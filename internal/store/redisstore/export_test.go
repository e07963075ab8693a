package redisstore

import "time"

// Slot exposes slot to the tests of package redisstore_test, which compare
// it with what a real cluster answers.
var Slot = slot

// Queued reports how many batches and reports' marks wait for a grouped
// call.
func (s *Store) Queued() int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return len(s.group.waiting)
}

// SetCallTime sets how long the store takes a script call to have taken
// lately, which admission control judges deadlines by.
func (s *Store) SetCallTime(d time.Duration) { s.group.callTime.Store(int64(d)) }

// DistinctSlotKey exposes distinctSlotKey to the tests of package
// redisstore_test, which read a distinct key's sub-windows.
var DistinctSlotKey = distinctSlotKey

// DistinctCountKey exposes distinctCountKey to the tests of package
// redisstore_test, which look for a busy distinct key's remembered count.
var DistinctCountKey = distinctCountKey

// ForgetFailedLoad lets the Store load the do script's library at the next
// chance, as if its last load had not failed.
func (s *Store) ForgetFailedLoad() { s.fn.failed.Store(0) }
