package webhook_test

import (
	"testing"

	"github.com/guardian-sec/guardian/internal/webhook"
)

// BenchmarkNotifyFull is Notify on a path whose receiver never answers:
// the queues are full, so every event is dropped and counted, and Notify
// still returns at once.
func BenchmarkNotifyFull(b *testing.B) {
	n := webhook.New(webhook.Config{URLs: []string{"http://127.0.0.1:1/"}, Key: make([]byte, 32), Logger: quiet})
	ev := webhook.Event{Type: webhook.HardStopStarted, Data: map[string]string{"account": "h-ohjXXnIYOeEQCt9ExlRekQ"}}
	b.ReportAllocs()
	for range b.N {
		n.Notify(ev)
	}
}
