package wgmesh_test

import (
	"context"
	"net/netip"
	"testing"

	"gridweave.dev/internal/netnstest"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/meshtest"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/mesh/wgmesh"
)

// The mesh conformance suite on a device this process runs, configured in
// place through Device.Client (what the server does with the device it
// makes) and read over its socket.
func TestConformanceInProcess(t *testing.T) {
	skipShort(t)
	netnstest.RequireRoot(t)
	open := func(t *testing.T) mesh.Mesh {
		ctx := context.Background()
		name := netnstest.UniqueName("gwip")
		dev, err := wgmesh.OpenDevice(ctx, name, netip.Prefix{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := dev.Close(); err != nil {
				t.Error(err)
			}
		})
		if dev.Kind != wgmesh.DeviceUserspace {
			t.Skipf("OpenDevice made a %s device: this kernel has WireGuard, so no device runs in this process", dev.Kind)
		}
		key, err := wgkey.GeneratePrivate()
		if err != nil {
			t.Fatal(err)
		}
		if err := wgmesh.SetPrivateKey(ctx, name, key, 0); err != nil {
			t.Fatal(err)
		}
		client := dev.Client()
		if client == nil {
			t.Fatal("a userspace device has no in-process client")
		}
		t.Cleanup(func() { _ = client.Close() })
		m, err := wgmesh.New(ctx, name, &wgmesh.Options{Client: client})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	meshtest.Run(t, open)
	meshtest.RunObserver(t, open)
}
