package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// microBench is one Go benchmark the run reports, from `go test -bench`.
type microBench struct {
	Package string  `json:"package"`
	Name    string  `json:"name"`
	NsOp    float64 `json:"ns_per_op"`
	BytesOp float64 `json:"bytes_per_op"`
	Allocs  float64 `json:"allocs_per_op"`
}

// microBenches are the benchmarks behind the allocation targets: a check
// through the engine (built-in rules, embedded store, no HTTP) and the GCRA
// arithmetic on its own.
var microBenches = []struct{ pkg, pattern string }{
	{"github.com/guardian-sec/guardian/internal/engine", "^(BenchmarkCheck|BenchmarkCheckBuiltinRules|BenchmarkCheckTrustedDevice)$"},
	{"github.com/guardian-sec/guardian/internal/store/memstore", "^BenchmarkGCRA$"},
}

// runMicro runs microBenches with the go command and -benchmem, for
// benchtime each. It needs the guardian module as the working directory
// (or a directory inside it), as `make bench-load` has.
func runMicro(ctx context.Context, goBin, benchtime string) ([]microBench, error) {
	var out []microBench
	for _, mb := range microBenches {
		cmd := exec.CommandContext(ctx, goBin, "test", "-run", "^$", "-bench", mb.pattern, "-benchmem", "-benchtime", benchtime, "-count", "1", mb.pkg)
		b, err := cmd.CombinedOutput()
		if err != nil {
			return out, fmt.Errorf("go test -bench %s: %w\n%s", mb.pkg, err, b)
		}
		rs, err := parseBench(string(b))
		if err != nil {
			return out, fmt.Errorf("go test -bench %s: %w", mb.pkg, err)
		}
		for i := range rs {
			rs[i].Package = strings.TrimPrefix(mb.pkg, "github.com/guardian-sec/guardian/")
		}
		out = append(out, rs...)
	}
	return out, nil
}

// parseBench reads the result lines of `go test -bench -benchmem` output:
//
//	BenchmarkCheck-2   133831   8961 ns/op   688 B/op   8 allocs/op
func parseBench(s string) ([]microBench, error) {
	var out []microBench
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		r := microBench{Name: name}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: %w", sc.Text(), err)
			}
			switch f[i+1] {
			case "ns/op":
				r.NsOp = v
			case "B/op":
				r.BytesOp = v
			case "allocs/op":
				r.Allocs = v
			}
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no benchmark results in:\n%s", s)
	}
	return out, nil
}
