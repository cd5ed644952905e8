package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/node/kubeletnode"
	"gridweave.dev/internal/realnode"
	"gridweave.dev/internal/testcluster"
)

// startKubeletMaster starts a master of the kubelet join mode: the
// control plane's kubelet served to machines, the pause and test images
// as the worker image tarball, the deploy files' bindings for the
// bootstrap tokens applied, CoreDNS on its VPN address as the cluster's
// DNS.
func startKubeletMaster(t testing.TB) *master {
	t.Helper()
	images, err := realnode.ImageTarball(context.Background(), "../..")
	if err != nil {
		t.Fatal(err)
	}
	return startKubeletMasterWith(t, "WORKER_IMAGE_TAR="+images, "RAY_IMAGE_WORKER="+realnode.TestImage)
}

// startKubeletMasterWith is startKubeletMaster with env for the worker
// image (WORKER_IMAGE_TAR, RAY_IMAGE_WORKER) and anything else.
func startKubeletMasterWith(t testing.TB, env ...string) *master {
	t.Helper()
	ctx := context.Background()
	root, err := testcluster.DefaultCacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubelet, err := testcluster.EnsureKubelet(ctx, root, nil)
	if err != nil {
		t.Fatal(err)
	}
	applyKubeletRBAC(t, testcluster.Shared(t))
	m := startMasterOpts(t, masterOptions{clusterDNS: true, env: append([]string{
		"KUBE_JOIN_MODE=kubelet", "K3S_URL=", "KUBELET_BINARY=" + kubelet,
		// The test API server's certificate names 127.0.0.1 and
		// kubernetes, not the master's VPN address it is reached at.
		"KUBELET_TLS_SERVER_NAME=kubernetes",
	}, env...)})
	// The machines' pods resolve the cluster's names with CoreDNS on the
	// master's VPN address, through their tunnels.
	m.tc.StartCoreDNS(t, m.vpnIP)
	return m
}

// applyKubeletRBAC applies deploy/kubernetes/kubelet/rbac-kubelet.yaml
// (once per control plane: its names are cluster-wide).
func applyKubeletRBAC(t testing.TB, tc *testcluster.Cluster) {
	t.Helper()
	if err := tc.CreateNamespace(context.Background(), "gridweave-system"); err != nil {
		t.Fatal(err)
	}
	if err := realnode.ApplyKubeletRBAC(context.Background(), tc.Kube); err != nil {
		t.Fatal(err)
	}
}

// newKubeletNode is machine i, with GPUs, able to run a real node.
func (m *master) newKubeletNode(i int, hostname string) *node {
	return m.newKubeletMachine(i, hostname, true)
}

// newKubeletMachine is machine i, with GPUs or not, able to run a real
// node.
func (m *master) newKubeletMachine(i int, hostname string, gpu bool) *node {
	n := m.newNode(i, hostname, gpu)
	n.machine = realnode.Prepare(m.t, n.ns, hostname, m.t.TempDir())
	return n
}

