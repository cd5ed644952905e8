package wgmesh_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"slices"
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl"

	"gridweave.dev/internal/netnstest"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/mesh/wgmesh"
)

// TestOpenDeviceMakesAndAdopts: a missing device is made (a kernel link,
// or wireguard-go in the process where the kernel has no WireGuard, as
// here), addressed, up and driven through wgctrl like any other; a
// device that exists is adopted and left alone by Close; a made one goes
// with Close.
func TestOpenDeviceMakesAndAdopts(t *testing.T) {
	netnstest.RequireRoot(t)
	ctx := context.Background()
	name := netnstest.UniqueName("gwod")
	address := netip.MustParsePrefix("198.18.77.1/24")
	dev, err := wgmesh.OpenDevice(ctx, name, address, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })
	if dev.Kind != wgmesh.DeviceUserspace && dev.Kind != wgmesh.DeviceKernel {
		t.Fatalf("a missing device was %s", dev.Kind)
	}
	iface, err := net.InterfaceByName(name)
	if err != nil || iface.Flags&net.FlagUp == 0 {
		t.Fatalf("the made device: %+v, %v", iface, err)
	}
	addrs, _ := iface.Addrs()
	if !slices.ContainsFunc(addrs, func(a net.Addr) bool { return a.String() == address.String() }) {
		t.Errorf("the made device's addresses %v lack %s", addrs, address)
	}
	key, _ := wgkey.GeneratePrivate()
	if err := wgmesh.SetPrivateKey(ctx, name, key, 0); err != nil {
		t.Fatal(err)
	}
	m, err := wgmesh.New(ctx, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, peer, _ := wgkey.GeneratePair()
	if err := m.UpsertPeer(ctx, mesh.Peer{PublicKey: peer, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.77.2/32")}}); err != nil {
		t.Fatal(err)
	}
	c, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d, err := c.Device(name); err != nil || len(d.Peers) != 1 || d.PublicKey.String() != mustPublic(t, key).String() {
		t.Fatalf("the device through wgctrl: %+v, %v", d, err)
	}

	adopted, err := wgmesh.OpenDevice(ctx, name, address, nil)
	if err != nil || adopted.Kind != wgmesh.DeviceAdopted {
		t.Fatalf("an existing device: %+v, %v", adopted, err)
	}
	if err := adopted.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.InterfaceByName(name); err != nil {
		t.Fatal("closing an adopted device removed it")
	}

	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.InterfaceByName(name); err == nil {
		t.Error("the made device outlived Close")
	}
	if _, err := os.Stat("/var/run/wireguard/" + name + ".sock"); err == nil {
		t.Error("the UAPI socket outlived Close")
	}
}

func mustPublic(t *testing.T, k wgkey.PrivateKey) wgkey.Key {
	t.Helper()
	pub, err := k.Public()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}
