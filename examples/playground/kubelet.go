package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"gridweave.dev/deploy/rayimage"
	"gridweave.dev/gridweave"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/realnode"
	"gridweave.dev/internal/testcluster"
)

// playgroundPodRange is the cluster's pod range in the kubelet join mode
// (Config.ClusterCIDR and the controller-manager's --cluster-cidr): each Node's
// pod CIDR is a /24 of it.
const playgroundPodRange = "198.18.128.0/18"

// kubeletMode sets what a master of the kubelet join mode needs in cfg:
// the control plane's kubelet to serve (built and cached with it), the
// pause, test and Ray images as the worker image tarball (built without
// Docker, cached), the cluster's pod range and DNS; and applies the
// deploy files' bindings for the machines' bootstrap tokens.
func kubeletMode(ctx context.Context, tc *testcluster.Cluster, cfg *gridweave.Config, progress io.Writer) error {
	root, err := testcluster.DefaultCacheRoot()
	if err != nil {
		return err
	}
	fmt.Fprintln(progress, "the kubelet for machines (the first start builds it: minutes)")
	kubelet, err := testcluster.EnsureKubelet(ctx, root, progress)
	if err != nil {
		return err
	}
	module, err := moduleRoot()
	if err != nil {
		return err
	}
	fmt.Fprintln(progress, "the images for machines: pause, test and Ray (the first start builds Ray's from Debian and PyPI: minutes)")
	images, err := realnode.RayImageTarball(ctx, module, nil, progress)
	if err != nil {
		return err
	}
	if err := tc.CreateNamespace(ctx, "gridweave-system"); err != nil {
		return err
	}
	if err := realnode.ApplyKubeletRBAC(ctx, tc.Kube); err != nil {
		return err
	}
	cfg.KubeJoinMode = gridweave.JoinModeKubelet
	cfg.KubeletBinary = kubelet
	// The control plane's serving certificate names 127.0.0.1 and
	// kubernetes, not the master's VPN address it is reached at.
	cfg.KubeletTLSServerName = "kubernetes"
	cfg.WorkerImageTar = images
	cfg.RayImageWorker, cfg.RayImage = rayimage.WorkerTag, rayimage.HeadTag
	cfg.ClusterCIDR = netip.MustParsePrefix(playgroundPodRange)
	cfg.NodeCIDRMaskBits = max(cfg.NodeCIDRMaskBits, cfg.ClusterCIDR.Bits())
	// Pods resolve the cluster's names (a Ray worker finds its head by
	// its Service's) with CoreDNS on the master's VPN address.
	cfg.KubeletClusterDNS = []netip.Addr{cfg.MasterVPNIP}
	return nil
}

// moduleRoot is the directory of gridweave.dev's go.mod, from the working
// directory up: make playground runs in the repository.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(raw), "module gridweave.dev\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run the playground from the gridweave.dev repository (make playground): the machines' images are built from its sources")
		}
		dir = parent
	}
}

// forwardAPIServer relays TCP from listen to the API server at apiURL
// until the returned function is called.
func forwardAPIServer(listen, apiURL string) (func(), error) {
	u, err := url.Parse(apiURL)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("the API server's address for machines: %w", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relay(c, u.Host)
		}
	}()
	return func() { ln.Close() }, nil
}

func relay(c net.Conn, target string) {
	defer c.Close()
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		return
	}
	defer up.Close()
	go func() {
		_, _ = io.Copy(up, c)
		_ = up.(*net.TCPConn).CloseWrite()
	}()
	_, _ = io.Copy(c, up)
}

// machineName is the realnode machine of playground machine n: its
// cgroups are gw-<name>.
func machineName(n int) string { return fmt.Sprintf("pg-machine-%d", n) }

// realMachineCommand runs command on playground machine n as a real
// node's machine (internal/realnode): in its network namespace ns, with
// its own /run, /var/lib/kubelet, cgroups and sysctl shadows, where the
// join agent runs containerd and the kubelet; its own hostname,
// /usr/local/bin and /var/lib/gridweave (from home) too.
func realMachineCommand(n int, ns, home, hostname, command string, stdout, stderr io.Writer) error {
	m, err := realnode.New(&netnstest.Namespace{Name: ns}, machineName(n), filepath.Join(home, "node"))
	if err != nil {
		return err
	}
	script := `set -e
hostname "$MACHINE_HOSTNAME"
mount --bind "$MACHINE_HOME/bin" /usr/local/bin
mount --bind "$MACHINE_HOME/state" /var/lib/gridweave
cd "$MACHINE_HOME/work"
exec bash -c "$MACHINE_COMMAND"`
	cmd, err := m.ExecCommand("unshare", "--uts", "sh", "-c", script)
	if err != nil {
		return err
	}
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "MACHINE_HOSTNAME=" + hostname,
		"MACHINE_HOME=" + home, "MACHINE_COMMAND=" + command, m.OwnerEnv(),
		// The join command's mktemp -d: in the machine's directory,
		// which goes when the playground stops.
		"TMPDIR=" + filepath.Join(home, "tmp")}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	return cmd.Run()
}

// showNode waits for the machine's Node to be Ready, runs a pod of the
// test image on it and fetches the pod's page through the tunnel (from
// this host, the master), printing each step.
func showNode(ctx context.Context, kubeconfig, hostname string, began time.Time, stdout io.Writer) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	var node *corev1.Node
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, hostname, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		node = n
		return ready(n) && n.Spec.PodCIDR != "", nil
	}); err != nil {
		return fmt.Errorf("the Node %s did not become Ready with a pod CIDR: %w", hostname, err)
	}
	fmt.Fprintf(stdout, "Node %s Ready %s after the join command began: kubelet %s, container runtime %s, pod CIDR %s, InternalIP %s\n",
		hostname, time.Since(began).Round(100*time.Millisecond), node.Status.NodeInfo.KubeletVersion, node.Status.NodeInfo.ContainerRuntimeVersion,
		node.Spec.PodCIDR, internalIP(node))

	name := "hello-" + hostname
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
		NodeName:                      hostname,
		TerminationGracePeriodSeconds: new(int64),
		Containers: []corev1.Container{{Name: "podnet", Image: realnode.TestImage, Args: []string{"serve", ":8080"},
			ImagePullPolicy: corev1.PullNever}},
	}}
	created := time.Now()
	if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	var ip netip.Addr
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		p, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return false, nil
		}
		ip, err = netip.ParseAddr(p.Status.PodIP)
		return err == nil, err
	}); err != nil {
		return fmt.Errorf("pod default/%s did not run on %s: %w", name, hostname, err)
	}
	fmt.Fprintf(stdout, "pod default/%s (image %s) Running on %s at %s, %s after it was created\n",
		name, realnode.TestImage, hostname, ip, time.Since(created).Round(100*time.Millisecond))

	// The pod's address is routed into the master's WireGuard device: its
	// page, through the tunnel.
	page := "http://" + netip.AddrPortFrom(ip, 8080).String() + "/"
	var body string
	if err := poll(ctx, 30*time.Second, func() (bool, error) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(page)
		if err != nil {
			return false, nil
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = strings.TrimSpace(string(raw))
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		return fmt.Errorf("the pod's page %s from the master: %w", page, err)
	}
	fmt.Fprintf(stdout, "GET %s from the master, through the tunnel: %s\n", page, body)
	return nil
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// poll calls done every half second until it is true, fails, or limit
// passes.
func poll(ctx context.Context, limit time.Duration, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		ok, err := done()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not after %s", limit)
		case <-time.After(500 * time.Millisecond):
		}
	}
}
