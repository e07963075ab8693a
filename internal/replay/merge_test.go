package replay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/guardian-sec/guardian/internal/event"
	"github.com/guardian-sec/guardian/internal/replay"
)

// splitLines deals the lines of a log among n files at random, each file
// keeping the log's order: what the decision logs of n instances behind a
// load balancer look like, a check and its report often on two instances.
func splitLines(log []byte, n int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 11))
	files := make([]bytes.Buffer, n)
	for _, line := range bytes.SplitAfter(log, []byte("\n")) {
		if len(line) > 0 {
			files[rng.IntN(n)].Write(line)
		}
	}
	out := make([][]byte, n)
	for i := range files {
		out[i] = files[i].Bytes()
	}
	return out
}

func sources(files [][]byte) []replay.Source {
	srcs := make([]replay.Source, len(files))
	for i, f := range files {
		srcs[i] = replay.Source{Name: fmt.Sprintf("instance-%d.jsonl", i), R: bytes.NewReader(f)}
	}
	return srcs
}

// TestRunSourcesMergesByTimestamp replays one day split over three files
// whose events interleave, and wants exactly what the day in one file
// gives, through Run and through Compare; the files one after the other,
// as cat would join them, give something else.
func TestRunSourcesMergesByTimestamp(t *testing.T) {
	t.Parallel()
	var day bytes.Buffer
	if _, err := (traffic{users: 100, perSecond: 0.002, attacks: true, sprayNets: 12, fingerprints: true, seed: 9}).write(&day); err != nil {
		t.Fatal(err)
	}
	set, old := mustParse(t, tuningRules), mustParse(t, dayRules)
	ctx := context.Background()
	one, err := replay.Run(ctx, set, bytes.NewReader(day.Bytes()), replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	files := splitLines(day.Bytes(), 3, 1)
	merged, err := replay.RunSources(ctx, set, sources(files), replay.Config{
		Malformed: func(e *replay.LineError) { t.Errorf("malformed: %v", e) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOf(t, merged), jsonOf(t, one); got != want {
		t.Errorf("three files merged:\n%s\nwant what one file gives:\n%s", got, want)
	}
	oneC, err := replay.Compare(ctx, old, set, bytes.NewReader(day.Bytes()), replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	mergedC, err := replay.CompareSources(ctx, old, set, sources(files), replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOf(t, mergedC), jsonOf(t, oneC); got != want {
		t.Errorf("compare of three files merged:\n%s\nwant what one file gives:\n%s", got, want)
	}

	cat, err := replay.Run(ctx, set, bytes.NewReader(bytes.Join(files, nil)), replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if cat.Input.OutOfOrder == 0 || jsonOf(t, cat.Rules) == jsonOf(t, one.Rules) {
		t.Errorf("the files concatenated: %d out of order and the same counts; the test proves nothing", cat.Input.OutOfOrder)
	}
}

// TestRunSourcesKeepsEachFilesLineNumbers: a malformed line is named by its
// file and its line in that file; an event older than the one before it in
// its own file is replayed as today, at the time of the event before.
func TestRunSourcesKeepsEachFilesLineNumbers(t *testing.T) {
	a := `{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"a1","flow":"login","account":"alice","ip":"192.0.2.1"}
{"ts":"2026-11-29T10:00:02.000Z","type":"check","id":"a2","flow":"login","account":"alice","ip":"192.0.2.1"}
not json
{"ts":"2026-11-29T10:00:01.500Z","type":"check","id":"a3","flow":"login","account":"alice","ip":"192.0.2.1"}
`
	b := `{"ts":"2026-11-29T10:00:01.000Z","type":"check","id":"b1","flow":"login","account":"bob","ip":"192.0.2.2"}
{"ts":"2026-11-29T10:00:03.000Z","type":"check","id":"b2","flow":"login","account":"bob","ip":"300.0.0.1"}
`
	var skipped []string
	got, err := replay.RunSources(context.Background(), mustParse(t, oneRule), []replay.Source{
		{Name: "a.jsonl", R: strings.NewReader(a)}, {Name: "b.jsonl", R: strings.NewReader(b)},
	}, replay.Config{Malformed: func(e *replay.LineError) { skipped = append(skipped, e.Error()) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(skipped) != 2 || !strings.HasPrefix(skipped[0], "a.jsonl:3: ") || !strings.HasPrefix(skipped[1], "b.jsonl:2: ") {
		t.Errorf("skipped %q; want a.jsonl:3 and b.jsonl:2", skipped)
	}
	// a3 (10:00:01.5) comes after a2 (10:00:02) in its file: by then the
	// clock is at 10:00:02, so it is out of order, as in one file.
	want := replay.Input{Lines: 6, Checks: 4, Malformed: 2, OutOfOrder: 1,
		First: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Last: time.Date(2026, 11, 29, 10, 0, 2, 0, time.UTC)}
	if jsonOf(t, got.Input) != jsonOf(t, want) {
		t.Errorf("input = %+v, want %+v", got.Input, want)
	}
}

// TestRunSourcesReadsOneEventAheadPerSource feeds two sources through
// pipes, each line written only once the one before it in timestamp order
// was read: a merge that read one source further than its next event
// would wait forever for a line that is not written until the other
// source is read. So a merge holds one event per source, whatever the
// length of the sources.
func TestRunSourcesReadsOneEventAheadPerSource(t *testing.T) {
	const n = 200
	ra, wa := io.Pipe()
	rb, wb := io.Pipe()
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	written := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 2*n && err == nil; i++ {
			w, id := wa, fmt.Sprintf("a%d", i)
			if i%2 == 1 {
				w, id = wb, fmt.Sprintf("b%d", i)
			}
			ev := event.Event{Time: t0.Add(time.Duration(i) * time.Second), Kind: event.Check, ID: id, Flow: "login", Account: id, IP: "192.0.2.1"}
			_, err = w.Write(ev.AppendJSON(nil))
		}
		wa.Close()
		wb.Close()
		written <- err
	}()
	type result struct {
		s   *replay.Summary
		err error
	}
	done := make(chan result, 1)
	go func() {
		s, err := replay.RunSources(context.Background(), mustParse(t, oneRule), []replay.Source{{Name: "a", R: ra}, {Name: "b", R: rb}}, replay.Config{})
		done <- result{s, err}
	}()
	// A guard against a merge that deadlocks, far beyond what the replay
	// of 400 events takes.
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.s.Input.Checks != 2*n || r.s.Input.OutOfOrder != 0 {
			t.Errorf("input = %+v, want %d checks in order", r.s.Input, 2*n)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the merge read one source ahead of the other and waits for it")
	}
	if err := <-written; err != nil && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatal(err)
	}
}

// TestRunSourcesPutsChecksFirstInAnInstant: logs stamp to the millisecond,
// so a report one instance logged in the millisecond another logged its
// check may come first in file order, even when the other file holds the
// check behind a report of that millisecond; the merge replays the
// millisecond's checks first.
func TestRunSourcesPutsChecksFirstInAnInstant(t *testing.T) {
	const at = `{"ts":"2026-11-29T10:00:00.000Z",`
	report := func(id string) string { return at + `"type":"report","id":"` + id + `","outcome":"success"}` + "\n" }
	check := at + `"type":"check","id":"c1","flow":"login","account":"alice","ip":"192.0.2.1"}` + "\n"
	for _, tc := range []struct {
		name string
		a, b string
		want replay.ReportStats
	}{
		{"the check at the other file's head", report("c1"), check, replay.ReportStats{Applied: 1}},
		{"the check behind a report of its millisecond", report("c1"), report("c0") + check, replay.ReportStats{Applied: 1, NoCheck: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := replay.RunSources(context.Background(), mustParse(t, oneRule), []replay.Source{
				{Name: "a.jsonl", R: strings.NewReader(tc.a)}, {Name: "b.jsonl", R: strings.NewReader(tc.b)},
			}, replay.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Reports != tc.want {
				t.Errorf("reports %+v, want %+v: the report of c1 applied to its check", got.Reports, tc.want)
			}
		})
	}
}

// TestRunSourcesReplaysAFileThatStandsStill: a log whose every event has one
// timestamp is replayed whole, a part of its millisecond at a time.
func TestRunSourcesReplaysAFileThatStandsStill(t *testing.T) {
	const n = 10_000
	var log strings.Builder
	for i := range n {
		fmt.Fprintf(&log, `{"ts":"2026-11-29T10:00:00.000Z","type":"check","id":"c%d","flow":"login","account":"user%d","ip":"192.0.2.1"}`+"\n", i, i)
	}
	got, err := replay.RunSources(context.Background(), mustParse(t, oneRule), []replay.Source{{Name: "still.jsonl", R: strings.NewReader(log.String())}}, replay.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Input.Checks != n || got.Input.OutOfOrder != 0 {
		t.Errorf("input %+v, want %d checks, none out of order", got.Input, n)
	}
}
