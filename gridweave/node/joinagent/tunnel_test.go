package joinagent_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"gridweave.dev/gridweave/node/joinagent"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/wgdevice"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/mesh/wgmesh"
)

// TestWireGuardTunnelCarriesTraffic brings the agent's tunnel up for real:
// a master host (a network namespace with a wireguard-go device driven by
// wgmesh) and a node host joined by a veth pair; inside the node host the
// agent's WireGuardTunnel starts wireguard-go, configures it and addresses
// it; TCP then crosses the tunnel to the master's VPN address. Up twice
// converges; Down removes the device and the traffic stops.
func TestWireGuardTunnelCarriesTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("network namespaces and wireguard-go; run make test")
	}
	netnstest.RequireRoot(t)
	ctx := context.Background()
	master, node := netnstest.New(t, "gwjm"), netnstest.New(t, "gwjn")
	netnstest.Link(t, master, "198.18.210.1/30", node, "198.18.210.2/30")
	dev := wgdevice.Start(t, master, "gwjm", 51820)
	dev.Up(t, master, "198.19.210.1/24")
	m, err := wgmesh.New(ctx, dev.Name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	nodeKey, nodePub, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.UpsertPeer(ctx, mesh.Peer{PublicKey: nodePub, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.210.2/32")}}); err != nil {
		t.Fatal(err)
	}

	echoServer(t, master, "198.19.210.1:7777")
	echo := func() error { return echoFrom(node, "198.19.210.1:7777") }

	tunnel := &joinagent.WireGuardTunnel{Interface: netnstest.UniqueName("gwjt"), Userspace: wgdevice.Binary(t)}
	cfg := joinagent.TunnelConfig{
		PrivateKey: nodeKey, Address: netip.MustParsePrefix("198.19.210.2/24"), MasterPublicKey: dev.PublicKey,
		MasterEndpoint: netip.MustParseAddrPort("198.18.210.1:51820"), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.210.0/24")},
		Keepalive: 25 * time.Second,
	}
	t.Cleanup(func() { _ = node.Do(func() error { return tunnel.Down(ctx) }) })
	for range 2 { // up, and up again: the same device, configured the same
		if err := node.Do(func() error { return tunnel.Up(ctx, cfg) }); err != nil {
			t.Fatalf("Up: %v", err)
		}
	}
	if err := eventually(echo); err != nil {
		t.Fatalf("no traffic across the agent's tunnel: %v", err)
	}
	if err := node.Do(func() error { return tunnel.Down(ctx) }); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if err := node.Command("ip", "link", "show", tunnel.Interface).Run(); err == nil {
		t.Error("the device is still there after Down")
	}
	if err := echo(); err == nil {
		t.Error("traffic still crosses after Down")
	}
}