// TestKubeletModeMachinesRunPods: two machines paste the literal join
// command of a kubelet-mode master. Each one's kubelet bootstraps with
// the token made for it and registers its Node, which becomes Ready by
// its own status, gets a pod CIDR from the controller-manager and its
// worker pool from GPU registration, and has the GPU a test device plugin
// advertises to its kubelet. A pod of the test image runs on
// each, at an address of its Node's pod CIDR; one pod reaches the other by
// pod IP across the direct link and, with the link services hub-only,
// across the master; logs and exec reach each kubelet through the API
// server and the tunnel; a node's credential cannot touch the other Node,
// and its bootstrap token's request for the other's name is denied.
// A disconnect drains the Node (a's pod evicted and stopped by its
// kubelet), deletes it and takes the node away (its processes, mounts and
// pod cgroups); the machine joins again. The other leaves by itself
// (join-node --leave): drained, deleted, nothing of its node left.
func TestKubeletModeMachinesRunPods(t *testing.T) {
	if testing.Short() {
		t.Skip("real kubelets and containerd in network namespaces; run make test")
	}
	ctx := context.Background()
	m := startKubeletMaster(t)
	tc := m.tc
	command := m.joinCommand()
	a, b := m.newKubeletNode(61, "kube-a"), m.newKubeletNode(62, "kube-b")
	nodes := []*node{a, b}
	podCIDRs := map[string]netip.Prefix{}
	for _, n := range nodes {
		began := time.Now()
		code, stdout, stderr := n.run(command)
		if code != 0 {
			t.Fatalf("%s: join exit %d: %s %s\nsupervisor: %s", n.hostname, code, stdout, stderr, n.nodeLog("supervisor.log"))
		}
		t.Cleanup(func() {
			if t.Failed() {
				for _, f := range []string{"supervisor.log", "kubelet.log", "containerd.log", "containerd-teardown.log"} {
					t.Logf("%s's %s (tail):\n%s", n.hostname, f, tail(n.nodeLog(f), 4000))
				}
			}
		})
		joinedAt := time.Since(began)
		node := waitNodeReady(t, tc.Kube, n.hostname, 90*time.Second)
		podCIDR := netip.MustParsePrefix(node.Spec.PodCIDR)
		podCIDRs[n.hostname] = podCIDR
		t.Logf("%s: join command %s, Node Ready %s after it began (kubelet %s, %s), pod CIDR %s, pool %q", n.hostname,
			joinedAt.Round(100*time.Millisecond), time.Since(began).Round(100*time.Millisecond), node.Status.NodeInfo.KubeletVersion,
			readyReason(node), podCIDR, node.Labels[fleet.NodePoolLabel])
		if node.Status.NodeInfo.KubeletVersion != testcluster.KubernetesVersion {
			t.Errorf("%s's kubelet is %s, want %s", n.hostname, node.Status.NodeInfo.KubeletVersion, testcluster.KubernetesVersion)
		}
		if !netip.MustParsePrefix(kubeletPodRange).Contains(podCIDR.Addr()) {
			t.Errorf("%s's pod CIDR %s is not the controller-manager's (%s)", n.hostname, podCIDR, kubeletPodRange)
		}
		if node.Labels[fleet.NodePoolLabel] == "" {
			t.Errorf("%s's Node has no worker pool label: %v", n.hostname, node.Labels)
		}
		// The machine's GPU, as a device plugin advertises it to its
		// kubelet, is the Node's capacity.
		n.machine.FakeGPUs(t, 1)
		if err := within(30*time.Second, func() error {
			got, err := tc.Kube.CoreV1().Nodes().Get(ctx, n.hostname, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if q := got.Status.Capacity[realnode.GPUResource]; q.Value() != 1 {
				return fmt.Errorf("%s capacity %v", realnode.GPUResource, got.Status.Capacity)
			}
			return nil
		}); err != nil {
			t.Errorf("%s's Node: %v", n.hostname, err)
		} else {
			t.Logf("%s's Node has %s: 1 (its kubelet's device plugin)", n.hostname, realnode.GPUResource)
		}
		// The owner's drop-in (realnode.SharedDiskDropIn) is merged over
		// the node's configuration: the kubelet runs with its thresholds.
		if hard, transition := kubeletEviction(t, tc, n.hostname); hard["nodefs.available"] != "1Gi" || hard["imagefs.available"] != "1Gi" || transition != "30s" {
			t.Errorf("%s's kubelet evicts at %v, a pressure lasting %q; want the owner's drop-in (nodefs.available and imagefs.available 1Gi, 30s)", n.hostname, hard, transition)
		}
	}

	// The machines reach each other's underlay (a LAN): their links are
	// direct.
	enableForwarding(t, m.device, a.hostLink, b.hostLink)
	a.ns.IP(t, "route", "add", b.underlay.String()+"/32", "via", a.underlay.Prev().String())
	b.ns.IP(t, "route", "add", a.underlay.String()+"/32", "via", b.underlay.Prev().String())
	services := map[string]*linkService{a.hostname: a.serve(), b.hostname: b.serve()}
	m.waitForLinks(linkStates{"kube-a": {"kube-b": api.LinkDirect}, "kube-b": {"kube-a": api.LinkDirect}}, 60*time.Second)

	const ns = "default"
	podIPs := map[string]netip.Addr{}
	for _, n := range nodes {
		began := time.Now()
		// A grace period: an eviction leaves the pod to its kubelet to
		// stop (with none, the API server would delete it at once).
		grace := int64(5)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "podnet-" + n.hostname, Namespace: ns, Labels: map[string]string{"podnet": n.hostname}}, Spec: corev1.PodSpec{
			NodeName:                      n.hostname,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "podnet", Image: realnode.TestImage, Args: []string{"serve", ":8080"},
				ImagePullPolicy: corev1.PullNever}},
		}}
		if _, err := tc.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = tc.Kube.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		})
		ip := waitPodRunning(t, tc.Kube, ns, pod.Name, 90*time.Second)
		podIPs[n.hostname] = ip
		t.Logf("pod %s Running on %s at %s, %s after it was created", pod.Name, n.hostname, ip, time.Since(began).Round(100*time.Millisecond))
		if !podCIDRs[n.hostname].Contains(ip) {
			t.Errorf("pod %s's address %s is not in %s's pod CIDR %s", pod.Name, ip, n.hostname, podCIDRs[n.hostname])
		}
	}

	// Pod to pod by pod IP, over the direct link: kubectl exec through the
	// API server and the tunnel to a's kubelet.
	reach := func(from, to string) {
		t.Helper()
		url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(podIPs[to], 8080))
		var out string
		err := within(30*time.Second, func() (err error) {
			out, err = podExec(tc.Config, tc.Kube, ns, "podnet-"+from, "/podnet", "get", url)
			return err
		})
		if err != nil || !strings.Contains(out, "pod podnet-"+to+" at "+podIPs[to].String()) {
			t.Errorf("exec in podnet-%s: get %s: %q, %v", from, url, out, err)
			return
		}
		t.Logf("podnet-%s (%s) → podnet-%s (%s): %s", from, podIPs[from], to, podIPs[to], strings.TrimSpace(out))
	}
	reach("kube-a", "kube-b")
	reach("kube-b", "kube-a")

	// By name: b's pod behind a headless Service (as KubeRay's head is),
	// which a's pod resolves with the cluster's DNS (CLUSTER_DNS, CoreDNS
	// on the master's VPN address, through a's tunnel).
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "podnet-b", Namespace: ns}, Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"podnet": "kube-b"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 8080}},
	}}
	if _, err := tc.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tc.Kube.CoreV1().Services(ns).Delete(context.Background(), svc.Name, metav1.DeleteOptions{})
	})
	byName := "http://podnet-b." + ns + ".svc." + testcluster.ClusterDomain + ".:8080/"
	var out string
	if err := within(30*time.Second, func() (err error) {
		out, err = podExec(tc.Config, tc.Kube, ns, "podnet-kube-a", "/podnet", "get", byName)
		return err
	}); err != nil || !strings.Contains(out, "pod podnet-kube-b at "+podIPs["kube-b"].String()) {
		t.Errorf("exec in podnet-kube-a: get %s: %q, %v", byName, out, err)
	} else {
		t.Logf("podnet-kube-a → %s (the cluster's DNS through the tunnel): %s", byName, strings.TrimSpace(out))
	}

	// Logs through the API server from b's kubelet: a's request, from a's
	// pod address (no masquerading).
	logs, err := tc.Kube.CoreV1().Pods(ns).GetLogs("podnet-kube-b", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !strings.Contains(string(logs), "podnet: "+podIPs["kube-a"].String()+":") {
		t.Errorf("podnet-kube-b's logs do not show a's request from %s: %q, %v", podIPs["kube-a"], logs, err)
	} else {
		t.Logf("podnet-kube-b's logs:\n%s", strings.TrimSpace(string(logs)))
	}

	// The same across the master: the link services hub-only.
	for _, n := range nodes {
		services[n.hostname].stop()
	}
	services = map[string]*linkService{a.hostname: a.serve("--hub-only"), b.hostname: b.serve("--hub-only")}
	m.waitForLinks(linkStates{"kube-a": {"kube-b": api.LinkRelayed}, "kube-b": {"kube-a": api.LinkRelayed}}, 60*time.Second)
	reach("kube-a", "kube-b")
	reach("kube-b", "kube-a")

	// a's kubelet credential: its own Node, never b's.
	aConfig := kubeletCredential(t, tc, a)
	aClient := kubernetes.NewForConfigOrDie(aConfig)
	if _, err := aClient.CoreV1().Nodes().Get(ctx, "kube-a", metav1.GetOptions{}); err != nil {
		t.Errorf("a's kubelet credential cannot read its own Node: %v", err)
	}
	patch := []byte(`{"metadata":{"labels":{"stolen":"yes"}}}`)
	_, err = aClient.CoreV1().Nodes().Patch(ctx, "kube-b", types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("a's kubelet credential patching b's Node: %v, want 403 Forbidden", err)
	} else {
		t.Logf("a's kubelet credential on b's Node: %v", err)
	}

	// a's bootstrap token asks for b's name: denied.
	theft := csrWithToken(t, tc, a, "kube-b")
	var decision certificatesv1.CertificateSigningRequestCondition
	_ = within(15*time.Second, func() error {
		csr, err := tc.Kube.CertificatesV1().CertificateSigningRequests().Get(ctx, theft, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateApproved {
				decision = c
				return nil
			}
		}
		return fmt.Errorf("not decided")
	})
	if decision.Type != certificatesv1.CertificateDenied {
		t.Errorf("a's bootstrap token asking for b's client certificate: %q, want Denied", decision.Type)
	} else {
		t.Logf("a's bootstrap token asking for system:node:kube-b: denied (%s)", decision.Message)
	}

	// The master disconnects a: its Node goes, and a's link service,
	// refused, takes the node away.
	began := time.Now()
	if status, body := m.api("POST", "/v1/nodes/disconnect", map[string]any{"hostname": "kube-a"}); status != 200 || body["released"] != true {
		t.Fatalf("disconnect: %d %v", status, body)
	}
	// It drained the Node first: a's pod was evicted, and its kubelet
	// stopped it, before the Node went (the pod garbage collector would
	// take tens of seconds more).
	if _, err := tc.Kube.CoreV1().Pods(ns).Get(ctx, "podnet-kube-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a's pod after the disconnect: %v, want it evicted and gone", err)
	} else {
		t.Logf("disconnect of kube-a: its Node drained (pod podnet-kube-a evicted and stopped by its kubelet) and deleted in %s",
			time.Since(began).Round(100*time.Millisecond))
	}
	select {
	case <-services["kube-a"].exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("a's link service outlived its disconnect")
	}
	if _, err := tc.Kube.CoreV1().Nodes().Get(ctx, "kube-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a's Node after the disconnect: %v, want not found", err)
	}
	if left := nodeLeftovers(t, a); len(left) > 0 {
		t.Errorf("a's node left behind: %s", strings.Join(left, "; "))
	}

	// a joins again.
	if code, stdout, stderr := a.run(command); code != 0 {
		t.Fatalf("a joins again: exit %d: %s %s", code, stdout, stderr)
	}
	node := waitNodeReady(t, tc.Kube, "kube-a", 90*time.Second)
	t.Logf("kube-a joined again: Node Ready (%s), pod CIDR %s", readyReason(node), node.Spec.PodCIDR)

	// b leaves by itself: the master drains its Node while its kubelet
	// runs (b's pod evicted and stopped), then the node goes.
	services["kube-b"].stop()
	began = time.Now()
	code, stdout, stderr := b.run("/var/lib/gridweave/join-node --master " + m.url + " --pin " + m.pin.String() + " --leave")
	if code != 0 {
		t.Fatalf("b's --leave: exit %d: %s %s", code, stdout, stderr)
	}
	t.Logf("b's --leave:\n%s%s", stderr, stdout)
	if _, err := tc.Kube.CoreV1().Pods(ns).Get(ctx, "podnet-kube-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("b's pod after its --leave: %v, want it evicted and gone", err)
	}
	if _, err := tc.Kube.CoreV1().Nodes().Get(ctx, "kube-b", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("b's Node after its --leave: %v, want not found", err)
	}
	if left := nodeLeftovers(t, b); len(left) > 0 {
		t.Errorf("b's node left behind after --leave: %s", strings.Join(left, "; "))
	} else {
		t.Logf("kube-b's --leave: Node drained and deleted, containerd, kubelet, pods and files gone, in %s", time.Since(began).Round(100*time.Millisecond))
	}
}

