package redisstore_test

import (
	"fmt"

	"github.com/guardian-sec/guardian/internal/store/redisstore"
)

// Open takes every form of --redis-url; the client's type says which
// topology guardian will use. Open does not wait for the server: an
// unreachable one shows in the first call.
func ExampleOpen() {
	for _, url := range []string{
		"redis://127.0.0.1:6379/0",
		"rediss://127.0.0.1:6380/1",
		"127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002",
		"redis://127.0.0.1:26379/0?master_name=guardian",
	} {
		c, err := redisstore.Open(url)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Printf("%T\n", c)
		_ = c.Close()
	}
	_, err := redisstore.Open("redis-host")
	fmt.Println(err)
	// Output:
	// *redis.Client
	// *redis.Client
	// *redis.ClusterClient
	// *redis.Client
	// redisstore: bad url: "redis-host" is not host:port
}
