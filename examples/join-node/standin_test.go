package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"gridweave.dev/internal/testcluster"
)

// The end-to-end test's node has no k3s. In its place, /usr/local/bin/k3s
// is a script that runs this test binary as a stand-in (standInEnv=k3s):
//
//   - `k3s agent --server URL --token-file F --node-ip IP --flannel-iface DEV --node-name N --node-label K=V...`
//     does what k3s's registration does for the cluster: it creates the
//     node's Node (kwok-managed, its labels, its GPU as allocatable, its
//     pod CIDR as k3s's IPAM would give) through the API server at URL, which the test
//     serves on the master's VPN address, so it only works through the
//     tunnel; it checks the agent token, and records its arguments;
//   - `k3s ctr images import FILE` checks FILE against the worker image's
//     SHA-256 and records the import;
//   - `k3s crictl inspecti NAME` exits 0 once NAME was imported.
//
// Its settings come in the environment the script sets (standIn* below).
const (
	standInEnv        = "GRIDWEAVE_E2E_STANDIN"
	standInDir        = "GRIDWEAVE_E2E_DIR"        // the node's record directory
	standInPodCIDR    = "GRIDWEAVE_E2E_POD_CIDR"   // spec.podCIDR of the Node
	standInKubeconfig = "GRIDWEAVE_E2E_KUBECONFIG" // the node's credentials for the API server
	// the credentials of the cluster's pod CIDR allocator (k3s's server),
	// which gives the Node its pod CIDR: a node may not set its own
	standInIPAMKubeconfig = "GRIDWEAVE_E2E_IPAM_KUBECONFIG"
	standInK3sToken       = "GRIDWEAVE_E2E_K3S_TOKEN" // the agent token the master must hand out
	standInImageSum       = "GRIDWEAVE_E2E_IMAGE_SHA256"
	standInImageName      = "GRIDWEAVE_E2E_IMAGE_NAME"
)

// Records the stand-in keeps in its directory.
const (
	recordK3sArgs  = "k3s-agent.args"
	recordImports  = "images.imported"
	recordImageTag = "image.present"
)