// nodeLog reads a file of the machine's node directory.
func (n *node) nodeLog(name string) string {
	raw, _ := os.ReadFile(filepath.Join(n.dir, "state", "node", name))
	return string(raw)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func waitNodeReady(t testing.TB, kube kubernetes.Interface, name string, limit time.Duration) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	err := within(limit, func() error {
		n, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Spec.PodCIDR == "" {
			return fmt.Errorf("no pod CIDR yet")
		}
		if readyReason(n) != "KubeletReady" {
			return fmt.Errorf("not Ready: %v", n.Status.Conditions)
		}
		node = n
		return nil
	})
	if err != nil {
		t.Fatalf("the Node %s: %v", name, err)
	}
	return node
}

// readyReason is the reason of the Node's Ready condition when it is
// True ("" otherwise): KubeletReady when its kubelet says so.
func readyReason(n *corev1.Node) string {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return c.Reason
		}
	}
	return ""
}

func waitPodRunning(t testing.TB, kube kubernetes.Interface, ns, name string, limit time.Duration) netip.Addr {
	t.Helper()
	var ip netip.Addr
	err := within(limit, func() error {
		p, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("pod %s: %s %q %v", name, p.Status.Phase, p.Status.PodIP, p.Status.Conditions)
		}
		ip, err = netip.ParseAddr(p.Status.PodIP)
		return err
	})
	if err != nil {
		t.Fatalf("the pod: %v", err)
	}
	return ip
}

