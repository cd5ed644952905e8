package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/deploy/rayimage"
	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/internal/randhex"
	"gridweave.dev/internal/realnode"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/sqlitestore"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/mesh/wgmesh"
	"gridweave.dev/rayctl"
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("playground", flag.ContinueOnError)
	flags.SetOutput(stderr)
	port := flags.Int("port", 8800, "the server's port on 127.0.0.1")
	gpuNodes := flags.Int("gpu-nodes", 2, "kwok nodes with 8 nvidia.com/gpu each")
	cpuNodes := flags.Int("cpu-nodes", 1, "kwok CPU nodes")
	keepMountpoints := flags.Bool("keep-mountpoints", false, "as root, leave the mountpoints machines made on the host when the playground stops (make test's leftover check removes them: for tests that make machines at the same time)")
	dir := flags.String("dir", "", "where the cluster's state, kubeconfig and the server's SQLite file live (default: a temporary directory, removed at the end)")
	if len(args) > 0 && args[0] == "machine" {
		if err := machine(ctx, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "playground machine:", err)
			return 1
		}
		return 0
	}
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if err := playground(ctx, *port, *gpuNodes, *cpuNodes, *dir, *keepMountpoints, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "playground:", err)
		return 1
	}
	return 0
}

func playground(ctx context.Context, port, gpuNodes, cpuNodes int, dir string, keepMountpoints bool, stdout, stderr io.Writer) error {
	// As root, machines on this host join the playground in the kubelet
	// join mode: real nodes, whose pod CIDRs the controller-manager
	// allocates from the cluster's range.
	machines := os.Geteuid() == 0
	opts := &testcluster.Options{Progress: stderr, Dir: dir}
	if machines {
		opts.ClusterCIDR, opts.KubeRayThroughAPIServer = playgroundPodRange, true
	}
	fmt.Fprintln(stderr, "starting the control plane (the first start builds its binaries: minutes on two cores)")
	tc, err := testcluster.New(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(stderr, "stopping the control plane")
		tc.Stop()
		if left, err := testcluster.Leftovers(tc.ID); err == nil && len(left) > 0 {
			fmt.Fprintf(stderr, "playground: processes left running: %v\n", left)
		}
	}()
	if err := populate(ctx, tc, gpuNodes, cpuNodes, !machines); err != nil {
		return err
	}

	adminToken, jwtSecret := randhex.String(24), randhex.String(32)
	cfg := gridweave.DefaultConfig()
	cfg.AdminToken, cfg.JWTSecret, cfg.ServerVersion, cfg.Port = adminToken, jwtSecret, "0.1.0", port
	cfg.MasterIP, cfg.Namespace, cfg.Dev = "127.0.0.1", "gridweave", true
	if machines {
		// Machines on this host join it: the master's underlay address
		// and WireGuard device, as on a real master.
		removeNetwork, err := masterUnderlayUp(keepMountpoints)
		if err != nil {
			return fmt.Errorf("the master's network for machines: %w", err)
		}
		defer removeNetwork()
		cfg.MasterIP, cfg.VPNCIDR, cfg.MasterVPNIP = masterUnderlay, netip.MustParsePrefix(playgroundVPN), netip.MustParseAddr(playgroundVPNIP)
		cfg.WireGuardInterface, cfg.WireGuardPort = wireguardDevice, wireguardPort
		if err := kubeletMode(ctx, tc, &cfg, stderr); err != nil {
			return fmt.Errorf("the kubelet join mode: %w", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	if machines {
		if cfg.KubeletCAPEM, err = os.ReadFile(tc.CACertFile()); err != nil {
			return err
		}
	}
	// The join agents, built now for the server to serve (the join
	// command's script fetches one).
	cfg.AgentDir = filepath.Join(tc.Dir, "agents")
	if err := buildAgents(ctx, cfg.AgentDir, cfg.ServerVersion); err != nil {
		fmt.Fprintf(stderr, "playground: no join agents (%v): the join command's download answers 404\n", err)
		cfg.AgentDir = ""
	}
	log := slog.New(gridweave.LogHandler(slog.NewJSONHandler(io.Discard, nil)))
	store, err := sqlitestore.Open(ctx, filepath.Join(tc.Dir, "kuberay.db"), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	pool, err := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	if err != nil {
		return err
	}
	keyring, err := joinkeys.New(store, &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool, Logger: log})
	if err != nil {
		return err
	}
	masterPrivate, masterKey, err := wgkey.GeneratePair()
	if err != nil {
		return err
	}
	var peers mesh.Mesh = memmesh.New(masterKey)
	var routes fleet.Routes
	var vpn net.Listener
	if machines {
		dev, err := wgmesh.OpenDevice(ctx, wireguardDevice, netip.PrefixFrom(cfg.MasterVPNIP, cfg.VPNCIDR.Bits()), log)
		if err != nil {
			return fmt.Errorf("the master's WireGuard device: %w", err)
		}
		defer dev.Close()
		if err := wgmesh.SetPrivateKey(ctx, wireguardDevice, masterPrivate, wireguardPort); err != nil {
			return err
		}
		// The cluster's DNS (CLUSTER_DNS), on the device's address.
		fmt.Fprintln(stderr, "the cluster's DNS: CoreDNS on "+playgroundVPNIP+" (the first start builds it)")
		dns, err := tc.RunCoreDNS(ctx, netip.MustParseAddr(playgroundVPNIP), filepath.Join(tc.Dir, "coredns"), tc.ID)
		if err != nil {
			return fmt.Errorf("the cluster's DNS: %w", err)
		}
		defer dns.Stop()
		m, err := wgmesh.New(ctx, wireguardDevice, &wgmesh.Options{Logger: log})
		if err != nil {
			return err
		}
		defer m.Close()
		peers, routes = m, fleet.DeviceRoutes{Interface: wireguardDevice}
		// The VPN listener: what machines call through their tunnels.
		if vpn, err = net.Listen("tcp", net.JoinHostPort(playgroundVPNIP, "0")); err != nil {
			return err
		}
		cfg.VPNURL = "http://" + vpn.Addr().String()
		// The API server as the machines' kubelets reach it: at the
		// master's VPN address, through their tunnels.
		stopForward, err := forwardAPIServer(net.JoinHostPort(playgroundVPNIP, "6443"), tc.Config.Host)
		if err != nil {
			return err
		}
		defer stopForward()
	}
	rc, err := rayctl.New(tc.Kube, tc.Ray, &rayctl.Options{Namespace: cfg.Namespace, Logger: log})
	if err != nil {
		return err
	}
	server, err := gridweave.New(ctx, cfg, gridweave.Backends{Keyring: keyring, Mesh: peers, Routes: routes, Ray: rc, Kube: tc.Kube, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("--port %d: %w", port, err)
	}
	web := &http.Server{Handler: server.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = web.Serve(ln) }()
	if machines {
		underlay, err := net.Listen("tcp", net.JoinHostPort(masterUnderlay, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		go func() { _ = web.Serve(underlay) }()
		tunnel := &http.Server{Handler: server.VPNHandler(), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = tunnel.Serve(vpn) }()
		defer tunnel.Close()
	}
	background, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- server.Run(background) }()
	defer func() {
		cancel()
		<-done
		shutdown, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		_ = web.Shutdown(shutdown)
	}()

	url := "http://" + ln.Addr().String()
	machinesNote := "Run it as root (sudo make playground) and machines on this host can join it as real nodes."
	if machines {
		command, err := mintJoinCommand(url, adminToken)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(machinesDir, "join-command"), []byte(command+"\n"), 0o600); err != nil {
			return err
		}
		// The machine command shows the Node and a pod on it.
		if err := os.WriteFile(filepath.Join(machinesDir, "kubeconfig-path"), []byte(tc.KubeconfigPath+"\n"), 0o600); err != nil {
			return err
		}
		machinesNote = fmt.Sprintf(`Machines on this host join it as real nodes (the kubelet join mode): the master is at
%s (a veth) with WireGuard device %s, and its API server is reached through the
tunnels at https://%s:6443. The join command, for a machine:

  join command: %s

VPN listener: %s (through the tunnels)

sudo make playground-machine runs it on a new machine (a network namespace with its own
hostname, mounts and cgroups): containerd (from the host's packages) and the kubelet
(the control plane's, served by the master) run there, its Node becomes Ready, and a
pod of the test image %s runs on it, reached from here through the tunnel.
Its pods' addresses are in %s. There is no registry: only the images the master
serves (the pause image, %s, and Ray's %s and %s) run on machines.

Ray on the joined machines (KubeRay's head and worker pods; the job prints the
worker pod it ran on):

  go run ./examples/launcher run    examples/launcher/specs/hello_pods.recipe.yaml examples/launcher/specs/hello_pods.infra.yaml
  go run ./examples/launcher status hello-pods -n playground
  go run ./examples/launcher job logs --cluster hello-pods -n playground`, masterUnderlay, wireguardDevice, playgroundVPNIP, command, cfg.VPNURL,
			realnode.TestImage, playgroundPodRange, realnode.TestImage, rayimage.HeadTag, rayimage.WorkerTag)
	}
	fmt.Fprintf(stdout, `
The playground is up: a Kubernetes %s control plane with the KubeRay %s operator,
%d GPU nodes (8 nvidia.com/gpu each) and %d CPU nodes, simulated by kwok: pods are
scheduled there and "run", but no container runs. Cluster id %s.

  kubeconfig:  %s
  server:      %s   (API docs: %s/docs)
  admin token: %s

Try the launcher (from the repository root):

  export KUBECONFIG=%s
  go run ./examples/launcher doctor examples/launcher/specs/grpo_swe.recipe.yaml examples/launcher/specs/grpo_swe_sglang.infra.yaml -n playground
  go run ./examples/launcher run    examples/launcher/specs/grpo_swe.recipe.yaml examples/launcher/specs/grpo_swe_sglang.infra.yaml -n playground
  go run ./examples/launcher status grpo-swe -n playground

And the join flow, as an administrator:

  curl -s %s/v1/nodes/join-keys -H "Authorization: Bearer %s" --json '{"kind":"org","org":"acme","ttl_seconds":3600}'

%s

Ctrl-C stops everything.
playground ready
`, testcluster.KubernetesVersion, testcluster.KubeRayVersion, gpuNodes, cpuNodes, tc.ID, tc.KubeconfigPath, url, url, adminToken,
		tc.KubeconfigPath, url, adminToken, machinesNote)
	<-ctx.Done()
	return nil
}

// populate adds the nodes, the namespaces and what the example specs need.
// With ownCIDRs, the kwok Nodes get pod CIDRs of their own; without, the
// controller-manager allocates them.
func populate(ctx context.Context, tc *testcluster.Cluster, gpuNodes, cpuNodes int, ownCIDRs bool) error {
	podCIDR := func(third int) string {
		if !ownCIDRs {
			return ""
		}
		return fmt.Sprintf("198.18.%d.0/24", third)
	}
	gpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("96"), corev1.ResourceMemory: resource.MustParse("1Ti"),
		corev1.ResourceEphemeralStorage: resource.MustParse("2Ti"), "nvidia.com/gpu": resource.MustParse("8")}
	for i := range gpuNodes {
		if _, err := tc.AddNode(ctx, fmt.Sprintf("gpu-%d", i), gpu, map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}, podCIDR(10+i)); err != nil {
			return err
		}
	}
	for i := range cpuNodes {
		if _, err := tc.AddNode(ctx, fmt.Sprintf("cpu-%d", i), nil, nil, podCIDR(100+i)); err != nil {
			return err
		}
	}
	for _, ns := range []string{"gridweave", "playground"} {
		if err := tc.CreateNamespace(ctx, ns); err != nil {
			return err
		}
	}
	// The example specs name a pull secret and a priority class.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ghcr-pull", Namespace: "playground"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	if _, err := tc.Kube.CoreV1().Secrets("playground").Create(ctx, secret, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "training-high"}, Value: 1000}
	if _, err := tc.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// buildAgents builds the join agent for linux/amd64 and linux/arm64 into
// dir with the Go toolchain that runs the playground (go run).
func buildAgents(ctx context.Context, dir, version string) error {
	for _, arch := range []string{"amd64", "arm64"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version,
			"-o", filepath.Join(dir, "join-node-linux-"+arch), "gridweave.dev/examples/join-node")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build the %s agent: %w: %s", arch, err, out)
		}
	}
	return nil
}
