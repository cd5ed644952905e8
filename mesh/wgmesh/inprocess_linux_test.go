package wgmesh

import (
	"context"
	"log/slog"
	"net/netip"
	"testing"

	"gridweave.dev/internal/netnstest"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/meshtest"
	"gridweave.dev/mesh/wgkey"
)

// The mesh conformance suites on a wireguard-go device this process runs,
// configured in place through Device.Client (as the server configures the
// device it makes) and read over its socket. The device is made as
// OpenDevice makes one where the kernel has no WireGuard, whatever this
// kernel has.
func TestConformanceInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("real wireguard-go device; run make test")
	}
	netnstest.RequireRoot(t)
	open := func(t *testing.T) mesh.Mesh {
		ctx := context.Background()
		name := netnstest.UniqueName("gwip")
		dev, err := userspaceDevice(name, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := dev.Close(); err != nil {
				t.Error(err)
			}
		})
		if err := configure(name, netip.Prefix{}); err != nil {
			t.Fatal(err)
		}
		key, err := wgkey.GeneratePrivate()
		if err != nil {
			t.Fatal(err)
		}
		if err := SetPrivateKey(ctx, name, key, 0); err != nil {
			t.Fatal(err)
		}
		client := dev.Client()
		if client == nil {
			t.Fatal("a userspace device has no in-process client")
		}
		t.Cleanup(func() { _ = client.Close() })
		m, err := New(ctx, name, &Options{Client: client})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	meshtest.Run(t, open)
	meshtest.RunObserver(t, open)
}
