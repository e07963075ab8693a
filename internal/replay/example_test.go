package replay_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/guardian-sec/guardian/internal/replay"
	"github.com/guardian-sec/guardian/internal/rules"
)

func ExampleRun() {
	set, err := rules.Parse("example.yaml", []byte(`version: 1
rules:
  - name: login-account
    flows: [login]
    key: account
    type: rate
    count: failures
    limit: 1
    per: 1m
    burst: 2
`), time.Time{})
	if err != nil {
		panic(err)
	}
	var events strings.Builder
	for i, ts := range []string{"10:00:00.000", "10:00:01.000", "10:00:02.000", "10:01:30.000"} {
		fmt.Fprintf(&events, `{"ts":"2026-11-29T%sZ","type":"check","id":"e%d","flow":"login","account":"Alice","ip":"192.0.2.1"}`+"\n", ts, i)
		fmt.Fprintf(&events, `{"ts":"2026-11-29T%sZ","type":"report","id":"e%d","outcome":"failure"}`+"\n", ts, i)
	}
	s, err := replay.Run(context.Background(), set, strings.NewReader(events.String()), replay.Config{})
	if err != nil {
		panic(err)
	}
	r := s.Rules[0]
	fmt.Printf("%s: %d checks, %d would slow, first %s at %s\n", r.Rule, r.Checks, r.WouldSlow, r.FirstLimited[0].Key, r.FirstLimited[0].At.Format("15:04:05"))
	// Output:
	// login-account: 4 checks, 1 would slow, first alice at 10:00:02
}

func ExampleSummary_WriteTable() {
	set, err := rules.Parse("example.yaml", []byte(`version: 1
rules:
  - name: login-ip
    flows: [login]
    key: ip
    ipv4_prefix: 24
    type: rate
    limit: 1
    per: 1h
    burst: 1
    mode: shadow
`), time.Time{})
	if err != nil {
		panic(err)
	}
	events := `{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"a","flow":"login","ip":"192.0.2.1"}
{"ts":"2026-11-29T10:00:00.500Z","type":"check","id":"b","flow":"login","ip":"192.0.2.200"}
{"ts":"2026-11-29T10:00:01.000Z","type":"report","id":"b","outcome":"failure"}
`
	s, err := replay.Run(context.Background(), set, strings.NewReader(events), replay.Config{})
	if err != nil {
		panic(err)
	}
	if err := s.WriteTable(os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// events: 2 checks and 1 reports on 3 lines, 2026-11-29T10:00:00.000Z to 2026-11-29T10:00:01.000Z
	// malformed lines skipped: 0; events out of order: 0 (replayed at the time of the event before)
	// reports: 1 applied; ignored: 0 naming no check, 0 of checks slowed or blocked, 0 expired, 0 duplicate
	// each rule counted on its own, as if it were the only rule (every rule replayed in shadow mode)
	//
	// RULE      MODE    CHECKS  WOULD SLOW  WOULD BLOCK  WOULD CHALLENGE  KEYS HIT
	// login-ip  shadow  2       1           0            0                1
	//
	// BY OUTCOME OF THE ATTEMPT (later_success: the user got in, so the rule would have been friction)
	// RULE      WOULD  LATER_SUCCESS  FAILURE  UNREPORTED
	// login-ip  slow   0              1        0
	//
	// FIRST KEYS LIMITED
	// login-ip  2026-11-29T10:00:00.500Z  slow  192.0.2.0/24
}
