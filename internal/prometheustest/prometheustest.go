package prometheustest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"gridweave.dev/internal/childproc"
)

// Binary is where Debian's prometheus package installs the server;
// .ci/run installs the package when it is missing.
const Binary = "/usr/bin/prometheus"

// Target is the part of an entry of /api/v1/targets a test reads.
type Target struct {
	DiscoveredLabels map[string]string `json:"discoveredLabels"`
	Labels           map[string]string `json:"labels"`
	ScrapePool       string            `json:"scrapePool"`
	Health           string            `json:"health"`
}

// Prometheus is a running Prometheus server.
type Prometheus struct {
	URL    string
	exited <-chan struct{}
	log    string
	// scrapes counts the scrapes its proxy refused.
	scrapes atomic.Int32
}

// Start starts Prometheus with one job, "dcgm", that discovers
// targetsDir/*.json every second, and kills it when the test ends. It fails
// the test when Debian's prometheus is not installed.
//
// Network rule: it only discovers, it never scrapes. The scrape interval is
// 1h, so the first scrape almost never falls within the test; should it, it
// goes through a proxy on loopback that refuses it (counted by
// RefusedScrapes), so nothing connects to a target's address.
func Start(t *testing.T, targetsDir string) *Prometheus {
	t.Helper()
	if _, err := os.Stat(Binary); err != nil {
		t.Fatalf("this test runs Debian's Prometheus (%v); .ci/run installs it (apt-get install --no-install-recommends prometheus)", err)
	}
	p := &Prometheus{}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.scrapes.Add(1)
		http.Error(w, "this test's Prometheus must not scrape", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)
	proxyURL := proxy.URL
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
	cmd := exec.Command(Binary,
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
	waited, err := childproc.Start(cmd)
	if err != nil {
		t.Fatalf("starting %s: %v", Binary, err)
	}
	exited := make(chan struct{})
	go func() {
		<-waited
		close(exited)
	}()
	p.URL, p.exited, p.log = "http://"+addr, exited, logFile.Name()
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

func (p *Prometheus) dumpLog(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Logf("reading the prometheus log: %v", err)
		return
	}
	t.Logf("prometheus log:\n%s", b)
}

// RefusedScrapes is how many scrapes the loopback proxy refused.
func (p *Prometheus) RefusedScrapes() int { return int(p.scrapes.Load()) }

// WaitForTargets polls the active targets of the dcgm job, once every 250ms
// for at most 60s, until done accepts them, and returns them.
func (p *Prometheus) WaitForTargets(t *testing.T, what string, done func([]Target) bool) []Target {
	t.Helper()
	const (
		interval = 250 * time.Millisecond
		attempts = 240
	)
	client := &http.Client{Timeout: 5 * time.Second}
	var last []Target
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

func (p *Prometheus) activeTargets(client *http.Client) ([]Target, error) {
	resp, err := client.Get(p.URL + "/api/v1/targets?state=active")
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
			ActiveTargets []Target `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET /api/v1/targets: %w", err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("GET /api/v1/targets: status %q", body.Status)
	}
	var dcgm []Target
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

// HasLabels says whether labels has every name=value of want.
func HasLabels(labels, want map[string]string) bool {
	for name, value := range want {
		if labels[name] != value {
			return false
		}
	}
	return true
}
