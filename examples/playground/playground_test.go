package main

import (
	"bufio"
	"bytes"
	"encoding/json"
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
		runHelloPods(t, filepath.Join(bin, "launcher"), kubeconfig, text)
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
	if left, err := realnode.LeftoversOf("pg-"); err != nil || len(left) > 0 {
		t.Errorf("machines' cgroups left after the playground stopped: %v %v", left, err)
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

// runHelloPods runs the banner's Ray launch on the joined machine as a
// user does (launcher run, status, job logs): KubeRay's head and worker pods
// run there, on the Ray images the master served, and the job's task
// prints the name of the worker pod it ran on.
func runHelloPods(t *testing.T, launcher, kubeconfig, banner string) {
	t.Helper()
	const recipe, infra = "examples/launcher/specs/hello_pods.recipe.yaml", "examples/launcher/specs/hello_pods.infra.yaml"
	// The banner and the README give the commands this runs.
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, command := range []string{"run    " + recipe + " " + infra, "status hello-pods -n playground", "job logs --cluster hello-pods -n playground"} {
		line := "go run ./examples/launcher " + command + "\n"
		if !strings.Contains(banner, line) {
			t.Errorf("the banner does not say: %s%s", line, banner)
		}
		if !strings.Contains(string(readme), line) {
			t.Errorf("README.md does not say: %s", line)
		}
	}
	launch := func(args ...string) ([]byte, error) {
		return exec.Command(launcher, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	}
	began := time.Now()
	out, err := launch("run", "../../"+recipe, "../../"+infra, "--timeout", "5m")
	if err != nil || !strings.Contains(string(out), "RayJob playground/hello-pods is running") {
		t.Fatalf("launcher run hello_pods: %v\n%s", err, out)
	}
	// The job's pods, as launcher status shows them, until it succeeds.
	type podSeen struct{ fleet, node, phase string }
	seen := map[string]podSeen{}
	var status struct {
		Job *struct {
			JobStatus, DeploymentStatus string
		} `json:"job"`
		Fleets []struct {
			Fleet string                               `json:"fleet"`
			Pods  []struct{ Name, Phase, Node string } `json:"pods"`
		} `json:"fleets"`
	}
	var last []byte
	for deadline := time.Now().Add(6 * time.Minute); ; time.Sleep(2 * time.Second) {
		if last, err = launch("status", "hello-pods", "-n", "playground", "-o", "json"); err == nil && json.Unmarshal(last, &status) == nil {
			for _, f := range status.Fleets {
				for _, p := range f.Pods {
					if seen[p.Name].phase != "Running" {
						seen[p.Name] = podSeen{f.Fleet, p.Node, p.Phase}
					}
				}
			}
			if status.Job != nil && (status.Job.JobStatus == "SUCCEEDED" || status.Job.DeploymentStatus == "Failed") {
				break
			}
		}
		if time.Now().After(deadline) {
			break
		}
	}
	if status.Job == nil || status.Job.JobStatus != "SUCCEEDED" {
		logs, _ := launch("logs", "hello-pods", "-n", "playground")
		t.Fatalf("the hello-pods job did not succeed: %v\n%s\npods seen: %v\nlogs:\n%s", err, last, seen, logs)
	}
	logs, err := launch("job", "logs", "--cluster", "hello-pods", "-n", "playground")
	ran := regexp.MustCompile(`RAN ON (hello-pods-\S+-trainer-worker-\S+)`).FindSubmatch(logs)
	if err != nil || ran == nil {
		t.Fatalf("launcher job logs --cluster hello-pods: %v; no task's line:\n%s", err, logs)
	}
	worker := string(ran[1])
	for _, fleet := range []string{"head", "trainer"} {
		found := false
		for name, p := range seen {
			if p.fleet == fleet {
				found = true
				if p.node != "machine-1" || p.phase != "Running" {
					t.Errorf("the %s pod %s: %s on %q, want Running on machine-1", fleet, name, p.phase, p.node)
				}
			}
		}
		if !found {
			t.Errorf("launcher status never showed a %s pod: %v", fleet, seen)
		}
	}
	if p := seen[worker]; p.fleet != "trainer" || p.node != "machine-1" {
		t.Errorf("the task ran on %s, which launcher status showed as %+v, not a trainer pod on machine-1", worker, p)
	}
	t.Logf("hello-pods SUCCEEDED %s after launcher run began; pods %v; the job's log: %s", time.Since(began).Round(100*time.Millisecond), seen, ran[0])
}
