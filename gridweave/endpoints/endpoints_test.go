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
		{strings.Repeat("n", 40), v1alpha1.Hardware{GPUType: "NVIDIA A100", GPUs: 4}, "ep-" + strings.Repeat("n", 40) + "-nvidia-a100-x4"},
	} {
		got := GroupName(c.name, c.hw)
		if got != c.want || len(got) > 63 || strings.HasSuffix(got, "-") {
			t.Errorf("GroupName(%q, %+v) = %q, want %q (at most 63 characters, no trailing dash)", c.name, c.hw, got, c.want)
		}
	}
	// Long names: cut, and still one group per kind of hardware.
	seen := map[string]v1alpha1.Hardware{}
	for _, name := range []string{strings.Repeat("n", 55), strings.Repeat("n", 63)} {
		for _, hw := range []v1alpha1.Hardware{{GPUType: "NVIDIA A100", GPUs: 4}, {GPUType: "NVIDIA A100", GPUs: 8}, {GPUType: "NVIDIA-H100-80GB-HBM3", GPUs: 8}} {
			g := GroupName(name, hw)
			if len(g) > 63 || strings.HasSuffix(g, "-") || !strings.HasPrefix(g, "ep-nnnn") {
				t.Errorf("GroupName(%d characters, %+v) = %q", len(name), hw, g)
			}
			if other, taken := seen[g]; taken {
				t.Errorf("%+v and %+v share the group %q", hw, other, g)
			}
			seen[g] = hw
		}
	}
}
