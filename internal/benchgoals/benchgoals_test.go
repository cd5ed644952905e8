package benchgoals

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseBench(t *testing.T) {
	out := []byte(`goos: linux
BenchmarkJoinOnTheKubernetesLedger/cpu/clients=16-2         	    1000	   9872345 ns/op	       101.3 joins/s	       102.5 joins/s-at-100	       100.1 joins/s-at-5000
BenchmarkProcess/lint-RayCluster-2   	       1	  41000000 ns/op	        21.50 peak-MB
BenchmarkRestoreMesh10k 3 4200000000 ns/op 180.0 rss-MB
PASS
`)
	res := ParseBench(out)
	if v, err := metric(res, "BenchmarkJoinOnTheKubernetesLedger/cpu/clients=16", "joins/s"); err != nil || v != 101.3 {
		t.Errorf("joins/s = %v, %v", v, err)
	}
	if v, err := metric(res, "BenchmarkJoinOnTheKubernetesLedger/cpu/clients=16", "joins/s-at-5000"); err != nil || v != 100.1 {
		t.Errorf("joins/s-at-5000 = %v, %v", v, err)
	}
	if v, err := metric(res, "BenchmarkProcess/lint-RayCluster", "peak-MB"); err != nil || v != 21.5 {
		t.Errorf("peak-MB = %v, %v", v, err)
	}
	if v, err := metric(res, "BenchmarkRestoreMesh10k", "rss-MB"); err != nil || v != 180 {
		t.Errorf("rss-MB = %v, %v", v, err)
	}
	if _, err := metric(res, "BenchmarkNone", "ns/op"); err == nil {
		t.Error("a missing benchmark was found")
	}
}

func TestParseJoinload(t *testing.T) {
	j, err := ParseJoinload("10000 joins in 20.90s: 478 joins/s; first tenth 437/s, last tenth 459/s (last/first 1.05); a join's median 30.548ms, slowest 139.447ms\n")
	if err != nil || j.PerSec != 478 || j.FirstTenth != 437 || j.LastTenth != 459 {
		t.Errorf("%+v, %v", j, err)
	}
	if _, err := ParseJoinload("joinload: no join succeeded"); err == nil {
		t.Error("a failed run was read as a report")
	}
}

func TestTableSaysWhetherEachGoalIsMet(t *testing.T) {
	var b bytes.Buffer
	Table(&b, []Outcome{
		{Goal: Goal{Name: "joins"}, Figures: []Figure{AtLeast("rate", 1200, "joins/s", 1000), AtLeast("flat", 0.7, "", 0.9), {What: "direct", Value: 350, Unit: "MB/s"}}},
		{Goal: Goal{Name: "restart"}, Err: errNeedsRoot},
	})
	got := b.String()
	for _, want := range []string{"| joins: rate | 1200 joins/s | ≥ 1000 | yes |", "| joins: flat | 0.70  | ≥ 0.90 | **no** |", "| joins: direct | 350 MB/s |  | — |", "| restart | not measured: needs root |"} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
}
