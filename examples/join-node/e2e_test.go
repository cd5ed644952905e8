package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/internal/prometheustest"
	"gridweave.dev/mesh/wgkey"
)

var joinedLine = regexp.MustCompile(`joined as (\S+) with VPN address (\S+); (\d+) GPUs; Ray worker group (\S+)`)

// joined parses the agent's last line.
func joined(t testing.TB, stdout string) (vpnIP netip.Addr, group string) {
	t.Helper()
	m := joinedLine.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("the join command did not say it joined: %q", stdout)
	}
	return netip.MustParseAddr(m[2]), m[4]
}

// TestOneCommandJoinsAMachine runs the mint response's join_command, as a
// person pastes it, on a machine (a network namespace behind a veth pair)
// and follows the node through its life: joined over real WireGuard
// (wireguard-go on both ends), a Ray worker with its GPU on the real
// control plane with the real KubeRay operator, a DCGM target a real
// Prometheus discovers; re-run, refused look-alikes, a master restart, and
// a disconnect that leaves nothing behind.
func TestOneCommandJoinsAMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces, wireguard-go and the test control plane; run make test")
	}
	ctx := context.Background()
	m := startMaster(t)
	prom := prometheustest.Start(t, m.targets)
	echoServer(t, nil, netip.AddrPortFrom(m.vpnIP, 7777).String())
	toMaster := netip.AddrPortFrom(m.vpnIP, 7777).String()

	// 1. The agent joins; the tunnel carries traffic both ways.
	gpuNode := m.newNode(1, "gpu-e2e", true)
	command := m.joinCommand()
	if !strings.HasPrefix(command, `d=$(mktemp -d) && curl -fsSL --pinnedpubkey `+m.pin.String()+" -k "+m.url+`/join-node.sh -o "$d/join-node.sh" && sudo MASTER_IP=`+masterUnderIP+" MASTER_PIN="+m.pin.String()+` bash "$d/join-node.sh" `) {
		t.Fatalf("join_command %q", command)
	}
	started := time.Now()
	code, stdout, stderr := gpuNode.run(command)
	tookToRegistered := time.Since(started)
	if code != 0 {
		t.Fatalf("the join command failed (%d):\n%s\n%s", code, stdout, stderr)
	}
	t.Logf("from running the command to a registered node: %s", tookToRegistered.Round(time.Millisecond))
	vpnIP, group := joined(t, stdout)
	if !m.vpnPrefix.Contains(vpnIP) || group == "none" {
		t.Fatalf("joined with %s, group %s", vpnIP, group)
	}
	if err := within(10*time.Second, func() error { return gpuNode.echo(toMaster) }); err != nil {
		t.Fatalf("the master's VPN address does not answer through the tunnel: %v", err)
	}
	// Validate went to the public listener (HTTPS, pinned); everything
	// after it, through the tunnel to the VPN listener.
	for route, from := range map[string]string{"POST /v1/nodes/validate": "198.18.241.6", "POST /v1/nodes/register": vpnIP.String(), "POST /v1/nodes/report-version": vpnIP.String()} {
		if callers := m.callersOf(route); len(callers) != 1 || callers[0] != from {
			t.Errorf("%s came from %v, want once from %s", route, callers, from)
		}
	}
	// k3s registers the Node under the hostname with the mark of the
	// node's key: the master touches no other Node.
	_, listed := m.api("GET", "/v1/nodes/gpu-e2e", nil)
	pub, err := wgkey.Parse(fmt.Sprint(listed["node"].(map[string]any)["public_key"]))
	if err != nil {
		t.Fatalf("the node's public key: %v (%v)", err, listed)
	}
	wantArgs := strings.Join([]string{"https://" + m.vpnIP.String() + ":6443", vpnIP.String(), "gridweave0", "gpu-e2e", fleet.MarkLabel + "=" + e2eMarks(t).Mark(pub)}, "\n")
	// k3s starts in the background (the join command does not wait for
	// it), so its record may come a moment after the command returned.
	if err := within(30*time.Second, func() error {
		if args := gpuNode.record(recordK3sArgs); args != wantArgs {
			return fmt.Errorf("the k3s agent step ran with %q, want %q", args, wantArgs)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if imports := gpuNode.record(recordImports); imports != m.imageSum+"\n" {
		t.Errorf("worker image imports %q, want one of %s", imports, m.imageSum)
	}
	// The pod CIDR k3s gave the node: its route goes into the tunnel.
	podAddr := netip.AddrPortFrom(gpuNode.podCIDR.Addr().Next(), 7778).String()
	gpuNode.ns.IP(t, "address", "add", gpuNode.podCIDR.Addr().Next().String()+"/32", "dev", "lo")
	echoServer(t, gpuNode.ns, podAddr)
	if err := within(30*time.Second, func() error { return echoIn(nil, podAddr) }); err != nil {
		t.Fatalf("an address of the node's pod CIDR %s does not answer from the master (route %q): %v", gpuNode.podCIDR, m.route(gpuNode.podCIDR.String()), err)
	}
	// The route carried traffic a moment ago: a first answer without it is
	// logged with the whole table, and it is asked for until it shows (only
	// the server puts it back).
	missed := false
	if err := within(10*time.Second, func() error {
		if route := m.route(gpuNode.podCIDR.String()); !strings.Contains(route, "dev "+m.device) {
			if !missed {
				all, _ := exec.Command("ip", "route", "show", "table", "all").CombinedOutput()
				t.Logf("the pod CIDR's route is %q; every route:\n%s", route, all)
				missed = true
			}
			return fmt.Errorf("the pod CIDR's route is %q, want one into %s", route, m.device)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}

	// 2. A worker of its group runs on the node with its GPU.
	selector := "ray.io/group=" + group
	var worker corev1.Pod
	if err := within(120*time.Second, func() error {
		pods, err := m.tc.Kube.CoreV1().Pods(m.namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "gpu-e2e" && p.Status.Phase == corev1.PodRunning {
				worker = p
				return nil
			}
		}
		return fmt.Errorf("%d pods of group %s, none running on gpu-e2e", len(pods.Items), group)
	}); err != nil {
		t.Fatal(err)
	}
	if gpus := worker.Spec.Containers[0].Resources.Limits.Name("nvidia.com/gpu", resource.DecimalSI).Value(); gpus != 1 {
		t.Errorf("the worker's GPU limit is %d, want 1", gpus)
	}
	if c := worker.Spec.Containers[0]; c.Image != e2eImageName || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("the worker runs %s with pull policy %s, want the imported %s, IfNotPresent", c.Image, c.ImagePullPolicy, e2eImageName)
	}

	// 3. Its DCGM target: the file, and Prometheus lists it.
	target := filepath.Join(m.targets, "gpu-e2e.json")
	raw, err := os.ReadFile(target)
	if err != nil || !strings.Contains(string(raw), vpnIP.String()+":9400") {
		t.Fatalf("the DCGM target file: %s, %v", raw, err)
	}
	want := map[string]string{"node": "gpu-e2e", "hostname": "gpu-e2e", "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": "1"}
	prom.WaitForTargets(t, "listing the node's DCGM target", func(ts []prometheustest.Target) bool {
		return len(ts) == 1 && ts[0].DiscoveredLabels["__address__"] == vpnIP.String()+":9400" && prometheustest.HasLabels(ts[0].Labels, want)
	})

	// 4. The same command again changes nothing.
	peersBefore := peerSet(m)
	rc, err := m.tc.Ray.RayV1().RayClusters(m.namespace).Get(ctx, "gridweave-cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = gpuNode.run(command)
	if code != 0 {
		t.Fatalf("the command, run again, failed (%d):\n%s\n%s", code, stdout, stderr)
	}
	if again, groupAgain := joined(t, stdout); again != vpnIP || groupAgain != group {
		t.Errorf("run again: %s in %s, was %s in %s", again, groupAgain, vpnIP, group)
	}
	if after := peerSet(m); after != peersBefore {
		t.Errorf("the master's peers changed on a re-run:\n%s\n%s", peersBefore, after)
	}
	if rc2, _ := m.tc.Ray.RayV1().RayClusters(m.namespace).Get(ctx, "gridweave-cluster", metav1.GetOptions{}); rc2 == nil || rc2.Generation != rc.Generation {
		t.Errorf("the RayCluster's spec changed on a re-run")
	}
	if raw2, _ := os.ReadFile(target); string(raw2) != string(raw) {
		t.Errorf("the DCGM target changed on a re-run: %s", raw2)
	}
	if imports := gpuNode.record(recordImports); imports != m.imageSum+"\n" {
		t.Errorf("the worker image was imported again: %q", imports)
	}

	// 5. Another machine under the same name: 409, the first keeps working.
	twin := m.newNode(2, "gpu-e2e", true)
	code, stdout, stderr = twin.run(m.joinCommand())
	if code == 0 || !strings.Contains(stderr, "409") {
		t.Errorf("a second machine named gpu-e2e: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if err := gpuNode.echo(toMaster); err != nil {
		t.Errorf("the first node's tunnel after the look-alike: %v", err)
	}
	// An agent a major version ahead: 426, and no peer.
	ahead := m.newNode(3, "gpu-ahead", false)
	key := keyOf(t, m.joinCommand())
	code, _, stderr = ahead.run(fmt.Sprintf("GRIDWEAVE_JOIN_KEY=%s %s --master %s --pin %s --state-dir /var/lib/gridweave", key, e2eBinaries.future, m.url, m.pin))
	if code == 0 || !strings.Contains(stderr, "426") || !strings.Contains(stderr, "run the join command again") {
		t.Errorf("an agent a major version ahead: exit %d: %s", code, stderr)
	}
	// A machine whose agent is a major version behind the master's (the
	// master was upgraded): 426, naming the command that updates it; that
	// command (the join command again) replaces the agent with the
	// master's and joins with the machine's identity and address.
	behind := m.newNode(6, "cpu-behind", false)
	code, stdout, stderr = behind.run(m.joinCommand())
	if code != 0 {
		t.Fatalf("the first join of cpu-behind (%d):\n%s\n%s", code, stdout, stderr)
	}
	firstIP, _ := joined(t, stdout)
	code, _, stderr = behind.run(fmt.Sprintf("%s --master %s --pin %s --state-dir /var/lib/gridweave --k3s-command ''", e2eBinaries.past, m.url, m.pin))
	if code == 0 || !strings.Contains(stderr, "426") || !strings.Contains(stderr, "run the join command again") {
		t.Errorf("an agent a major version behind: exit %d: %s", code, stderr)
	}
	code, stdout, stderr = behind.run(m.joinCommand())
	if code != 0 {
		t.Fatalf("the join command run again to update (%d):\n%s\n%s", code, stdout, stderr)
	}
	if again, _ := joined(t, stdout); again != firstIP {
		t.Errorf("after the update cpu-behind has %s, before %s", again, firstIP)
	}
	if _, node := m.api("GET", "/v1/nodes/cpu-behind", nil); node["node"].(map[string]any)["version"] != e2eVersion {
		t.Errorf("after the update the master records version %v, want %s", node["node"].(map[string]any)["version"], e2eVersion)
	}
	if status, _ := m.api("POST", "/v1/nodes/disconnect", map[string]any{"hostname": "cpu-behind"}); status != 200 {
		t.Errorf("disconnect cpu-behind: %d", status)
	}
	peersBefore = peerSet(m)

	// A man in the middle at the master's address, with a certificate of
	// its own: the pinned join command fetches nothing through it, so
	// nothing runs and nothing is written on either side.
	victim := m.newNode(5, "gpu-victim", true)
	relayed := victim.manInTheMiddle(m.port())
	code, stdout, stderr = victim.run(m.joinCommand())
	if code == 0 || relayed.Load() != 0 {
		t.Errorf("the join command through a man in the middle: exit %d, %d requests relayed\n%s\n%s", code, relayed.Load(), stdout, stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(victim.dir, "state")); len(entries) != 0 {
		t.Errorf("the machine behind the man in the middle has state: %v", entries)
	}
	if status, _ := m.api("GET", "/v1/nodes/gpu-victim", nil); status != 404 {
		t.Errorf("the master knows the machine behind the man in the middle: %d", status)
	}
	if after := peerSet(m); after != peersBefore {
		t.Errorf("the refused machines changed the master's peers:\n%s\n%s", peersBefore, after)
	}

	// 6. The master restarts: its WireGuard device, which the server
	// made, goes with it (and its routes); the server makes it again
	// and rebuilds the mesh from the ledger.
	m.stop()
	if _, err := net.InterfaceByName(m.device); err == nil || m.route(gpuNode.podCIDR.String()) != "" {
		t.Fatalf("the server's device or the pod CIDR route outlived the server (%v)", err)
	}
	m.start()
	if err := within(60*time.Second, func() error { return gpuNode.echo(toMaster) }); err != nil {
		t.Fatalf("the tunnel after the master restarted: %v", err)
	}
	if err := within(10*time.Second, func() error { return echoIn(nil, podAddr) }); err != nil {
		t.Fatalf("the pod CIDR route after the master restarted (%q): %v", m.route(gpuNode.podCIDR.String()), err)
	}

	// 7. Disconnect: nothing of the node stays on the master.
	if status, body := m.api("POST", "/v1/nodes/disconnect", map[string]any{"hostname": "gpu-e2e"}); status != 200 || body["released"] != true {
		t.Fatalf("disconnect: %d %v", status, body)
	}
	if peers := m.peers(); len(peers) != 0 {
		t.Errorf("the master's device still has %d peers", len(peers))
	}
	if err := gpuNode.echo(toMaster); err == nil {
		t.Error("the tunnel still carries traffic after disconnect")
	}
	if route := m.route(gpuNode.podCIDR.String()); route != "" {
		t.Errorf("the pod CIDR route survived: %s", route)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the DCGM target file survived: %v", err)
	}
	prom.WaitForTargets(t, "dropping the node's target", func(ts []prometheustest.Target) bool { return len(ts) == 0 })
	if _, err := m.tc.Kube.CoreV1().Nodes().Get(ctx, "gpu-e2e", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Kubernetes Node survived: %v", err)
	}
	rc, err = m.tc.Ray.RayV1().RayClusters(m.namespace).Get(ctx, "gridweave-cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rc.Spec.WorkerGroupSpecs {
		if g.GroupName == group {
			t.Errorf("the worker group %s survived", group)
		}
	}
	if status, _ := m.api("GET", "/v1/nodes/gpu-e2e", nil); status != 404 {
		t.Errorf("the ledger still has gpu-e2e: %d", status)
	}
	// A new machine can now take the name (and the address is free).
	successor := m.newNode(4, "gpu-e2e", true)
	successorCommand := m.joinCommand()
	code, stdout, stderr = successor.run(successorCommand)
	successorOutput := stdout + stderr
	if code != 0 {
		t.Fatalf("a new machine named gpu-e2e after the disconnect (%d):\n%s\n%s", code, stdout, stderr)
	}
	newIP, _ := joined(t, stdout)
	if err := within(10*time.Second, func() error { return successor.echo(toMaster) }); err != nil {
		t.Errorf("the successor's tunnel: %v", err)
	}
	t.Logf("the successor joined as gpu-e2e with %s (the first machine had %s)", newIP, vpnIP)

	// The successor leaves by itself: join-node.sh --leave.
	state, _ := os.ReadFile(filepath.Join(successor.dir, "state", "identity.json"))
	var identity struct {
		PrivateKey string `json:"private_key"`
		NodeToken  string `json:"node_token"`
	}
	if err := json.Unmarshal(state, &identity); err != nil || identity.NodeToken == "" {
		t.Fatalf("the successor's identity: %s, %v", state, err)
	}
	// The join command's script went to a private directory of its own;
	// the machine fetches it again, pinned, to leave.
	code, stdout, stderr = successor.run("curl -fsSL --pinnedpubkey " + m.pin.String() + " -k " + m.url + "/join-node.sh -o join-node.sh && sudo MASTER_IP=" + masterUnderIP + " MASTER_PIN=" + m.pin.String() + " bash join-node.sh --leave")
	if code != 0 {
		t.Fatalf("join-node.sh --leave (%d):\n%s\n%s", code, stdout, stderr)
	}
	if peers := m.peers(); len(peers) != 0 {
		t.Errorf("the master still has %d peers after the node left", len(peers))
	}
	if status, _ := m.api("GET", "/v1/nodes/gpu-e2e", nil); status != 404 {
		t.Errorf("the ledger still has gpu-e2e after it left: %d", status)
	}
	if err := successor.ns.Command("ip", "link", "show", "gridweave0").Run(); err == nil {
		t.Error("the node's WireGuard device survived --leave")
	}
	// Nothing secret stays on the machine: not the node token, the
	// private key, the join key or the k3s agent token; and the agent
	// printed none of them.
	secrets := map[string]string{"node token": identity.NodeToken, "private key": identity.PrivateKey, "join key": keyOf(t, successorCommand), "k3s agent token": e2eK3sToken}
	// (bin and records are the test's stand-ins, not the machine's own.)
	_ = filepath.WalkDir(successor.dir, func(path string, d os.DirEntry, err error) error {
		if d != nil && d.IsDir() && (d.Name() == "bin" || d.Name() == "records") {
			return filepath.SkipDir
		}
		if err != nil || d.IsDir() || d.Type()&os.ModeSymlink != 0 || strings.HasPrefix(filepath.Base(path), "join-node.sh") {
			return nil
		}
		raw, _ := os.ReadFile(path)
		for what, secret := range secrets {
			if strings.Contains(string(raw), secret) {
				t.Errorf("%s still holds the %s after --leave", path, what)
			}
		}
		return nil
	})
	for what, secret := range secrets {
		if what != "join key" && (strings.Contains(successorOutput, secret) || strings.Contains(stdout+stderr, secret)) {
			t.Errorf("the agent printed the %s", what)
		}
	}
}

// TestTwentyMachinesJoinAtOnce runs the join command on 20 machines at
// the same time: 20 distinct addresses, every tunnel up.
func TestTwentyMachinesJoinAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces, wireguard-go and the test control plane; run make test")
	}
	m := startMaster(t)
	echoServer(t, nil, netip.AddrPortFrom(m.vpnIP, 7777).String())
	const machines = 20
	nodes := make([]*node, machines)
	for i := range nodes {
		nodes[i] = m.newNode(10+i, fmt.Sprintf("cpu-%02d", i), false)
	}
	command := m.joinCommand()
	type outcome struct {
		ip     netip.Addr
		took   time.Duration
		code   int
		output string
	}
	results := make([]outcome, machines)
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() {
			start := time.Now()
			code, stdout, stderr := n.run(command)
			results[i] = outcome{took: time.Since(start), code: code, output: stdout + stderr}
			if m := joinedLine.FindStringSubmatch(stdout); m != nil {
				results[i].ip, _ = netip.ParseAddr(m[2])
			}
		})
	}
	wg.Wait()
	seen := map[netip.Addr]string{}
	var slowest time.Duration
	for i, r := range results {
		if r.code != 0 || !r.ip.IsValid() {
			t.Errorf("%s: exit %d: %s", nodes[i].hostname, r.code, r.output)
			continue
		}
		if other, dup := seen[r.ip]; dup {
			t.Errorf("%s and %s both got %s", other, nodes[i].hostname, r.ip)
		}
		seen[r.ip] = nodes[i].hostname
		slowest = max(slowest, r.took)
	}
	t.Logf("20 machines at once: the slowest took %s from the command to a registered node", slowest.Round(time.Millisecond))
	for _, n := range nodes {
		if err := within(10*time.Second, func() error { return n.echo(netip.AddrPortFrom(m.vpnIP, 7777).String()) }); err != nil {
			t.Errorf("%s: no traffic through its tunnel: %v", n.hostname, err)
		}
	}
	if peers := m.peers(); len(peers) != machines {
		t.Errorf("the master's device has %d peers, want %d", len(peers), machines)
	}
}

// peerSet is the master's peers as text, to compare.
func peerSet(m *master) string {
	var lines []string
	for _, p := range m.peers() {
		var ips []string
		for _, a := range p.AllowedIPs {
			ips = append(ips, a.String())
		}
		lines = append(lines, p.PublicKey.String()+" "+strings.Join(ips, ","))
	}
	slices.Sort(lines)
	raw, _ := json.Marshal(lines)
	return string(raw)
}

// keyOf is the join key at the end of a join command.
func keyOf(t *testing.T, command string) string {
	t.Helper()
	fields := strings.Fields(command)
	return fields[len(fields)-1]
}

// TestDeployedAsDocumented follows docs/deploy.md's systemd path: the static
// binary of make server-static, started as the unit starts it (no
// arguments, the example server.env and the unit's Environment=, secrets
// filled in, addresses moved to test ones), with no WireGuard device made
// for it, no AGENT_DIR and no ip on its PATH. A machine pastes the join
// command and joins to the end: the agent built into the server, the
// tunnel both ways, its pod CIDR routed, its worker pod Running, its DCGM
// target written.
func TestDeployedAsDocumented(t *testing.T) {
	if testing.Short() {
		t.Skip("the static server, network namespaces and the test control plane; run make test")
	}
	ctx := context.Background()
	m := startMasterWith(t, true)
	for _, says := range []string{"join agents: built into this binary", `"msg":"mesh: WireGuard device"`, "tls: public listener serves HTTPS"} {
		if !strings.Contains(m.logs(), says) {
			t.Errorf("the deployed server's log does not say %q:\n%s", says, m.logs())
		}
	}
	toMaster := netip.AddrPortFrom(m.vpnIP, 7777).String()
	echoServer(t, nil, toMaster)
	n := m.newNode(30, "gpu-deployed", true)
	code, stdout, stderr := n.run(m.joinCommand())
	if code != 0 {
		t.Fatalf("the join command against the deployed server (%d):\n%s\n%s", code, stdout, stderr)
	}
	vpnIP, group := joined(t, stdout)
	if err := within(10*time.Second, func() error { return n.echo(toMaster) }); err != nil {
		t.Fatalf("the tunnel to the deployed master: %v", err)
	}
	podAddr := netip.AddrPortFrom(n.podCIDR.Addr().Next(), 7778).String()
	n.ns.IP(t, "address", "add", n.podCIDR.Addr().Next().String()+"/32", "dev", "lo")
	echoServer(t, n.ns, podAddr)
	if err := within(30*time.Second, func() error { return echoIn(nil, podAddr) }); err != nil {
		t.Fatalf("the node's pod CIDR from the deployed master (route %q): %v", m.route(n.podCIDR.String()), err)
	}
	if err := within(120*time.Second, func() error {
		pods, err := m.tc.Kube.CoreV1().Pods(m.namespace).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/group=" + group})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName == "gpu-deployed" && p.Status.Phase == corev1.PodRunning {
				return nil
			}
		}
		return fmt.Errorf("%d pods of group %s, none running on gpu-deployed", len(pods.Items), group)
	}); err != nil {
		t.Fatal(err)
	}
	if raw, err := os.ReadFile(filepath.Join(m.targets, "gpu-deployed.json")); err != nil || !strings.Contains(string(raw), vpnIP.String()+":9400") {
		t.Errorf("the DCGM target: %s, %v", raw, err)
	}
}
