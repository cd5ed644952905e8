package kubeletnode

import (
	"context"
	"encoding/json"
	"github.com/BurntSushi/toml"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func testConfig(t *testing.T) Config {
	return Config{Dir: t.TempDir(), RunDir: t.TempDir(), NodeName: "gpu-1", NodeIP: netip.MustParseAddr("198.18.0.7"),
		APIServer: "https://198.18.0.1:6443", CACertPEM: []byte("-----BEGIN CERTIFICATE-----\n"), BootstrapToken: "abcdef.0123456789abcdef",
		Kubelet: "/usr/local/bin/kubelet", NodeLabels: []string{"gridweave.dev/owner=m1"}}
}

func TestWriteKeepsTheBootstrapTokenPrivate(t *testing.T) {
	c := testConfig(t)
	if err := c.Write(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(c.bootstrapKubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("the bootstrap kubeconfig is %v, want 0600", info.Mode().Perm())
	}
	raw, _ := os.ReadFile(c.bootstrapKubeconfig())
	if !strings.Contains(string(raw), `token: "abcdef.0123456789abcdef"`) || !strings.Contains(string(raw), `server: "https://198.18.0.1:6443"`) {
		t.Errorf("bootstrap kubeconfig:\n%s", raw)
	}
	command, err := c.KubeletCommand()
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Join(command, " ")
	for _, want := range []string{"--bootstrap-kubeconfig=" + c.bootstrapKubeconfig(), "--node-ip=198.18.0.7", "--hostname-override=gpu-1", "--node-labels=gridweave.dev/owner=m1"} {
		if !strings.Contains(argv, want) {
			t.Errorf("kubelet command %q lacks %q", argv, want)
		}
	}
	if strings.Contains(argv, "abcdef.0123456789abcdef") {
		t.Errorf("the kubelet's command line carries the token: %s", argv)
	}
}

func TestTheKubeletServesOnlyAuthenticatedCallers(t *testing.T) {
	c := testConfig(t)
	if err := c.Write(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(c.kubeletConfig())
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ContainerRuntimeEndpoint string `json:"containerRuntimeEndpoint"`
		ServerTLSBootstrap       bool   `json:"serverTLSBootstrap"`
		Authentication           struct {
			Anonymous struct{ Enabled bool } `json:"anonymous"`
			Webhook   struct{ Enabled bool } `json:"webhook"`
		} `json:"authentication"`
		Authorization struct{ Mode string } `json:"authorization"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Authentication.Anonymous.Enabled || !cfg.Authentication.Webhook.Enabled || cfg.Authorization.Mode != "Webhook" || !cfg.ServerTLSBootstrap {
		t.Errorf("kubelet config: %s", raw)
	}
	if cfg.ContainerRuntimeEndpoint != "unix://"+filepath.Join(c.RunDir, "containerd", "containerd.sock") {
		t.Errorf("runtime endpoint %q", cfg.ContainerRuntimeEndpoint)
	}
	containerd, _ := os.ReadFile(c.containerdConfig())
	for _, want := range []string{"restrict_oom_score_adj = true", `address = "` + c.Socket() + `"`, `root = "` + c.containerdRoot() + `"`} {
		if !strings.Contains(string(containerd), want) {
			t.Errorf("containerd config lacks %q:\n%s", want, containerd)
		}
	}
	if strings.Contains(string(containerd), "nvidia") {
		t.Errorf("a machine without the NVIDIA toolkit has an nvidia runtime:\n%s", containerd)
	}
	// With the toolkit, its runtime is containerd's default, named as the
	// nvidia RuntimeClass's handler.
	c.NVIDIARuntime = "/usr/bin/nvidia-container-runtime"
	if err := c.Write(); err != nil {
		t.Fatal(err)
	}
	containerd, _ = os.ReadFile(c.containerdConfig())
	var parsed struct {
		Plugins map[string]struct {
			Containerd struct {
				DefaultRuntimeName string `toml:"default_runtime_name"`
				Runtimes           map[string]struct {
					RuntimeType string `toml:"runtime_type"`
					Options     struct {
						BinaryName string
					} `toml:"options"`
				} `toml:"runtimes"`
			} `toml:"containerd"`
		} `toml:"plugins"`
	}
	if err := toml.Unmarshal(containerd, &parsed); err != nil {
		t.Fatalf("the containerd config is not TOML: %v\n%s", err, containerd)
	}
	cri := parsed.Plugins["io.containerd.grpc.v1.cri"].Containerd
	if cri.DefaultRuntimeName != "nvidia" || cri.Runtimes["nvidia"].Options.BinaryName != c.NVIDIARuntime || cri.Runtimes["runc"].RuntimeType != "io.containerd.runc.v2" {
		t.Errorf("with the NVIDIA toolkit: %+v\n%s", cri, containerd)
	}
}

func TestSocketDefaultsToTheRunDirectory(t *testing.T) {
	if got := (Config{}).Socket(); got != "/run/gridweave/containerd/containerd.sock" {
		t.Errorf("Socket() = %q", got)
	}
}

func TestWriteCNI(t *testing.T) {
	c := testConfig(t)
	if err := c.WriteCNI(netip.MustParsePrefix("198.18.96.1/24")); err == nil {
		t.Error("a pod CIDR with host bits was taken")
	}
	if err := c.WriteCNI(netip.MustParsePrefix("198.18.96.0/24")); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(c.cniConfDir(), "10-gridweave.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"subnet": "198.18.96.0/24"`) || !strings.Contains(string(raw), `"ipMasq": false`) || !strings.Contains(string(raw), `"mtu": 1420`) {
		t.Errorf("CNI configuration:\n%s", raw)
	}
}

func TestMissingErrorNamesThePackages(t *testing.T) {
	err := MissingError([]Missing{{"containerd", "containerd"}, {"ctr", "containerd"}, {"runc", "runc"}})
	if err == nil || !strings.Contains(err.Error(), "apt-get install containerd runc") {
		t.Errorf("MissingError = %v", err)
	}
	if MissingError(nil) != nil {
		t.Error("MissingError(nil) is an error")
	}
}

func TestConfigNeedsACredential(t *testing.T) {
	c := testConfig(t)
	c.BootstrapToken = ""
	if err := c.Write(); err == nil || !strings.Contains(err.Error(), "BootstrapToken") {
		t.Errorf("Write without a credential: %v", err)
	}
}

// TestTheNodesDirectoriesAreItsOwn: Teardown removes Dir and RunDir's
// containerd, so a Config naming a directory of the machine's is refused,
// and LoadConfig takes Dir from where node.json is, not from the file.
func TestTheNodesDirectoriesAreItsOwn(t *testing.T) {
	for _, bad := range []struct{ dir, run string }{{"/", ""}, {"/var/lib", ""}, {"relative/node", ""}, {"/var/lib/gridweave/../kubelet", ""}, {"", "/run"}, {"", "/var/run"}} {
		c := testConfig(t)
		if bad.dir != "" {
			c.Dir = bad.dir
		}
		if bad.run != "" {
			c.RunDir = bad.run
		}
		if err := c.Write(); err == nil {
			t.Errorf("Write with Dir %q RunDir %q was taken", c.Dir, c.RunDir)
		}
		if err := Teardown(context.Background(), c, nil); err == nil {
			t.Errorf("Teardown with Dir %q RunDir %q was taken", c.Dir, c.RunDir)
		}
	}
	c := testConfig(t)
	if err := SaveConfig(c); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(t.TempDir(), "node")
	if err := os.Rename(c.Dir, moved); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadConfig(moved)
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Dir != moved || loaded.BootstrapToken != "" {
		t.Errorf("LoadConfig: Dir %q (want %q), token %q", loaded.Dir, moved, loaded.BootstrapToken)
	}
	raw, _ := os.ReadFile(filepath.Join(moved, "node.json"))
	if strings.Contains(string(raw), "abcdef.0123456789abcdef") {
		t.Errorf("node.json holds the bootstrap token:\n%s", raw)
	}
}

func TestTheOwnersDropInDirectoryIsPassedWhenItExists(t *testing.T) {
	c := testConfig(t)
	c.DropInDir = filepath.Join(t.TempDir(), "kubelet.conf.d")
	argv := func() string {
		t.Helper()
		command, err := c.KubeletCommand()
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(command, " ")
	}
	if got := argv(); strings.Contains(got, "--config-dir") {
		t.Errorf("without the directory, the kubelet command has --config-dir: %s", got)
	}
	if err := os.Mkdir(c.DropInDir, 0o755); err != nil {
		t.Fatal(err)
	}
	eviction := `{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "evictionHard": {"nodefs.available": "1Gi"}}`
	if err := os.WriteFile(filepath.Join(c.DropInDir, "50-eviction.conf"), []byte(eviction), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := argv(); !strings.Contains(got, " --config-dir="+c.DropInDir) {
		t.Errorf("the kubelet command lacks --config-dir=%s: %s", c.DropInDir, got)
	}
	if got := (Config{}).dropInDir(); got != DefaultDropInDir {
		t.Errorf("default drop-in directory %q, want %q", got, DefaultDropInDir)
	}
}

func TestDropInsSetOnlyWhatTheMachineDecides(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		mode                os.FileMode
		want                string // in the error; "" accepts
	}{
		{"eviction and reservations", "50-a.conf", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionHard:\n  nodefs.available: 1Gi\nsystemReserved:\n  cpu: 500m\n", 0o644, ""},
		{"not a drop-in by its name", "notes.txt", "authorization: {mode: AlwaysAllow}", 0o644, ""},
		{"authorization", "50-a.conf", `{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "authorization": {"mode": "AlwaysAllow"}}`, 0o644, "sets authorization, which is the node's"},
		{"anonymous callers", "50-a.conf", "kind: KubeletConfiguration\nauthentication:\n  anonymous:\n    enabled: true\n", 0o644, "sets authentication"},
		{"static pods", "50-a.conf", "kind: KubeletConfiguration\nstaticPodPath: /etc/pods\n", 0o644, "sets staticPodPath"},
		{"image collection", "50-a.conf", "kind: KubeletConfiguration\nimageGCHighThresholdPercent: 80\n", 0o644, "sets imageGCHighThresholdPercent"},
		{"another kind", "50-a.conf", "kind: KubeProxyConfiguration\n", 0o644, `kind "KubeProxyConfiguration"`},
		{"not YAML", "50-a.conf", "evictionHard: [", 0o644, "50-a.conf"},
		{"writable by others", "50-a.conf", "kind: KubeletConfiguration\n", 0o666, "writable by root only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mode&0o022 != 0 && os.Geteuid() != 0 {
				t.Skip("ownership is checked for a root process")
			}
			dir := t.TempDir()
			path := filepath.Join(dir, tc.file)
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			err := CheckDropIns(dir)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want one with %q", err, tc.want)
			}
			c := testConfig(t)
			c.DropInDir = dir
			if _, cerr := c.KubeletCommand(); (cerr == nil) != (err == nil) {
				t.Errorf("KubeletCommand: %v, CheckDropIns: %v", cerr, err)
			}
		})
	}
}
