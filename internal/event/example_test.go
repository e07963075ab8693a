package event_test

import (
	"os"
	"time"

	"github.com/guardian-sec/guardian/internal/engine"
	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/rules"
)

func ExampleEvent_AppendJSON() {
	ev := event.Event{
		Time:    time.Date(2026, 11, 29, 10, 0, 0, 250e6, time.UTC),
		Kind:    event.Check,
		ID:      "e1",
		Flow:    rules.Login,
		Account: "alice@example.com",
		IP:      "203.0.113.7",
	}
	os.Stdout.Write(ev.AppendJSON(nil))
	rep := event.Event{Time: ev.Time.Add(time.Second), Kind: event.Report, ID: "e1", Outcome: engine.Failure}
	os.Stdout.Write(rep.AppendJSON(nil))
	// Output:
	// {"ts":"2026-11-29T10:00:00.250Z","type":"check","id":"e1","flow":"login","account":"alice@example.com","ip":"203.0.113.7"}
	// {"ts":"2026-11-29T10:00:01.250Z","type":"report","id":"e1","outcome":"failure"}
}