// podExec runs argv in the pod's first container through the API server
// (which reaches the kubelet), and returns its output.
func podExec(cfg *rest.Config, kube kubernetes.Interface, ns, pod string, argv ...string) (string, error) {
	req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr}); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, stderr.String())
	}
	return stdout.String(), nil
}

// kubeletCredential is the client certificate n's kubelet bootstrapped,
// against the test API server.
func kubeletCredential(t *testing.T, tc *testcluster.Cluster, n *node) *rest.Config {
	t.Helper()
	// kubelet-client-current.pem links to the dated file by its path in
	// the machine.
	pki := filepath.Join(n.dir, "state", "node", "kubelet", "pki")
	target, err := os.Readlink(filepath.Join(pki, "kubelet-client-current.pem"))
	if err != nil {
		t.Fatalf("%s's kubelet has no client certificate: %v", n.hostname, err)
	}
	// Read once: a client given the file reloads it, from a goroutine
	// that outlives the test and its directory.
	pair, err := os.ReadFile(filepath.Join(pki, filepath.Base(target)))
	if err != nil {
		t.Fatalf("%s's kubelet client certificate: %v", n.hostname, err)
	}
	return &rest.Config{Host: tc.Config.Host, TLSClientConfig: rest.TLSClientConfig{CAData: tc.Config.CAData, CAFile: tc.Config.CAFile, CertData: pair, KeyData: pair}}
}

