package serverenv_test

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"gridweave.dev/examples/server/serverenv"
	"gridweave.dev/gridweave"
)

const (
	testAdminToken = "test-admin-token-0123456789abcdef"
	testSecret     = "test-jwt-secret-0123456789abcdef0123456789"
)

// TestConfigRefusesUnsafeDefaults: outside dev mode the environment's
// defaults are refused for JWT_SECRET, then ADMIN_TOKEN; a malformed
// value is refused naming its variable.
func TestConfigRefusesUnsafeDefaults(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cfg, err := serverenv.Read(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Port != 8800 || cfg.Namespace != "gridweave" || cfg.MasterVPNIP.String() != "10.100.0.1" || cfg.RateLimitPerMinute != 6000 || cfg.ClusterName != "gridweave-cluster" {
		t.Errorf("defaults %+v", cfg)
	}
	for _, c := range []struct {
		env map[string]string
		say string
	}{
		{nil, "JWT_SECRET"},
		{map[string]string{"JWT_SECRET": "short"}, "JWT_SECRET"},
		{map[string]string{"JWT_SECRET": testSecret}, "ADMIN_TOKEN"},
	} {
		cfg, err := serverenv.Read(env(c.env))
		if err != nil && !strings.Contains(err.Error(), c.say) {
			t.Errorf("Read(%v) = %v, want no error or one naming %s", c.env, err, c.say)
		}
		if err := serverenv.Explain(cfg.Check()); err == nil || !strings.Contains(err.Error(), c.say) {
			t.Errorf("Check(%v) = %v, want an error naming %s", c.env, err, c.say)
		}
	}
	dev, _ := serverenv.Read(env(map[string]string{"GRIDWEAVE_DEV": "1"}))
	if err := dev.Check(); err != nil {
		t.Errorf("dev mode refused: %v", err)
	}
	for name, value := range map[string]string{"KUBERAY_PORT": "80a", "RATE_LIMIT_PER_MINUTE": "0", "MASTER_VPN_IP": "10.200.0.1", "VPN_CIDR": "nope", "SERVER_VERSION": "one", "SHUTDOWN_TIMEOUT": "-1s", "MASTER_IP": "bad host!"} {
		_, err := serverenv.Read(env(map[string]string{name: value}))
		if err == nil || !strings.HasPrefix(err.Error(), name+":") {
			t.Errorf("%s=%q: %v, want an error naming the variable", name, value, err)
		}
	}
}

// TestRayHeadAddressIsRefusedWithWhatReplacedIt: RAY_HEAD_ADDRESS, which
// the server has no use for (it never speaks the Ray client protocol), is
// refused at start with the RAY_DASHBOARD_URL that takes its place.
func TestRayHeadAddressIsRefusedWithWhatReplacedIt(t *testing.T) {
	for address, want := range map[string]string{
		"ray://10.100.0.1:10001": "RAY_DASHBOARD_URL=http://10.100.0.1:8265",
		"10.100.0.1:6379":        "RAY_DASHBOARD_URL=http://10.100.0.1:8265",
		"ray-head.gridweave.svc": "RAY_DASHBOARD_URL=http://ray-head.gridweave.svc:8265",
		"[fd00::1]:10001":        "RAY_DASHBOARD_URL=http://[fd00::1]:8265",
	} {
		_, err := serverenv.Read(func(k string) string {
			if k == "RAY_HEAD_ADDRESS" {
				return address
			}
			return ""
		})
		var ce *serverenv.Error
		if !errors.As(err, &ce) || ce.Variable != "RAY_HEAD_ADDRESS" || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "not used") {
			t.Errorf("RAY_HEAD_ADDRESS=%s: %v, want a refusal naming it and %s", address, err, want)
		}
	}
}

