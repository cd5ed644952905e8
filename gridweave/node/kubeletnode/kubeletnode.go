package kubeletnode

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The pod network's bridge and CNI network.
const (
	bridgeName  = "gwbr0"
	networkName = "gridweave"
)

// DefaultPauseImage is the sandbox image containerd asks for: the tag the
// master's pause image is imported under.
const DefaultPauseImage = "registry.k8s.io/pause:3.10.1"

// Config is one machine's node.
type Config struct {
	// Dir holds everything written (/var/lib/gridweave/node): containerd's
	// configuration and root, the CNI configuration, the kubelet's
	// configuration, credentials and certificates.
	Dir string
	// RunDir holds containerd's state and socket (/run/gridweave).
	RunDir string
	// NodeName and NodeIP name the Node and its address (the machine's VPN
	// address: the API server reaches the kubelet through the tunnel).
	NodeName string
	NodeIP   netip.Addr
	// APIServer is the API server's https:// URL, reachable through the
	// tunnel; CACertPEM the cluster CA. TLSServerName, when set, is the name
	// the API server's certificate is checked against (it does not name the
	// address the tunnel reaches it at).
	APIServer     string
	CACertPEM     []byte
	TLSServerName string
	// BootstrapToken (id.secret) TLS-bootstraps the kubelet's credential;
	// Kubeconfig, when set instead, is a credential the kubelet uses as is.
	BootstrapToken string `json:"-"`
	Kubeconfig     []byte `json:"-"`
	// Kubelet is the kubelet binary the master served.
	Kubelet string
	// CNIBinDir holds the CNI plugins; default /usr/lib/cni (Debian's
	// containernetworking-plugins), else /opt/cni/bin when it has them.
	CNIBinDir string
	// NodeLabels are key=value labels the Node registers with (the
	// fleet's ownership mark).
	NodeLabels []string
	// ClusterDNS and ClusterDomain are the pods' DNS (the cluster's DNS
	// Service; cluster.local by default).
	ClusterDNS    []string
	ClusterDomain string
	// PauseImage is the sandbox image; default DefaultPauseImage.
	PauseImage string
	// ClusterCIDR and NodeCIDRMask are the cluster's pod range and the
	// length of a node's pod CIDR in it (validate's cluster_cidr and
	// node_cidr_mask): Supervise takes the Node's pod CIDR only inside
	// them.
	ClusterCIDR  netip.Prefix
	NodeCIDRMask int
	// PodMTU is the MTU of the pods' interfaces and the bridge: the
	// tunnel's, so a pod's packets to another machine fit it unsplit;
	// default DefaultPodMTU.
	PodMTU int
	// DropInDir is the machine owner's kubelet configuration drop-in
	// directory (the kubelet's --config-dir): KubeletConfiguration
	// fragments (*.conf), merged over the node's configuration in name
	// order (eviction thresholds, reserved resources); default
	// DefaultDropInDir. The kubelet reads it when it exists; the node never
	// writes or removes it.
	DropInDir string
	// NVIDIARuntime is the NVIDIA Container Toolkit's runtime
	// (nvidia-container-runtime) when the machine has one: containerd's
	// default runtime then, named nvidia (the RuntimeClass handler), so
	// pods given GPUs see them, as on a k3s node with the toolkit.
	NVIDIARuntime string
}

// DefaultDropInDir is where a machine's owner puts kubelet configuration
// of their own: beside no other kubelet's (/etc/kubernetes is kubeadm's).
const DefaultDropInDir = "/etc/gridweave/kubelet.conf.d"

// CgroupRoot is the cgroup the node's pods go under on a cgroup v1 host
// (the kubelet's cgroupRoot), in every hierarchy.
const CgroupRoot = "gridweave"

// systemDirs are directories Dir and RunDir may never be: Teardown
// removes them.
var systemDirs = map[string]bool{"/": true, "/run": true, "/var/run": true, "/var": true, "/var/lib": true, "/etc": true, "/usr": true,
	"/tmp": true, "/home": true, "/root": true, "/opt": true, "/srv": true, "/var/lib/kubelet": true, "/var/lib/containerd": true, "/run/containerd": true}

