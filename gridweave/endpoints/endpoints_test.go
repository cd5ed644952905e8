package endpoints

import (
	"strings"
	"testing"

	"gridweave.dev/gridweave/crd/v1alpha1"
)

func TestGroupName(t *testing.T) {
	for _, c := range []struct {
		name string
		hw   v1alpha1.Hardware
		want string
	}{
		{"llm", v1alpha1.Hardware{GPUType: "NVIDIA-H100-80GB-HBM3", GPUs: 8}, "ep-llm-nvidia-h100-80gb-hbm3-x8"},
		{"llm", v1alpha1.Hardware{GPUType: "AMD Instinct MI300X", GPUs: 1}, "ep-llm-amd-instinct-mi300x-x1"},
		{"llm", v1alpha1.Hardware{GPUType: "--Tesla T4--", GPUs: 2}, "ep-llm-tesla-t4-x2"},
		{strings.Repeat("n", 55), v1alpha1.Hardware{GPUType: "NVIDIA A100", GPUs: 4}, "ep-" + strings.Repeat("n", 55) + "-nvid"},
		{strings.Repeat("n", 58), v1alpha1.Hardware{GPUType: "NVIDIA A100", GPUs: 4}, "ep-" + strings.Repeat("n", 58) + "-n"},
		{strings.Repeat("n", 59), v1alpha1.Hardware{GPUType: "NVIDIA A100", GPUs: 4}, "ep-" + strings.Repeat("n", 59)},
	} {
		got := GroupName(c.name, c.hw)
		if got != c.want || len(got) > 63 || strings.HasSuffix(got, "-") {
			t.Errorf("GroupName(%q, %+v) = %q, want %q (at most 63 characters, no trailing dash)", c.name, c.hw, got, c.want)
		}
	}
}
