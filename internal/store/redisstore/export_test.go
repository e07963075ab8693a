package redisstore

// Slot exposes slot to the tests of package redisstore_test, which compare
// it with what a real cluster answers.
var Slot = slot

// Locate exposes locate: the hash and the field that hold a store key's
// state in Redis.
func Locate(key string) (hash, field string) {
	l := locate(key)
	return l.hash, l.field
}