// nodeLeftovers lists what of n's node is still there after it was taken
// away: processes of the node (containerd, its shims, the kubelet, the
// pods'), mounts below its directories, the pods' cgroups.
func nodeLeftovers(t *testing.T, n *node) []string {
	t.Helper()
	var left []string
	pids, err := n.machine.Pids()
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		cmdline := strings.ReplaceAll(strings.TrimRight(string(raw), "\x00"), "\x00", " ")
		for _, what := range []string{"containerd", "kubelet", "podnet", "/pause", "--run-node"} {
			if strings.Contains(cmdline, what) {
				left = append(left, fmt.Sprintf("process %d: %s", pid, cmdline))
				break
			}
		}
	}
	holder := n.machine.Holder(t)
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", holder))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (strings.HasPrefix(f[4], "/var/lib/gridweave/node") || strings.HasPrefix(f[4], "/run/gridweave") || strings.HasPrefix(f[4], "/run/netns/cni-")) {
			left = append(left, "mount "+f[4])
		}
	}
	for _, h := range realnode.Hierarchies {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, n.machine.Cgroup, kubeletnode.CgroupRoot)); err == nil {
			left = append(left, "cgroup "+h+"/"+kubeletnode.CgroupRoot)
		}
	}
	if _, err := os.Stat(filepath.Join(n.dir, "state", "node")); err == nil {
		left = append(left, "the node's directory")
	}
	return left
}

