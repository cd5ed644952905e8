package gridweave_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"gridweave.dev/gridweave"
)

// TestConfigValidateNamesTheSetting: the defaults are valid; each
// refusal is a *SettingError naming the Config field, and its message
// names other settings as SettingName says (the field's name without
// one).
func TestConfigValidateNamesTheSetting(t *testing.T) {
	if err := gridweave.DefaultConfig().Validate(); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	for _, c := range []struct {
		setting string
		change  func(*gridweave.Config)
	}{
		{"Port", func(c *gridweave.Config) { c.Port = 0 }},
		{"ReflexivePort", func(c *gridweave.Config) { c.ReflexivePort = c.WireGuardPort - 1 }},
		{"ReflexivePort", func(c *gridweave.Config) { c.ReflexivePort = 65535 }},
		{"MaxBodyBytes", func(c *gridweave.Config) { c.MaxBodyBytes = 10 }},
		{"ShutdownTimeout", func(c *gridweave.Config) { c.ShutdownTimeout = 0 }},
		{"LeaseDuration", func(c *gridweave.Config) { c.LeaseDuration = time.Second }},
		{"KubeletDrainTimeout", func(c *gridweave.Config) { c.KubeletDrainTimeout = 2 * time.Hour }},
		{"MasterVPNIP", func(c *gridweave.Config) { c.MasterVPNIP = netip.MustParseAddr("10.200.0.1") }},
		{"ClusterCIDR", func(c *gridweave.Config) { c.ClusterCIDR = netip.MustParsePrefix("10.100.0.0/15") }},
		{"ServiceCIDR", func(c *gridweave.Config) { c.ServiceCIDR = netip.MustParsePrefix("10.43.0.1/16") }},
		{"InternalAddr", func(c *gridweave.Config) { c.InternalAddr = "0.0.0.0:8801" }},
		{"MasterIP", func(c *gridweave.Config) { c.MasterIP = "master.example.com" }},
		{"SystemNamespace", func(c *gridweave.Config) { c.SystemNamespace = c.Namespace }},
		{"KubeJoinMode", func(c *gridweave.Config) { c.KubeJoinMode = "kubeadm" }},
		{"KubeletClusterDNS", func(c *gridweave.Config) { c.KubeletClusterDNS = []netip.Addr{c.MasterVPNIP} }}, // k3s mode
		{"KubeletAPIServer", func(c *gridweave.Config) { c.KubeletAPIServer = "http://10.100.0.1:6443" }},
		{"Store", func(c *gridweave.Config) { c.Store = "etcd" }},
		{"TLSCertFile", func(c *gridweave.Config) { c.TLSCertFile = "/etc/gridweave/tls.crt" }},
	} {
		cfg := gridweave.DefaultConfig()
		c.change(&cfg)
		var refused *gridweave.SettingError
		if err := cfg.Validate(); !errors.As(err, &refused) || refused.Setting != c.setting || !strings.HasPrefix(err.Error(), "Config."+c.setting+": ") {
			t.Errorf("%s: Validate() = %v, want a *SettingError naming it", c.setting, err)
		}
	}
	// A Config built by hand without DefaultConfig is told what is wrong
	// with the empty value, not that it was set.
	cfg := gridweave.DefaultConfig()
	cfg.ClusterDomain = ""
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "is not a DNS domain") {
		t.Errorf("an empty ClusterDomain: %v, want it refused as no DNS domain", err)
	}
	cfg = gridweave.DefaultConfig()
	cfg.InternalAddr = "10.100.0.9:8801"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "inside Config.VPNCIDR") {
		t.Errorf("without SettingName: %v, want the other setting named Config.VPNCIDR", err)
	}
	cfg.SettingName = func(field string) string { return map[string]string{"VPNCIDR": "--vpn-cidr"}[field] }
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "inside --vpn-cidr") {
		t.Errorf("with SettingName: %v, want the other setting named --vpn-cidr", err)
	}
	if cfg.Name("Port") != "Config.Port" {
		t.Errorf("a setting SettingName does not name: %q", cfg.Name("Port"))
	}
}

// TestConfigCheckRefusesUnsafeSecrets: outside dev mode the default
// configuration is refused for its JWT secret, then the admin token,
// each a *SettingError; dev mode allows both.
func TestConfigCheckRefusesUnsafeSecrets(t *testing.T) {
	cfg := gridweave.DefaultConfig()
	for _, c := range []struct {
		setting string
		change  func(*gridweave.Config)
	}{
		{"JWTSecret", func(*gridweave.Config) {}},
		{"JWTSecret", func(c *gridweave.Config) { c.JWTSecret = "short" }},
		{"AdminToken", func(c *gridweave.Config) { c.JWTSecret = strings.Repeat("s", 32) }},
		{"InternalToken", func(c *gridweave.Config) { c.AdminToken, c.InternalToken = strings.Repeat("a", 16), "short" }},
	} {
		c.change(&cfg)
		var refused *gridweave.SettingError
		if err := cfg.Check(); !errors.As(err, &refused) || refused.Setting != c.setting {
			t.Errorf("Check() = %v, want a *SettingError naming %s", err, c.setting)
		}
	}
	dev := gridweave.DefaultConfig()
	dev.Dev = true
	if err := dev.Check(); err != nil {
		t.Errorf("dev mode refused: %v", err)
	}
}
