package main

import (
	"context"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/rayctl/rayctltest"
)

// TestRunJoinsEveryMachine: the tool joins every machine it says it did,
// with GPUs of three kinds, and the server's ledger and worker groups
// agree.
func TestRunJoinsEveryMachine(t *testing.T) {
	cfg := gridweave.DefaultConfig()
	cfg.AdminToken, cfg.JWTSecret, cfg.ServerVersion = "joinload-admin-token-0123456789", strings.Repeat("s", 40), "1.4.0"
	cfg.VPNCIDR, cfg.MasterVPNIP = netip.MustParsePrefix("198.18.0.0/20"), netip.MustParseAddr("198.18.0.1")
	pool, _ := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	kr, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	_, pub, _ := wgkey.GeneratePair()
	fakes := rayctltest.New(t, cfg.Namespace)
	s, err := gridweave.New(context.Background(), cfg, gridweave.Backends{Keyring: kr, Mesh: memmesh.New(pub), Ray: fakes.Client, Kube: fakes.Kube})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	rep, err := Run(context.Background(), Options{URL: srv.URL, AdminToken: cfg.AdminToken, Nodes: 60, Clients: 8, GPUs: true, Prefix: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Joins != 60 || rep.Failed != 0 || rep.OverallPerSec <= 0 || rep.FirstTenthPerSec <= 0 || rep.LastTenthPerSec <= 0 {
		t.Errorf("report %+v", rep)
	}
	nodes, _ := kr.Nodes(context.Background())
	pools := map[string]int32{}
	for _, n := range nodes {
		if n.Status != joinkeys.StatusRegistered {
			t.Errorf("%s is %s", n.Hostname, n.Status)
		}
		p, _ := fleet.PoolOf(n.GPUs)
		pools[p.Name]++
	}
	if len(nodes) != 60 || len(pools) != 3 {
		t.Fatalf("%d nodes in %d pools, want 60 in 3", len(nodes), len(pools))
	}
	rc, err := fakes.Client.GetCluster(context.Background(), cfg.Namespace, cfg.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rc.Spec.WorkerGroupSpecs {
		if *g.Replicas != pools[g.GroupName] {
			t.Errorf("group %s: %d replicas, the ledger %d", g.GroupName, *g.Replicas, pools[g.GroupName])
		}
	}
	if !strings.Contains(rep.String(), "60 joins") {
		t.Errorf("report %q", rep)
	}
}
