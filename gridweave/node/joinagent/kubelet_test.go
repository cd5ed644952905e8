package joinagent_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/node/gpus"
	"gridweave.dev/gridweave/node/joinagent"
)

// caPEM is a self-signed CA certificate, PEM.
func caPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "cluster-ca"}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestKubeletModeHandsTheKubeletStepWhatItNeeds: against a master of the
// kubelet join mode the agent installs the master's kubelet (its SHA-256
// checked) and calls the kubelet step with the API server, the cluster
// CA, a bootstrap token, the node's address, the pod range and the
// cluster's DNS; the k3s
// step does not run. An agent without a kubelet step is refused, saying
// why.
func TestKubeletModeHandsTheKubeletStepWhatItNeeds(t *testing.T) {
	dir := t.TempDir()
	ca := caPEM(t)
	writeTestFile(t, filepath.Join(dir, "ca.crt"), ca)
	kubelet := filepath.Join(dir, "kubelet")
	writeTestFile(t, kubelet, []byte("#!/bin/sh\necho kubelet v1.35.4\n"))
	url, _, _ := masterWith(t, func(c *gridweave.Config) {
		c.KubeJoinMode, c.K3sURL, c.KubeletCAFile = gridweave.JoinModeKubelet, "", filepath.Join(dir, "ca.crt")
		c.KubeletBinary, c.KubeletTLSServerName, c.ClusterCIDR = kubelet, "kubernetes", netip.MustParsePrefix("198.18.64.0/18")
		c.KubeletClusterDNS, c.ClusterDomain = []netip.Addr{netip.MustParseAddr("198.18.128.1")}, "gpu.example"
	})
	ctx := context.Background()
	var got []joinagent.KubeletJoin
	installed := filepath.Join(t.TempDir(), "node", "bin", "kubelet")
	opts := joinagent.Options{Master: url, StateDir: t.TempDir(), Key: mintKey(t, url), Hostname: "gpu-kubelet", Version: "1.2.3", Tunnel: &fakeTunnel{},
		K3sAgent: func(context.Context, joinagent.K3sJoin) error {
			t.Error("the k3s step ran in the kubelet join mode")
			return nil
		},
		KubeletAgent:  func(_ context.Context, j joinagent.KubeletJoin) error { got = append(got, j); return nil },
		KubeletBinary: installed,
		DetectGPUs:    func(context.Context) ([]gpus.GPU, error) { return nil, nil },
	}
	res, err := joinagent.Join(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("the kubelet step ran %d times", len(got))
	}
	j := got[0]
	if j.APIServer != "https://198.18.128.1:6443" || j.CACertPEM != string(ca) || j.TLSServerName != "kubernetes" || j.NodeName != "gpu-kubelet" ||
		j.NodeIP != res.VPNIP || j.ClusterCIDR.String() != "198.18.64.0/18" || j.NodeCIDRMask != 24 || j.Kubelet != installed ||
		fmt.Sprint(j.ClusterDNS) != "[198.18.128.1]" || j.ClusterDomain != "gpu.example" {
		t.Errorf("the kubelet step got %+v", j)
	}
	if !regexp.MustCompile(`^[a-z0-9]{6}\.[a-z0-9]{16}$`).MatchString(j.BootstrapToken) {
		t.Errorf("bootstrap token %q", j.BootstrapToken)
	}
	if len(j.NodeLabels) == 0 || !strings.HasPrefix(j.NodeLabels[0], "gridweave.dev/node=") {
		t.Errorf("node labels %v", j.NodeLabels)
	}
	if raw, err := os.ReadFile(installed); err != nil || !strings.Contains(string(raw), "kubelet v1.35.4") {
		t.Errorf("the master's kubelet was not installed: %q %v", raw, err)
	}
	// A new kubelet on the master replaces the machine's at the next join.
	writeTestFile(t, kubelet, []byte("#!/bin/sh\necho kubelet v1.35.5\n"))
	if _, err := joinagent.Join(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("the kubelet step ran %d times in two joins", len(got))
	}
	if raw, _ := os.ReadFile(installed); !strings.Contains(string(raw), "v1.35.5") || got[1].BootstrapToken == j.BootstrapToken {
		t.Errorf("the second join: kubelet %q, token %q (the first %q)", raw, got[1].BootstrapToken, j.BootstrapToken)
	}

	opts.KubeletAgent, opts.StateDir, opts.Hostname = nil, t.TempDir(), "gpu-no-kubelet"
	if _, err := joinagent.Join(ctx, opts); err == nil || !strings.Contains(err.Error(), "KUBE_JOIN_MODE=kubelet") {
		t.Errorf("an agent without a kubelet step: %v", err)
	}
}

// TestAReleasedMachineJoinsAgainWithTheKey: the master released a machine
// (an administrator's disconnect); the join command run there again, its
// key in hand, joins it afresh instead of stopping at its stale node
// token.
func TestAReleasedMachineJoinsAgainWithTheKey(t *testing.T) {
	ctx := context.Background()
	url, _, kr := master(t)
	opts := joinagent.Options{Master: url, StateDir: t.TempDir(), Key: mintKey(t, url), Hostname: "gpu-released", Version: "1.2.3", Tunnel: &fakeTunnel{},
		DetectGPUs: func(context.Context) ([]gpus.GPU, error) { return nil, nil }}
	if _, err := joinagent.Join(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Release(ctx, "gpu-released", "admin:test"); err != nil {
		t.Fatal(err)
	}
	res, err := joinagent.Join(ctx, opts)
	if err != nil || res.Rejoined {
		t.Fatalf("the join command again after a release: %+v, %v", res, err)
	}
	if n, err := kr.Node(ctx, "gpu-released"); err != nil || n.VPNIP != res.VPNIP {
		t.Errorf("the ledger after joining afresh: %+v, %v", n, err)
	}
	opts.Key = ""
	if _, err := kr.Release(ctx, "gpu-released", "admin:test"); err != nil {
		t.Fatal(err)
	}
	if _, err := joinagent.Join(ctx, opts); err == nil || !strings.Contains(err.Error(), "invalid_node_token") {
		t.Errorf("without a key, a released machine: %v, want the master's 401", err)
	}
}

func writeTestFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
}
