package redisstore

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ResetChannel is the Redis channel Delete publishes the keys it removes on,
// one per line, in the script that removes them.
const ResetChannel = "guardian:v3:resets"

// listenEvery is how long Listen waits for a message before it pings, so
// that a connection that died silently is noticed within about twice that.
const listenEvery = 2 * time.Second

// Listen subscribes to ResetChannel until the returned stop is called:
// forgotten receives the keys of every reset published by any instance,
// listening(true) is called each time the subscription is in place
// (again), and listening(false) whenever a reset may have been missed
// since. The client reconnects on its own.
func (s *Store) Listen(forgotten func(keys []string), listening func(up bool)) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	ps := s.c.Subscribe(ctx, ResetChannel)
	done := make(chan struct{})
	go func() {
		defer close(done)
		up := false
		down := func() {
			if up {
				up = false
				listening(false)
			}
		}
		for ctx.Err() == nil {
			msg, err := ps.ReceiveTimeout(ctx, listenEvery)
			var netErr net.Error
			switch {
			case err == nil:
			case errors.As(err, &netErr) && netErr.Timeout():
				if err := ps.Ping(ctx); err != nil {
					down()
				}
				continue
			default:
				down()
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			switch m := msg.(type) {
			case *redis.Subscription:
				if m.Kind == "subscribe" && m.Channel == ResetChannel {
					up = true
					listening(true)
				}
			case *redis.Message:
				if m.Payload != "" {
					forgotten(strings.Split(m.Payload, "\n"))
				}
			}
		}
		down()
	}()
	return func() error {
		cancel()
		err := ps.Close()
		<-done
		return err
	}
}
