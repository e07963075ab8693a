package main

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestParseInfo(t *testing.T) {
	info := "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n\r\n" +
		"# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\n\r\n" +
		"# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\nused_cpu_sys_children:9.000000\r\n\r\n" +
		"# Commandstats\r\n" +
		"cmdstat_evalsha:calls=1200,usec=34000,usec_per_call=28.33,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=3,usec=300,usec_per_call=100.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_get:calls=3600,usec=1000,usec_per_call=0.28,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=70,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n"
	st, err := parseInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	if st.version != "7.0.15" || st.usedMemory != 1048576 || st.cpu != 3.75 {
		t.Errorf("version, used_memory, cpu = %q, %d, %v; want 7.0.15, 1048576, 3.75", st.version, st.usedMemory, st.cpu)
	}
	for name, want := range map[string]int64{"evalsha": 1200, "eval": 3, "get": 3600, "info": 7} {
		if got := st.calls[name]; got != want {
			t.Errorf("calls[%s] = %d, want %d", name, got, want)
		}
	}
	for name, want := range map[string]int64{"evalsha": 34000, "eval": 300, "get": 1000} {
		if got := st.usec[name]; got != want {
			t.Errorf("usec[%s] = %d, want %d", name, got, want)
		}
	}
}

func TestParseInfoRefusesWhatItCannotRead(t *testing.T) {
	for _, info := range []string{
		"",
		"used_memory:12\r\n",                    // no CPU
		"used_cpu_sys:1\r\nused_cpu_user:1\r\n", // no memory
		"used_memory:lots\r\nused_cpu_sys:1\r\nused_cpu_user:1\r\n",
		"used_memory:1\r\nused_cpu_sys:1\r\nused_cpu_user:1\r\ncmdstat_get:usec=1\r\n",
		"used_memory:1\r\nused_cpu_sys:1\r\nused_cpu_user:1\r\ncmdstat_get:calls=1\r\n",
		"used_memory:1\r\nused_cpu_sys:1\r\nused_cpu_user:1\r\ncmdstat_get:calls=x,usec=1\r\n",
	} {
		if _, err := parseInfo(info); !errors.Is(err, errInfo) {
			t.Errorf("parseInfo(%q) error = %v, want errInfo", info, err)
		}
	}
}

func TestScriptAndCommandCalls(t *testing.T) {
	a := redisStats{
		calls: map[string]int64{"evalsha": 10, "eval": 1, "get": 30, "info": 5},
		usec:  map[string]int64{"evalsha": 100, "eval": 50},
	}
	b := redisStats{
		calls: map[string]int64{"evalsha": 110, "eval": 2, "fcall": 100, "get": 330, "set": 300, "info": 9, "dbsize": 4, "time": 101},
		usec:  map[string]int64{"evalsha": 2100, "eval": 70, "fcall": 2000},
	}
	// The do script's function library counts as scripts do.
	if got, want := scriptCalls(a, b), int64(201); got != want {
		t.Errorf("scriptCalls = %d, want %d", got, want)
	}
	// evalsha 100 + eval 1 + fcall 100 + get 300 + set 300 + time 101;
	// info and dbsize are the measurement's own.
	if got, want := commandCalls(a, b), int64(902); got != want {
		t.Errorf("commandCalls = %d, want %d", got, want)
	}
	if got, want := scriptMicros(a, b), 20.0; got != want {
		t.Errorf("scriptMicros = %v, want %v (4020µs over 201 calls)", got, want)
	}
	if got := scriptMicros(a, a); got != 0 {
		t.Errorf("scriptMicros without calls = %v, want 0", got)
	}
}

func TestParseStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	stat := "4242 (guard (ian) x) S 1 4242 4242 0 -1 4194560 1536 0 0 0 250 75 0 0 20 0 9 0 1234 1000000 2000 18446744073709551615"
	got, err := parseStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3.25; got != want {
		t.Errorf("parseStat = %v, want %v (325 ticks)", got, want)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 eleven 12 13"} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseBench(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/guardian-sec/guardian/internal/engine
cpu: Some CPU @ 2.00GHz
BenchmarkCheck-2                	  133831	      8961 ns/op	     688 B/op	       8 allocs/op
BenchmarkCheckBuiltinRules-2    	  314530	      5891.5 ns/op	     382 B/op	       7 allocs/op
BenchmarkGCRA                   	100000000	        10.87 ns/op	       0 B/op	       0 allocs/op
PASS
ok  	github.com/guardian-sec/guardian/internal/engine	4.333s
`
	got, err := parseBench(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []microBench{
		{Name: "BenchmarkCheck", NsOp: 8961, BytesOp: 688, Allocs: 8},
		{Name: "BenchmarkCheckBuiltinRules", NsOp: 5891.5, BytesOp: 382, Allocs: 7},
		{Name: "BenchmarkGCRA", NsOp: 10.87, BytesOp: 0, Allocs: 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := parseBench("PASS\nok\n"); err == nil {
		t.Error("parseBench without results succeeded, want an error")
	}
}

func TestSample(t *testing.T) {
	text := `# HELP go_memstats_mallocs_total Total number of heap objects allocated.
# TYPE go_memstats_mallocs_total counter
go_memstats_mallocs_total_other 1
go_memstats_mallocs_total 1.234567e+06
process_cpu_seconds_total 12.5
`
	for _, tt := range []struct {
		name string
		want float64
		ok   bool
	}{
		{"go_memstats_mallocs_total", 1234567, true},
		{"process_cpu_seconds_total", 12.5, true},
		{"go_goroutines", 0, false},
	} {
		got, ok, err := sample(strings.NewReader(text), tt.name)
		if err != nil || ok != tt.ok || got != tt.want {
			t.Errorf("sample(%s) = %v, %v, %v; want %v, %v, nil", tt.name, got, ok, err, tt.want, tt.ok)
		}
	}
}

func TestLoopback(t *testing.T) {
	for u, want := range map[string]bool{
		"redis://127.0.0.1:6379/0":           true,
		"redis://localhost:6380":             true,
		"redis://user:pw@127.0.0.1:6379/1":   true,
		"redis://10.0.0.5:6379/0":            false,
		"redis://127.0.0.1.example.com:6379": false,
		"rediss://127.0.0.1:6379":            true,
		"127.0.0.1:6379":                     false,
	} {
		if got := loopback(u); got != want {
			t.Errorf("loopback(%q) = %v, want %v", u, got, want)
		}
	}
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"--phases", "mix, healthz,memory,healthz", "--rate", "500", "--duration", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	// Phases run in their fixed order, each once, memory first.
	if got := strings.Join(c.phases, ","); got != "memory,healthz,mix" || c.rate != 500 {
		t.Errorf("phases, rate = %s, %v; want memory,healthz,mix, 500", got, c.rate)
	}
	for _, args := range [][]string{
		{"--phases", "healthz,warp"},
		{"--rate", "0"},
		{"--duration", "0s"},
		{"--conns", "0"},
		{"--attack-share", "1.5"},
		{"--redis-url", "redis://192.0.2.1:6379/0"},
		{"--pprof-phase", "memory"},
		{"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) succeeded, want an error", args)
		}
	}
}
