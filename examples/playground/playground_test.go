package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gridweave.dev/internal/realnode"
	"gridweave.dev/internal/testcluster"
)

// TestPlaygroundRunsALaunchAndLeavesNothing runs the playground binary as
// a user does, runs `launcher run` of the example bring-up spec against its
// kubeconfig (the RayCluster becomes ready on the kwok GPU nodes), mints a
// join key through its server; as root, a machine joins it with the join
// command it printed and becomes a real node that runs a pod. Then Ctrl-C
// stops it, and no process, machine or cgroup of it is left.
func TestPlaygroundRunsALaunchAndLeavesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane; run make test")
	}
	bin := t.TempDir()
	for _, b := range []struct{ out, pkg string }{{"playground", "."}, {"launcher", "../launcher"}} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, b.out), b.pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v: %s", b.pkg, err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()

	// Other packages' tests may make machines meanwhile: the mountpoints
	// go at make test's leftover check.
	cmd := exec.Command(filepath.Join(bin, "playground"), "--port", strconv.Itoa(port), "--keep-mountpoints")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	// Read the banner up to "playground ready".
	banner := make(chan string, 1)
	go func() {
		var b strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
			if sc.Text() == "playground ready" {
				banner <- b.String()
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	var text string
	select {
	case text = <-banner:
	case err := <-exited:
		stopped = true
		t.Fatalf("the playground exited before it was ready: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Minute):
		t.Fatalf("the playground was not ready after 30 minutes:\n%s", stderr.String())
	}
	field := func(name string) string {
		m := regexp.MustCompile(`(?m)^\s+` + name + `:\s+(\S+)`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("the banner has no %s:\n%s", name, text)
		}
		return m[1]
	}
	kubeconfig, adminToken := field("kubeconfig"), field("admin token")
	id := regexp.MustCompile(`Cluster id ([0-9a-f]+)\.`).FindStringSubmatch(text)
	if id == nil {
		t.Fatalf("the banner names no cluster id:\n%s", text)
	}

	launcher := exec.Command(filepath.Join(bin, "launcher"), "--kubeconfig", kubeconfig, "run",
		"../launcher/specs/grpo_swe.recipe.yaml", "../launcher/specs/grpo_swe_sglang.infra.yaml", "-n", "playground", "--timeout", "3m")
	out, err := launcher.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "RayCluster playground/grpo-swe is running") {
		t.Fatalf("launcher run in the playground: %v\n%s", err, out)
	}

	req, _ := http.NewRequest("POST", "http://127.0.0.1:"+strconv.Itoa(port)+"/v1/nodes/join-keys", strings.NewReader(`{"kind":"org","org":"acme","ttl_seconds":600}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || !strings.Contains(string(body), `"join_command"`) {
		t.Fatalf("mint in the playground: %d %s", resp.StatusCode, body)
	}
	// The join command's download: the playground serves the agents.
	for _, arch := range []string{"amd64", "arm64"} {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/v1/nodes/agent/linux/" + arch)
		if err != nil {
			t.Fatal(err)
		}
		agent, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.HasPrefix(agent, []byte("\x7fELF")) {
			t.Errorf("the playground's %s agent: %d, %d bytes", arch, resp.StatusCode, len(agent))
		}
	}

	// As root, a machine on this host joins the playground with the join
	// command it printed: over its veth, through a real tunnel.
	if os.Geteuid() == 0 {
		if !strings.Contains(text, "join command: d=$(mktemp -d) && curl -fsSL http://198.18.250.1:"+strconv.Itoa(port)+"/join-node.sh") {
			t.Errorf("the banner gives no join command for machines:\n%s", text)
		}
		out, err := exec.Command(filepath.Join(bin, "playground"), "machine").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "machine-1 joined") {
			t.Fatalf("playground machine: %v\n%s", err, out)
		}
		t.Logf("playground machine:\n%s", out)
		// 198.18.128.0/18, the playground's pod range: 198.18.128-191.
		const podRange = `198\.18\.(12[89]|1[3-8]\d|19[01])`
		// A real node: its kubelet's Node Ready, a pod of the test image
		// Running on it at an address of the playground's pod range, its
		// page fetched from the master through the tunnel.
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`Node machine-1 Ready .*: kubelet ` + regexp.QuoteMeta(testcluster.KubernetesVersion) + `, container runtime containerd://\S+, pod CIDR ` + podRange + `\.0/24`),
			regexp.MustCompile(`pod default/hello-machine-1 \(image gridweave\.dev/podnet:test\) Running on machine-1 at ` + podRange + `\.\d+`),
			regexp.MustCompile(`GET http://` + podRange + `\.\d+:8080/ from the master, through the tunnel: pod hello-machine-1 at ` + podRange + `\.\d+`),
		} {
			if !want.Match(out) {
				t.Errorf("playground machine's output does not match %s", want)
			}
		}
		req, _ := http.NewRequest("GET", "http://127.0.0.1:"+strconv.Itoa(port)+"/v1/nodes/machine-1", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		node, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(node), `"status":"registered"`) || !strings.Contains(string(node), `"vpn_ip":"198.19.250.`) {
			t.Errorf("the machine in the ledger: %d %s", resp.StatusCode, node)
		}
		// Its tunnel carries traffic: the machine reaches the master's
		// VPN address (the VPN listener answers /healthz there).
		health := exec.Command("ip", "netns", "exec", "gwpg-m1", "curl", "-fsS", "--max-time", "10", "http://198.19.250.1:"+vpnPort(t, text)+"/healthz")
		if out, err := health.CombinedOutput(); err != nil || !strings.Contains(string(out), `"status":"ok"`) {
			t.Errorf("the master's VPN listener through the machine's tunnel: %v: %s", err, out)
		}
	}

	_ = cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("the playground's exit after Ctrl-C: %v\n%s", err, stderr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the playground did not stop 2 minutes after Ctrl-C:\n%s", stderr.String())
	}
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), "gwpg-m") {
		t.Errorf("machines left after the playground stopped: %s", out)
	}
	if left, err := testcluster.Leftovers(id[1]); err != nil || len(left) > 0 {
		t.Errorf("processes left after the playground stopped: %v %v", left, err)
	}
	// Its machines' cgroups (other packages' machines may be running).
	left, err := realnode.Leftovers()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range left {
		if strings.HasPrefix(filepath.Base(c), "gw-pg-") {
			t.Errorf("a machine's cgroup left after the playground stopped: %s", c)
		}
	}
	if _, err := os.Stat(machinesDir); !os.IsNotExist(err) {
		t.Errorf("the machines' directory %s is still there: %v", machinesDir, err)
	}
	if _, err := os.Stat(filepath.Dir(kubeconfig)); !os.IsNotExist(err) {
		t.Errorf("the playground's temporary directory %s is still there: %v", filepath.Dir(kubeconfig), err)
	}
}

// vpnPort is the port of the playground's VPN listener, from its banner.
func vpnPort(t *testing.T, banner string) string {
	t.Helper()
	m := regexp.MustCompile(`VPN listener: http://198\.19\.250\.1:(\d+)`).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("the banner names no VPN listener:\n%s", banner)
	}
	return m[1]
}