// TestConfigTLSDefaults: TLS is on unless dev mode or TLS=off says
// otherwise.
func TestConfigTLSDefaults(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, true},
		{map[string]string{"TLS": "off"}, false},
		{map[string]string{"GRIDWEAVE_DEV": "1"}, false},
		{map[string]string{"GRIDWEAVE_DEV": "1", "TLS": "on"}, true},
	} {
		cfg, err := serverenv.Read(func(k string) string { return c.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if cfg.UsesTLS() != c.want {
			t.Errorf("%v: UsesTLS() = %v", c.env, cfg.UsesTLS())
		}
	}
}

// TestConfigRefusesPlaceholdersAndOpenListeners: the documentation's
// placeholder secrets, a short INTERNAL_TOKEN, an internal listener on
// every interface, the VPN or a public address, and a host name as
// MASTER_IP are refused, naming the variable.
func TestConfigRefusesPlaceholdersAndOpenListeners(t *testing.T) {
	base := map[string]string{"ADMIN_TOKEN": testAdminToken, "JWT_SECRET": testSecret, "VPN_CIDR": "198.18.0.0/16", "MASTER_VPN_IP": "198.18.0.1"}
	with := func(kv ...string) func(string) string {
		m := maps.Clone(base)
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		env []string
		say string
	}{
		{[]string{"ADMIN_TOKEN", "change-me-to-a-long-random-token"}, "ADMIN_TOKEN"},
		{[]string{"JWT_SECRET", "change-me-to-at-least-32-random-bytes"}, "JWT_SECRET"},
		{[]string{"JWT_SECRET", "CHANGEME-CHANGEME-CHANGEME-CHANGEME"}, "JWT_SECRET"},
		{[]string{"INTERNAL_TOKEN", "change-me-internal-token-of-some-length"}, "INTERNAL_TOKEN"},
		{[]string{"INTERNAL_TOKEN", "short-internal-token"}, "INTERNAL_TOKEN"},
	} {
		cfg, err := serverenv.Read(with(c.env...))
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if err := serverenv.Explain(cfg.Check()); err == nil || !strings.HasPrefix(err.Error(), c.say+":") {
			t.Errorf("Check(%v) = %v, want an error naming %s", c.env, err, c.say)
		}
	}
	for _, c := range []struct{ name, value string }{
		{"INTERNAL_ADDR", "0.0.0.0:8801"},
		{"INTERNAL_ADDR", "[::]:8801"},
		{"INTERNAL_ADDR", ":8801"},
		{"INTERNAL_ADDR", "198.18.0.7:8801"}, // inside VPN_CIDR
		{"INTERNAL_ADDR", "10.42.0.7:8801"},  // inside CLUSTER_CIDR
		{"INTERNAL_ADDR", "203.0.113.5:8801"},
		{"INTERNAL_ADDR", "8.8.8.8:8801"},
		{"INTERNAL_ADDR", "gateway.local:8801"},
		{"INTERNAL_ADDR", "127.0.0.1"},
		{"MASTER_IP", "master.example.com"},
		{"CLUSTER_CIDR", "198.18.0.0/15"}, // overlaps VPN_CIDR
		{"CLUSTER_CIDR", "10.43.0.0/16"},  // overlaps SERVICE_CIDR
		{"CLUSTER_CIDR", "10.42.0.1/16"},
		{"CLUSTER_CIDR", "pods"},
		{"NODE_CIDR_MASK", "8"},
		{"NODE_CIDR_MASK", "31"},
		{"TLS", "maybe"},
		{"TLS_CERT_FILE", "/etc/gridweave/tls.crt"}, // without TLS_KEY_FILE
		{"KUBE_JOIN_MODE", "kubeadm"},
		{"KUBELET_API_SERVER", "http://198.18.0.1:6443"},
		{"KUBELET_TOKEN_TTL", "10s"},
		{"KUBELET_DRAIN_TIMEOUT", "-1m"},
		{"KUBELET_DRAIN_TIMEOUT", "2h"},
		{"KUBELET_DRAIN_TIMEOUT", "soon"},
	} {
		if _, err := serverenv.Read(with(c.name, c.value)); err == nil || !strings.HasPrefix(err.Error(), c.name+":") {
			t.Errorf("%s=%q: %v, want an error naming the variable", c.name, c.value, err)
		}
	}
	// The cluster's DNS of the kubelet join mode: MASTER_VPN_IP, reached
	// through the tunnel; never a Service's cluster IP (no kube-proxy on
	// the machines), nor an address a machine may hold (another of the
	// VPN range, a pod's); k3s's agents take it from k3s.
	kubeletMode := []string{"KUBE_JOIN_MODE", "kubelet", "MASTER_VPN_IP", "198.18.0.1"}
	for _, c := range []struct {
		env []string
		say string
	}{
		{append(kubeletMode, "CLUSTER_DNS", "10.43.0.10"), "CLUSTER_DNS"}, // SERVICE_CIDR
		{append(kubeletMode, "CLUSTER_DNS", "10.100.0.9"), "CLUSTER_DNS"}, // a machine's VPN address
		{append(kubeletMode, "CLUSTER_DNS", "10.42.7.10"), "CLUSTER_DNS"}, // a pod's
		{append(kubeletMode, "CLUSTER_DNS", "8.8.8.8"), "CLUSTER_DNS"},
		{append(kubeletMode, "CLUSTER_DNS", "198.18.0.1,dns.local"), "CLUSTER_DNS"},
		{[]string{"KUBE_JOIN_MODE", "k3s", "CLUSTER_DNS", "198.18.0.1"}, "CLUSTER_DNS"},
		{[]string{"KUBE_JOIN_MODE", "k3s", "CLUSTER_DOMAIN", "gpu.example"}, "CLUSTER_DOMAIN"},
		{append(kubeletMode, "CLUSTER_DOMAIN", "Cluster_Local"), "CLUSTER_DOMAIN"},
		{append(kubeletMode, "CLUSTER_DOMAIN", "cluster..local"), "CLUSTER_DOMAIN"},
	} {
		if _, err := serverenv.Read(with(c.env...)); err == nil || !strings.HasPrefix(err.Error(), c.say+":") {
			t.Errorf("%v: %v, want an error naming %s", c.env, err, c.say)
		}
	}
	cfg, err := serverenv.Read(with(append(kubeletMode, "CLUSTER_DNS", " 198.18.0.1 ", "CLUSTER_DOMAIN", "gpu.example.")...))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(cfg.KubeletClusterDNS) != "[198.18.0.1]" || cfg.ClusterDomain != "gpu.example" {
		t.Errorf("CLUSTER_DNS and CLUSTER_DOMAIN read as %v and %q", cfg.KubeletClusterDNS, cfg.ClusterDomain)
	}
	for _, c := range []struct{ name, value string }{
		{"INTERNAL_ADDR", "127.0.0.1:8801"},
		{"INTERNAL_ADDR", "[::1]:8801"},
		{"INTERNAL_ADDR", "172.17.0.1:8801"},
		{"INTERNAL_ADDR", "198.19.7.9:8801"}, // the benchmarking range, never routed on the internet
		{"INTERNAL_TOKEN", strings.Repeat("t", 32)},
		{"MASTER_IP", "2001:db8::7"},
		{"TLS", "off"},
		{"TLS", "ON"},
	} {
		cfg, err := serverenv.Read(with(c.name, c.value))
		if err == nil {
			err = serverenv.Explain(cfg.Check())
		}
		if err != nil {
			t.Errorf("%s=%q refused: %v", c.name, c.value, err)
		}
	}
}

// TestEmptyEnvironmentIsTheLibrarysDefaults: with nothing set, the
// configuration is gridweave.DefaultConfig's, naming settings by their
// variables.
func TestEmptyEnvironmentIsTheLibrarysDefaults(t *testing.T) {
	cfg, err := serverenv.Read(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.SettingName == nil || cfg.Name("JWTSecret") != "JWT_SECRET" {
		t.Errorf("settings are named %q, want JWT_SECRET", cfg.Name("JWTSecret"))
	}
	cfg.SettingName = nil
	if want := gridweave.DefaultConfig(); !reflect.DeepEqual(cfg, want) {
		t.Errorf("the empty environment reads as\n%+v\nnot the defaults\n%+v", cfg, want)
	}
}
