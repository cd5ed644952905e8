package realnode_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"gridweave.dev/gridweave/node/kubeletnode"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/realnode"
	"gridweave.dev/internal/testcluster"
)

// clusterCIDR is the pod range the test control plane allocates Nodes'
// pod CIDRs from.
const clusterCIDR = "198.18.96.0/19"

func TestMain(m *testing.M) {
	os.Exit(testcluster.RunMainWith(m, testcluster.Options{ClusterCIDR: clusterCIDR}))
}

// forward relays TCP connections from listen to target until the test
// ends.
func forward(t *testing.T, listen, target string) {
	t.Helper()
	l, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				d, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer d.Close()
				go func() { _, _ = io.Copy(d, c) }()
				_, _ = io.Copy(c, d)
			}()
		}
	}()
}

// testNode is a machine of a test, its kubelet's Node Ready.
type testNode struct {
	m       *realnode.Machine
	cfg     kubeletnode.Config
	node    *corev1.Node
	podCIDR netip.Prefix
	logs    string
}

// startNode makes a machine namespace linked to the host (the host side
// hostAddr, the machine machineAddr, a /30 of 198.18.0.0/15) that runs
// containerd and the kubelet with a system:node credential, imports the
// pause and test images, and waits until its Node has a pod CIDR from the
// controller-manager and is Ready by its kubelet's own status. With
// clusterDNS, the machine runs CoreDNS for the cluster's Services on its
// own address, and its pods resolve with it.
func startNode(t *testing.T, tc *testcluster.Cluster, name, hostAddr, machineAddr string, clusterDNS bool) *testNode {
	t.Helper()
	ctx := context.Background()
	kubelet, err := testcluster.EnsureKubelet(ctx, mustCacheRoot(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := netnstest.New(t, "gwrn")
	netnstest.LinkToHost(t, hostAddr+"/30", ns, machineAddr+"/30")
	api, _ := url.Parse(tc.Config.Host)
	apiServer := "https://" + net.JoinHostPort(hostAddr, "6443")
	forward(t, net.JoinHostPort(hostAddr, "6443"), api.Host)

	dir := t.TempDir()
	m := realnode.Prepare(t, ns, name, dir)
	cred, err := tc.NodeConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: apiServer, CertificateAuthorityData: cred.CAData, TLSServerName: "127.0.0.1"}
	kc.AuthInfos["k"] = &clientcmdapi.AuthInfo{ClientCertificateData: cred.CertData, ClientKeyData: cred.KeyData}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "k"}
	kc.CurrentContext = "c"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := kubeletnode.Config{Dir: filepath.Join(dir, "node"), NodeName: name, NodeIP: netip.MustParseAddr(machineAddr),
		APIServer: apiServer, CACertPEM: cred.CAData, Kubeconfig: raw, Kubelet: kubelet, DropInDir: m.KubeletDropInDir()}
	if clusterDNS {
		cfg.ClusterDNS, cfg.ClusterDomain = []string{machineAddr}, testcluster.ClusterDomain
	}
	if missing := cfg.Check(); len(missing) > 0 {
		t.Fatal(kubeletnode.MissingError(missing))
	}
	if err := cfg.Write(); err != nil {
		t.Fatal(err)
	}
	m.MakeCgroup(t, kubeletnode.CgroupRoot) // the kubelet's cgroupRoot, as Supervise makes it
	pauseTar, err := realnode.ImageTarball(ctx, "../..")
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{m: m, cfg: cfg, logs: t.TempDir()}
	m.Run(t, filepath.Join(n.logs, "containerd.log"), cfg.ContainerdCommand()...)
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range []string{"containerd.log", "kubelet.log", "coredns.log"} {
				data, _ := os.ReadFile(filepath.Join(n.logs, f))
				t.Logf("%s %s (tail):\n%s", name, f, tail(string(data), 3000))
			}
		}
	})
	n.importImages(t, pauseTar)
	if clusterDNS {
		coredns, err := testcluster.EnsureCoreDNS(ctx, mustCacheRoot(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		args, err := tc.CoreDNSConfig(ctx, filepath.Join(dir, "coredns"), apiServer, netip.MustParseAddr(machineAddr))
		if err != nil {
			t.Fatal(err)
		}
		m.Run(t, filepath.Join(n.logs, "coredns.log"), append([]string{coredns}, args...)...)
	}
	kubeletCommand, err := cfg.KubeletCommand()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(kubeletCommand, "--config-dir="+m.KubeletDropInDir()) {
		t.Fatalf("the kubelet runs without the machine's drop-ins: %q", kubeletCommand)
	}
	m.Run(t, filepath.Join(n.logs, "kubelet.log"), kubeletCommand...)

	if err := waitFor(90*time.Second, func() error {
		node, err := tc.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node.Spec.PodCIDR == "" {
			return fmt.Errorf("no pod CIDR yet")
		}
		n.node = node
		return nil
	}); err != nil {
		t.Fatalf("the Node: %v", err)
	}
	n.podCIDR = netip.MustParsePrefix(n.node.Spec.PodCIDR)
	if err := cfg.WriteCNI(n.podCIDR); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(90*time.Second, func() error {
		node, err := tc.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && c.Reason == "KubeletReady" {
				n.node = node
				return nil
			}
		}
		return fmt.Errorf("not Ready: %v", node.Status.Conditions)
	}); err != nil {
		t.Fatalf("the Node: %v", err)
	}
	t.Logf("Node %s Ready (kubelet %s), pod CIDR %s", name, n.node.Status.NodeInfo.KubeletVersion, n.podCIDR)
	return n
}

