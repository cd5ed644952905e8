package joinagent_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"gridweave.dev/gridweave/joinagent"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/wgdevice"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/wgmesh"
	"gridweave.dev/wgkey"
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

	var ln net.Listener
	if err := master.Do(func() (err error) { ln, err = net.Listen("tcp", "198.19.210.1:7777"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	echo := func() error {
		return node.Do(func() error {
			c, err := net.DialTimeout("tcp", "198.19.210.1:7777", 2*time.Second)
			if err != nil {
				return err
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := c.Write([]byte("ping\n")); err != nil {
				return err
			}
			got := make([]byte, 5)
			_, err = io.ReadFull(c, got)
			return err
		})
	}

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
	var last error
	for range 10 { // the first packets wait for the handshake
		if last = echo(); last == nil {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if last != nil {
		t.Fatalf("no traffic across the agent's tunnel: %v", last)
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
