package scrapetargets_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gridweave.dev/gridweave/scrapetargets"
)

// prometheusBinary is where Debian's prometheus package installs the server;
// .ci/run installs the package when it is missing.
const prometheusBinary = "/usr/bin/prometheus"

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
	if _, err := os.Stat(prometheusBinary); err != nil {
		t.Fatalf("this test runs Debian's Prometheus (%v); .ci/run installs it (apt-get install --no-install-recommends prometheus)", err)
	}

	d := newDir(t)
	var scrapeAttempts atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scrapeAttempts.Add(1)
		http.Error(w, "this test's Prometheus must not scrape", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)
	prom := startPrometheus(t, d.Path(), proxy.URL)

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
	found := prom.waitForTarget(t, "listing the written target", func(targets []activeTarget) bool {
		return len(targets) == 1 && targets[0].DiscoveredLabels["__address__"] == "198.18.0.7:9400" &&
			hasLabels(targets[0].Labels, wantLabels)
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
	if got.Health != "unknown" && scrapeAttempts.Load() == 0 {
		t.Errorf("target health %q but the loopback proxy saw no scrape: Prometheus scraped around it", got.Health)
	}

	target.GPUCount = 4
	if err := d.Write(t.Context(), target); err != nil {
		t.Fatal(err)
	}
	prom.waitForTarget(t, "following the rewritten target", func(targets []activeTarget) bool {
		return len(targets) == 1 && targets[0].Labels["gpu_count"] == "4"
	})

	if err := d.Remove(target.Hostname); err != nil {
		t.Fatal(err)
	}
	prom.waitForTarget(t, "dropping the removed target", func(targets []activeTarget) bool {
		return len(targets) == 0
	})

	if n := scrapeAttempts.Load(); n != 0 {
		t.Logf("Prometheus tried to scrape %d times; the loopback proxy refused it", n)
	}
}

func hasLabels(labels, want map[string]string) bool {
	for name, value := range want {
		if labels[name] != value {
			return false
		}
	}
	return true
}

// activeTarget is the part of an entry of /api/v1/targets the test reads.
type activeTarget struct {
	DiscoveredLabels map[string]string `json:"discoveredLabels"`
	Labels           map[string]string `json:"labels"`
	ScrapePool       string            `json:"scrapePool"`
	Health           string            `json:"health"`
}

type prometheus struct {
	url    string
	exited <-chan struct{}
	log    string
}

// startPrometheus starts Prometheus with one job, "dcgm", that discovers
// targetsDir/*.json every second, and kills it when the test ends. The
// scrape interval is 1h, so the first scrape almost never falls within the
// test; should it, it goes to proxyURL.
func startPrometheus(t *testing.T, targetsDir, proxyURL string) *prometheus {
	t.Helper()
	work := t.TempDir()
	config := fmt.Sprintf(`global:
  scrape_interval: 1h
  scrape_timeout: 5s
  evaluation_interval: 1h
scrape_configs:
  - job_name: dcgm
    scrape_interval: 1h
    proxy_url: %q
    file_sd_configs:
      - files: [%q]
        refresh_interval: 1s
`, proxyURL, filepath.Join(targetsDir, "*.json"))
	configFile := filepath.Join(work, "prometheus.yml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(work, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()

	addr := freeLoopbackAddr(t)
	cmd := exec.Command(prometheusBinary,
		"--config.file="+configFile,
		"--storage.tsdb.path="+filepath.Join(work, "data"),
		"--web.listen-address="+addr,
		"--log.level=info",
	)
	cmd.Dir = work
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Should the test binary die without running its cleanups, the kernel
	// kills Prometheus too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", prometheusBinary, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	p := &prometheus{url: "http://" + addr, exited: exited, log: logFile.Name()}
	t.Cleanup(func() {
		// Kill by PID and wait until it is reaped, before t.TempDir's
		// cleanup removes the storage directory it writes to.
		cmd.Process.Kill()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Errorf("prometheus (pid %d) did not exit 30s after SIGKILL", cmd.Process.Pid)
		}
		if t.Failed() {
			p.dumpLog(t)
		}
	})
	return p
}

func (p *prometheus) dumpLog(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Logf("reading the prometheus log: %v", err)
		return
	}
	t.Logf("prometheus log:\n%s", b)
}

// waitForTarget polls the active targets of the dcgm job, once every 250ms
// for at most 60s, until done accepts them, and returns them.
func (p *prometheus) waitForTarget(t *testing.T, what string, done func([]activeTarget) bool) []activeTarget {
	t.Helper()
	const (
		interval = 250 * time.Millisecond
		attempts = 240
	)
	client := &http.Client{Timeout: 5 * time.Second}
	var last []activeTarget
	var lastErr error
	start := time.Now()
	for range attempts {
		select {
		case <-p.exited:
			t.Fatalf("prometheus exited while %s", what)
		default:
		}
		last, lastErr = p.activeTargets(client)
		if lastErr == nil && done(last) {
			t.Logf("prometheus done %s after %v", what, time.Since(start).Round(time.Millisecond))
			return last
		}
		time.Sleep(interval)
	}
	t.Fatalf("prometheus not done %s after %v: last targets %+v, last error %v", what, attempts*interval, last, lastErr)
	return nil
}

func (p *prometheus) activeTargets(client *http.Client) ([]activeTarget, error) {
	resp, err := client.Get(p.url + "/api/v1/targets?state=active")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/targets: %s", resp.Status)
	}
	var body struct {
		Status string `json:"status"`
		Data   struct {
			ActiveTargets []activeTarget `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET /api/v1/targets: %w", err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("GET /api/v1/targets: status %q", body.Status)
	}
	var dcgm []activeTarget
	for _, target := range body.Data.ActiveTargets {
		if target.ScrapePool == "dcgm" {
			dcgm = append(dcgm, target)
		}
	}
	return dcgm, nil
}

// freeLoopbackAddr returns 127.0.0.1:<a port nothing listens on now>.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
}