// checkOwnDir: a directory of the node's own, which Teardown may remove:
// absolute, clean, below the top level, not a system directory.
func checkOwnDir(path string) error {
	switch {
	case !filepath.IsAbs(path) || filepath.Clean(path) != path:
		return fmt.Errorf("%q is not an absolute, clean path", path)
	case strings.Count(path, "/") < 2 || systemDirs[path]:
		return fmt.Errorf("%q is a directory of the machine's, not one of the node's own", path)
	}
	return nil
}

// DefaultPodMTU is WireGuard's default MTU (wireguard-go's and the
// kernel's), which the pod network's interfaces match.
const DefaultPodMTU = 1420

func (c *Config) defaults() error {
	if c.Dir == "" || c.NodeName == "" || !c.NodeIP.IsValid() || c.APIServer == "" || len(c.CACertPEM) == 0 || c.Kubelet == "" {
		return errors.New("kubeletnode: Config needs Dir, NodeName, NodeIP, APIServer, CACertPEM and Kubelet")
	}
	c.RunDir = c.runDir()
	for _, d := range []struct{ name, path string }{{"Dir", c.Dir}, {"RunDir", c.RunDir}} {
		if err := checkOwnDir(d.path); err != nil {
			return fmt.Errorf("kubeletnode: Config.%s: %w", d.name, err)
		}
	}
	if c.CNIBinDir == "" {
		c.CNIBinDir = "/usr/lib/cni"
		if _, err := os.Stat(filepath.Join(c.CNIBinDir, "bridge")); err != nil {
			if _, err := os.Stat("/opt/cni/bin/bridge"); err == nil {
				c.CNIBinDir = "/opt/cni/bin"
			}
		}
	}
	if c.ClusterDomain == "" {
		c.ClusterDomain = "cluster.local"
	}
	if c.PauseImage == "" {
		c.PauseImage = DefaultPauseImage
	}
	if c.PodMTU == 0 {
		c.PodMTU = DefaultPodMTU
	}
	return nil
}

// Paths of what Write writes and what runs.
func (c Config) containerdConfig() string { return filepath.Join(c.Dir, "containerd", "config.toml") }
func (c Config) containerdRoot() string   { return filepath.Join(c.Dir, "containerd", "root") }

// DefaultRunDir is where containerd's state and socket go unless
// Config.RunDir says otherwise.
const DefaultRunDir = "/run/gridweave"

func (c Config) runDir() string {
	if c.RunDir == "" {
		return DefaultRunDir
	}
	return c.RunDir
}

// Socket is containerd's socket.
func (c Config) Socket() string        { return filepath.Join(c.runDir(), "containerd", "containerd.sock") }
func (c Config) cniConfDir() string    { return filepath.Join(c.Dir, "cni") }
func (c Config) kubeletDir() string    { return filepath.Join(c.Dir, "kubelet") }
func (c Config) kubeletConfig() string { return filepath.Join(c.kubeletDir(), "config.yaml") }
func (c Config) bootstrapKubeconfig() string {
	return filepath.Join(c.kubeletDir(), "bootstrap-kubeconfig")
}

// RootDir is the kubelet's root directory (its pods' volumes, plugins
// and checkpoints): Gridweave's, so that Teardown takes all of it away.
func (c Config) RootDir() string { return filepath.Join(c.kubeletDir(), "root") }

// KubeletKubeconfig is the kubelet's credential once bootstrapped (or the
// one Config.Kubeconfig gave).
func (c Config) KubeletKubeconfig() string { return filepath.Join(c.kubeletDir(), "kubeconfig") }
func (c Config) caFile() string            { return filepath.Join(c.kubeletDir(), "ca.crt") }

// CertDir is where the kubelet keeps its certificates.
func (c Config) CertDir() string { return filepath.Join(c.kubeletDir(), "pki") }

// Missing are what a machine lacks for the kubelet mode, with the
// packages that bring each on Debian and Ubuntu.
type Missing struct {
	What, Package string
}

