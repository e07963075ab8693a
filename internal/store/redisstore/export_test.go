package redisstore

// Slot exposes slot to the tests of package redisstore_test, which compare
// it with what a real cluster answers.
var Slot = slot