// importImages imports an image tarball into the machine's containerd
// (the namespace the kubelet's CRI uses), retrying while containerd
// starts.
func (n *testNode) importImages(t *testing.T, tarPath string) {
	t.Helper()
	logPath := filepath.Join(n.logs, "import-"+filepath.Base(tarPath)+".log")
	if err := waitFor(60*time.Second, func() error {
		imp := n.m.Run(t, logPath, "ctr", "--address", n.cfg.Socket(), "-n", "k8s.io", "images", "import", tarPath)
		if err := imp.Wait(); err != nil {
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("ctr images import %s: %v: %s", tarPath, err, out)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestARealNodeRunsAPod: a machine namespace runs containerd and the
// kubelet (its credential a system:node one); its Node becomes Ready by
// its kubelet's own status, gets a pod CIDR from the controller-manager,
// and runs a pod of the test image the machine imported (with the pause
// image), at an address of that CIDR. The host's sysctls stay as they were, and the machine's
// teardown leaves no process or cgroup.
func TestARealNodeRunsAPod(t *testing.T) {
	if testing.Short() {
		t.Skip("a real kubelet and containerd; run make test")
	}
	tc := testcluster.Shared(t)
	ctx := context.Background()
	sysctlsBefore := readSysctls(t)
	const name = "realnode-1"
	n := startNode(t, tc, name, "198.18.231.5", "198.18.231.6", false)
	m, node, podCIDR := n.m, n.node, n.podCIDR
	if node.Status.NodeInfo.KubeletVersion != testcluster.KubernetesVersion {
		t.Errorf("kubelet version %q, want %s", node.Status.NodeInfo.KubeletVersion, testcluster.KubernetesVersion)
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sandbox", Namespace: "default"}, Spec: corev1.PodSpec{
		NodeName:   name,
		Containers: []corev1.Container{{Name: "podnet", Image: realnode.TestImage, Args: []string{"serve", ":8080"}, ImagePullPolicy: corev1.PullNever}},
	}}
	if _, err := tc.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tc.Kube.CoreV1().Pods("default").Delete(context.Background(), "sandbox", metav1.DeleteOptions{})
	})
	if err := waitFor(90*time.Second, func() error {
		p, err := tc.Kube.CoreV1().Pods("default").Get(ctx, "sandbox", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("pod %s %s", p.Status.Phase, p.Status.PodIP)
		}
		ip := netip.MustParseAddr(p.Status.PodIP)
		if !podCIDR.Contains(ip) {
			t.Errorf("the pod's address %s is not in the Node's pod CIDR %s", ip, podCIDR)
		}
		t.Logf("pod %s Running at %s", p.Name, ip)
		return nil
	}); err != nil {
		t.Fatalf("the pod: %v", err)
	}

	if after := readSysctls(t); !slices.Equal(after, sysctlsBefore) {
		t.Errorf("the host's sysctls changed: %v, then %v", sysctlsBefore, after)
	}
	if err := m.Teardown(); err != nil {
		t.Fatal(err)
	}
	if pids, _ := m.Pids(); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
	// This package's machines' cgroups (other packages' machines may be
	// running beside it).
	if left, err := realnode.LeftoversOf("realnode"); err != nil || len(left) > 0 {
		t.Errorf("cgroups left: %v %v", left, err)
	}
}

func readSysctls(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, s := range realnode.Sysctls {
		raw, err := os.ReadFile(filepath.Join("/proc/sys", s))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s+"="+string(raw))
	}
	return out
}

func mustCacheRoot(t *testing.T) string {
	t.Helper()
	root, err := testcluster.DefaultCacheRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func waitFor(limit time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