// csrWithToken asks, with n's bootstrap token (from the bootstrap
// kubeconfig its join wrote), for a kubelet client certificate of Node
// name, and returns the request's name.
func csrWithToken(t *testing.T, tc *testcluster.Cluster, n *node, name string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(n.dir, "state", "node", "kubelet", "bootstrap-kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	token := regexp.MustCompile(`token: "([a-z0-9]{6}\.[a-z0-9]{16})"`).FindStringSubmatch(string(raw))
	if token == nil {
		t.Fatalf("no bootstrap token in %s's bootstrap kubeconfig", n.hostname)
	}
	cfg := rest.AnonymousClientConfig(tc.Config)
	cfg.BearerToken = token[1]
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	csr := &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "theft-"}, Spec: certificatesv1.CertificateSigningRequestSpec{
		SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
		Usages: []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}}}
	made, err := kubernetes.NewForConfigOrDie(cfg).CertificatesV1().CertificateSigningRequests().Create(context.Background(), csr, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s's bootstrap token cannot ask for a certificate: %v", n.hostname, err)
	}
	t.Cleanup(func() {
		_ = tc.Kube.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), made.Name, metav1.DeleteOptions{})
	})
	return made.Name
}

// kubeletEviction is the hard eviction thresholds node's kubelet runs
// with, and how long a pressure lasts after it is gone (its /configz,
// through the API server).
func kubeletEviction(t *testing.T, tc *testcluster.Cluster, node string) (hard map[string]string, transition string) {
	t.Helper()
	raw, err := tc.Kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy", "configz").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("%s's /configz: %v", node, err)
	}
	var configz struct {
		KubeletConfig struct {
			EvictionHard                     map[string]string `json:"evictionHard"`
			EvictionPressureTransitionPeriod string            `json:"evictionPressureTransitionPeriod"`
		} `json:"kubeletconfig"`
	}
	if err := json.Unmarshal(raw, &configz); err != nil {
		t.Fatalf("%s's /configz: %v: %s", node, err, raw)
	}
	return configz.KubeletConfig.EvictionHard, configz.KubeletConfig.EvictionPressureTransitionPeriod
}
