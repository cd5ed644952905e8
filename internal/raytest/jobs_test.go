package raytest

import (
	"maps"
	"testing"
)

// TestDistributedTrainRanks: only a rank whose sum is exactly 3 counts,
// with where it met the other (Ray's log prefix and colors around it).
func TestDistributedTrainRanks(t *testing.T) {
	for _, tc := range []struct {
		logs string
		want map[string]TrainRank
	}{
		{"\x1b[36m(RayTrainWorker pid=200, ip=198.18.3.2)\x1b[0m rank one of 2 on 198.18.2.2: sum 3\n\x1b[36m(RayTrainWorker pid=193, ip=198.18.2.2)\x1b[0m rank zero of 2 on 198.18.2.2: sum 3\n",
			map[string]TrainRank{"zero": {"198.18.2.2", "198.18.2.2"}, "one": {"198.18.2.2", "198.18.3.2"}}},
		{"rank zero of 2 on 10.0.0.2: sum 3\n(RayTrainWorker pid=2) rank one of 2 on 10.0.0.2: sum 3\n",
			map[string]TrainRank{"zero": {"10.0.0.2", ""}, "one": {"10.0.0.2", ""}}},
		{"(RayTrainWorker pid=1, ip=10.0.0.3)\nrank zero of 2 on 10.0.0.2: sum 3\n", map[string]TrainRank{"zero": {"10.0.0.2", ""}}},
		{"rank zero of 2 on 10.0.0.2: sum 30\nrank one of 2 on 10.0.0.2: sum 2\n", map[string]TrainRank{}},
		{"rank zero of 3 on 10.0.0.2: sum 3\n", map[string]TrainRank{}},
	} {
		if got := DistributedTrainRanks(tc.logs); !maps.Equal(got, tc.want) {
			t.Errorf("DistributedTrainRanks(%q) = %v, want %v", tc.logs, got, tc.want)
		}
	}
}
