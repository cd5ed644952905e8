package scrapetargets_test

import (
	"net/netip"
	"testing"

	"gridweave.dev/gridweave/scrapetargets"
	"gridweave.dev/internal/prometheustest"
)

// TestPrometheusDiscoversTargets starts a real Prometheus with
// file_sd_configs on a Dir and checks that it lists a written target with
// its labels, follows a rewrite, and drops the target once it is removed.
//
// Network rule: Prometheus only discovers here, it never scrapes. The scrape
// interval is far longer than the test, and should a scrape start anyway it
// goes through a proxy the test owns on loopback, which refuses it, so
// nothing ever connects to the 198.18.0.0/15 target address.
func TestPrometheusDiscoversTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Prometheus; skipped with -short")
	}
	d := newDir(t)
	prom := prometheustest.Start(t, d.Path())

	target := scrapetargets.Target{
		Hostname: "gpu-node-1",
		VPNIP:    netip.MustParseAddr("198.18.0.7"),
		GPUModel: "NVIDIA H100 80GB HBM3",
		GPUCount: 8,
	}
	if err := d.Write(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"node":      "gpu-node-1",
		"hostname":  "gpu-node-1",
		"gpu_model": "NVIDIA H100 80GB HBM3",
		"gpu_count": "8",
	}
	found := prom.WaitForTargets(t, "listing the written target", func(targets []prometheustest.Target) bool {
		return len(targets) == 1 && targets[0].DiscoveredLabels["__address__"] == "198.18.0.7:9400" &&
			prometheustest.HasLabels(targets[0].Labels, wantLabels)
	})
	got := found[0]
	for name, value := range wantLabels {
		if got.DiscoveredLabels[name] != value {
			t.Errorf("discovered label %s=%q, want %q", name, got.DiscoveredLabels[name], value)
		}
	}
	if got.Labels["instance"] != "198.18.0.7:9400" || got.Labels["job"] != "dcgm" {
		t.Errorf("labels instance=%q job=%q, want 198.18.0.7:9400 and dcgm", got.Labels["instance"], got.Labels["job"])
	}
	if got.Health != "unknown" && prom.RefusedScrapes() == 0 {
		t.Errorf("target health %q but the loopback proxy saw no scrape: Prometheus scraped around it", got.Health)
	}

	target.GPUCount = 4
	if err := d.Write(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	prom.WaitForTargets(t, "following the rewritten target", func(targets []prometheustest.Target) bool {
		return len(targets) == 1 && targets[0].Labels["gpu_count"] == "4"
	})

	if err := d.Remove(target.Hostname); err != nil {
		t.Fatal(err)
	}
	prom.WaitForTargets(t, "dropping the removed target", func(targets []prometheustest.Target) bool {
		return len(targets) == 0
	})

	if n := prom.RefusedScrapes(); n != 0 {
		t.Logf("Prometheus tried to scrape %d times; the loopback proxy refused it", n)
	}
}