func TestMain(m *testing.M) {
	if os.Getenv(standInEnv) == "wg-show" {
		if err := wgShow(os.Args[1], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "wg-show (stand-in):", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(standInEnv) == "wg-allow" {
		if err := wgAllow(os.Args[1], os.Args[2], os.Args[3]); err != nil {
			fmt.Fprintln(os.Stderr, "wg-allow (stand-in):", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(standInEnv) == "k3s" {
		if err := k3sStandIn(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "k3s (stand-in):", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// The controller-manager allocates pod CIDRs to the Nodes of real
	// kubelets from the lower half of the cluster's pod range; the k3s
	// stand-in gives its Nodes 198.18.64+i.0/24 from the upper half.
	code := testcluster.RunMainWith(m, testcluster.Options{ClusterCIDR: kubeletPodRange, NodeCIDRMaskSize: 24, KubeRayThroughAPIServer: true})
	if e2eBinaries.dir != "" {
		_ = os.RemoveAll(e2eBinaries.dir)
	}
	if launcherBinary.path != "" {
		_ = os.RemoveAll(filepath.Dir(launcherBinary.path))
	}
	if e2eStatic.path != "" {
		_ = os.RemoveAll(filepath.Dir(e2eStatic.path))
	}
	os.Exit(code)
}

func k3sStandIn(args []string) error {
	dir := os.Getenv(standInDir)
	switch {
	case len(args) >= 1 && args[0] == "agent":
		return standInAgent(dir, args[1:])
	case len(args) == 4 && args[0] == "ctr" && args[1] == "images" && args[2] == "import":
		return standInImport(dir, args[3])
	case len(args) == 3 && args[0] == "crictl" && args[1] == "inspecti":
		tag, err := os.ReadFile(filepath.Join(dir, recordImageTag))
		if err != nil || strings.TrimSpace(string(tag)) != args[2] {
			return fmt.Errorf("no such image %q", args[2])
		}
		return nil
	}
	return fmt.Errorf("the stand-in does not do %q", args)
}

func standInAgent(dir string, args []string) error {
	flags := flag.NewFlagSet("k3s agent", flag.ContinueOnError)
	server := flags.String("server", "", "")
	token := flags.String("token", "", "")
	tokenFile := flags.String("token-file", "", "")
	nodeIP := flags.String("node-ip", "", "")
	iface := flags.String("flannel-iface", "", "")
	nodeName := flags.String("node-name", "", "")
	labels := map[string]string{}
	flags.Func("node-label", "", func(v string) error {
		key, value, ok := strings.Cut(v, "=")
		if !ok {
			return fmt.Errorf("--node-label %q is not key=value", v)
		}
		labels[key] = value
		return nil
	})
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() != 0 {
		return fmt.Errorf("k3s agent takes no arguments, got %q", flags.Args())
	}
	var labelList []string
	for k, v := range labels {
		labelList = append(labelList, k+"="+v)
	}
	slices.Sort(labelList)
	record := strings.Join(append([]string{*server, *nodeIP, *iface, *nodeName}, labelList...), "\n")
	if err := os.WriteFile(filepath.Join(dir, recordK3sArgs), []byte(record), 0o644); err != nil {
		return err
	}
	// The token comes in a file (never on the command line).
	if *token != "" {
		return errors.New("the agent token was passed on the command line, where the process list shows it")
	}
	raw, err := os.ReadFile(*tokenFile)
	if err != nil {
		return fmt.Errorf("--token-file: %w", err)
	}
	if fi, _ := os.Stat(*tokenFile); fi == nil || fi.Mode().Perm() != 0o600 {
		return fmt.Errorf("--token-file %s is not 0600", *tokenFile)
	}
	if strings.TrimSpace(string(raw)) != os.Getenv(standInK3sToken) {
		return errors.New("the agent token (--token-file) is not the cluster's")
	}
	cfg, err := clientcmd.BuildConfigFromFlags(*server, os.Getenv(standInKubeconfig))
	if err != nil {
		return err
	}
	// The API server's certificate names its loopback address; here it is
	// reached through the tunnel at the master's VPN address.
	cfg.TLSClientConfig.ServerName = "127.0.0.1"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	hostname, err := os.Hostname()
	if err != nil {
		return err
	}
	if *nodeName != hostname {
		return fmt.Errorf("--node-name %q is not the machine's hostname %q", *nodeName, hostname)
	}
	node, err := testcluster.KwokNode(hostname, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, nil, os.Getenv(standInPodCIDR))
	if err != nil {
		return err
	}
	// k3s registers the Node with its --node-label labels.
	for k, v := range labels {
		node.Labels[k] = v
	}
	// k3s's kubelet registers the Node and its server's IPAM gives it a
	// pod CIDR; the stand-in does both in one create, with the
	// allocator's credentials (a node may not set its own pod CIDR), and
	// reads the Node back with the node's own.
	ipamCfg, err := clientcmd.BuildConfigFromFlags(*server, os.Getenv(standInIPAMKubeconfig))
	if err != nil {
		return err
	}
	ipamCfg.TLSClientConfig.ServerName = "127.0.0.1"
	ipam, err := kubernetes.NewForConfig(ipamCfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ipam.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s: %w", hostname, err)
	}
	if _, err := kube.CoreV1().Nodes().Get(ctx, hostname, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("node %s reads its Node: %w", hostname, err)
	}
	return nil
}

func standInImport(dir, tarball string) error {
	f, err := os.Open(tarball)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if got, want := hex.EncodeToString(h.Sum(nil)), os.Getenv(standInImageSum); got != want {
		return fmt.Errorf("ctr: %s has SHA-256 %s, the worker image's is %s", tarball, got, want)
	}
	log, err := os.OpenFile(filepath.Join(dir, recordImports), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	if _, err := fmt.Fprintln(log, os.Getenv(standInImageSum)); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, recordImageTag), []byte(os.Getenv(standInImageName)), 0o644)
}