// Check reports what the machine lacks to run the node: containerd, runc
// and the CNI plugins come from the machine's packages.
func (c Config) Check() []Missing {
	_ = c.defaults()
	var out []Missing
	for _, bin := range []struct{ name, pkg string }{{"containerd", "containerd"}, {"ctr", "containerd"}, {"runc", "runc"}} {
		if _, err := exec.LookPath(bin.name); err != nil {
			out = append(out, Missing{bin.name, bin.pkg})
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(c.CNIBinDir, plugin)); err != nil {
			out = append(out, Missing{"the CNI plugin " + plugin + " (in " + c.CNIBinDir + ")", "containernetworking-plugins"})
		}
	}
	return out
}

// MissingError says what to install.
func MissingError(missing []Missing) error {
	if len(missing) == 0 {
		return nil
	}
	var what []string
	pkgs := map[string]bool{}
	var names []string
	for _, m := range missing {
		what = append(what, m.What)
		if !pkgs[m.Package] {
			pkgs[m.Package] = true
			names = append(names, m.Package)
		}
	}
	return fmt.Errorf("kubeletnode: this machine lacks %s: install them (Debian, Ubuntu: sudo apt-get install %s) and run the join command again",
		strings.Join(what, ", "), strings.Join(names, " "))
}

// CgroupV1 reports whether the host's cgroups are v1 (or hybrid): the
// kubelet refuses them unless told (failCgroupV1: false).
func CgroupV1() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err != nil
}

// CgroupDriver is the host's: systemd when systemd runs the machine on
// cgroup v2, cgroupfs otherwise.
func CgroupDriver() string {
	if _, err := os.Stat("/run/systemd/system"); err == nil && !CgroupV1() {
		return "systemd"
	}
	return "cgroupfs"
}

// Write writes containerd's and the kubelet's configuration, the CA and
// the credential, 0600 where secret.
func (c Config) Write() error {
	if err := c.defaults(); err != nil {
		return err
	}
	if c.BootstrapToken == "" && len(c.Kubeconfig) == 0 {
		return errors.New("kubeletnode: Config needs a BootstrapToken or a Kubeconfig")
	}
	if err := c.recordCreated(); err != nil {
		return err
	}
	for _, d := range []string{filepath.Dir(c.containerdConfig()), c.containerdRoot(), c.cniConfDir(), c.kubeletDir(), c.CertDir(), c.RootDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	driver := CgroupDriver()
	nvidiaDefault, nvidiaRuntime := "", ""
	if c.NVIDIARuntime != "" {
		nvidiaDefault = "\n    default_runtime_name = \"nvidia\""
		nvidiaRuntime = fmt.Sprintf(`
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
        BinaryName = %q
        SystemdCgroup = %t`, c.NVIDIARuntime, driver == "systemd")
	}
	containerd := fmt.Sprintf(`# Written by the Gridweave join agent (kubelet mode); removed by --leave.
version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # Containers' OOM score adjustments no lower than containerd's own.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"%s
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = %t%s
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, c.containerdRoot(), filepath.Join(c.RunDir, "containerd"), c.Socket(), c.PauseImage, nvidiaDefault, driver == "systemd", nvidiaRuntime, c.CNIBinDir, c.cniConfDir())
	if err := os.WriteFile(c.containerdConfig(), []byte(containerd), 0o600); err != nil {
		return err
	}
	kubelet := map[string]any{
		"apiVersion":               "kubelet.config.k8s.io/v1beta1",
		"kind":                     "KubeletConfiguration",
		"cgroupDriver":             driver,
		"containerRuntimeEndpoint": "unix://" + c.Socket(),
		"failSwapOn":               false,
		// Images are imported, never pulled again: they are not collected.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"clusterDomain":               c.ClusterDomain,
		"rotateCertificates":          true,
		// The serving certificate is signed by the cluster, after the
		// master checked its names are this node's.
		"serverTLSBootstrap": true,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": c.caFile()},
		},
		"authorization": map[string]any{"mode": "Webhook"},
	}
	if CgroupV1() {
		kubelet["failCgroupV1"] = false
		// The node's pods go under a cgroup of Gridweave's (Supervise
		// makes it), never beside another kubelet's kubepods.
		if driver == "cgroupfs" {
			kubelet["cgroupRoot"] = "/" + CgroupRoot
		}
	}
	if len(c.ClusterDNS) > 0 {
		kubelet["clusterDNS"] = c.ClusterDNS
	}
	raw, err := json.MarshalIndent(kubelet, "", "  ") // JSON is YAML
	if err != nil {
		return err
	}
	if err := os.WriteFile(c.kubeletConfig(), raw, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(c.caFile(), c.CACertPEM, 0o644); err != nil {
		return err
	}
	if len(c.Kubeconfig) > 0 {
		return os.WriteFile(c.KubeletKubeconfig(), c.Kubeconfig, 0o600)
	}
	return os.WriteFile(c.bootstrapKubeconfig(), []byte(kubeconfig(c.APIServer, c.CACertPEM, c.TLSServerName, c.BootstrapToken)), 0o600)
}

// kubeconfig is a kubeconfig for server with the bearer token.
func kubeconfig(server string, ca []byte, tlsServerName, token string) string {
	name := ""
	if tlsServerName != "" {
		name = fmt.Sprintf("\n    tls-server-name: %q", tlsServerName)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: %q
    certificate-authority-data: %s%s
users:
- name: kubelet-bootstrap
  user:
    token: %q
contexts:
- name: bootstrap
  context: {cluster: cluster, user: kubelet-bootstrap}
current-context: bootstrap
`, server, base64.StdEncoding.EncodeToString(ca), name, token)
}

// ContainerdCommand is how containerd runs.
func (c Config) ContainerdCommand() []string {
	return []string{"containerd", "--config", c.containerdConfig()}
}

// KubeletCommand is how the kubelet runs, with the owner's drop-in
// directory when it exists where the kubelet runs (CheckDropIns must
// accept it first: an error says which file and setting it refuses).
func (c Config) KubeletCommand() ([]string, error) {
	argv := []string{c.Kubelet, "--config=" + c.kubeletConfig(), "--kubeconfig=" + c.KubeletKubeconfig(), "--cert-dir=" + c.CertDir(), "--root-dir=" + c.RootDir(),
		"--hostname-override=" + c.NodeName, "--node-ip=" + c.NodeIP.String()}
	if len(c.Kubeconfig) == 0 {
		argv = append(argv, "--bootstrap-kubeconfig="+c.bootstrapKubeconfig())
	}
	if len(c.NodeLabels) > 0 {
		argv = append(argv, "--node-labels="+strings.Join(c.NodeLabels, ","))
	}
	dir := c.dropInDir()
	switch info, err := os.Stat(dir); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	case !info.IsDir():
		return nil, fmt.Errorf("kubeletnode: the kubelet drop-in directory %s is not a directory", dir)
	default:
		if err := CheckDropIns(dir); err != nil {
			return nil, err
		}
		argv = append(argv, "--config-dir="+dir)
	}
	return argv, nil
}

func (c Config) dropInDir() string {
	if c.DropInDir == "" {
		return DefaultDropInDir
	}
	return c.DropInDir
}

// WriteCNI writes the pod network's configuration for the Node's pod
// CIDR: a bridge (gwbr0, the pods' gateway) and addresses from the CIDR;
// no masquerading, so a pod's address is what other machines see, routed
// through the mesh. containerd takes it up within seconds.
func (c Config) WriteCNI(podCIDR netip.Prefix) error {
	if err := c.defaults(); err != nil {
		return err
	}
	if !podCIDR.IsValid() || podCIDR.Masked() != podCIDR {
		return fmt.Errorf("kubeletnode: pod CIDR %s is not a prefix", podCIDR)
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       networkName,
		"plugins": []any{
			map[string]any{"type": "bridge", "bridge": bridgeName, "isGateway": true, "ipMasq": false, "hairpinMode": true, "mtu": c.PodMTU,
				"ipam": map[string]any{"type": "host-local", "ranges": [][]map[string]string{{{"subnet": podCIDR.String()}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}}}},
			map[string]any{"type": "loopback"},
		},
	}
	raw, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(c.cniConfDir(), 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(c.cniConfDir(), ".10-gridweave.conflist")
	if err := os.WriteFile(tmp, raw, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.cniConfDir(), "10-gridweave.conflist"))
}
