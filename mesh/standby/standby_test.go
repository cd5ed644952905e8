package standby_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/meshtest"
	"gridweave.dev/mesh/standby"
	"gridweave.dev/mesh/wgkey"
)

func key(t *testing.T) wgkey.Key {
	t.Helper()
	_, pub, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

func TestCallsGoToTheDeviceOnlyWhileAttached(t *testing.T) {
	ctx := context.Background()
	master := key(t)
	m := standby.New(master)
	peer := mesh.Peer{PublicKey: key(t), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.0.2/32")}}
	if err := m.UpsertPeer(ctx, peer); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.PublicKey(ctx); got != master {
		t.Errorf("public key %s, want the shared %s", got, master)
	}
	// A peer this replica never saw: the leader's to remove.
	if err := m.RemovePeer(ctx, key(t)); err != nil {
		t.Errorf("removing an unknown peer without a device: %v", err)
	}
	device := memmesh.New(master)
	m.Attach(device)
	if peers, _ := m.Peers(ctx); len(peers) != 0 {
		t.Errorf("attached: peers %v, want the device's (none)", peers)
	}
	if err := m.UpsertPeer(ctx, peer); err != nil {
		t.Fatal(err)
	}
	if peers, _ := device.Peers(ctx); len(peers) != 1 {
		t.Errorf("the device holds %d peers, want 1", len(peers))
	}
	if err := m.RemovePeer(ctx, key(t)); !errors.Is(err, mesh.ErrPeerNotFound) {
		t.Errorf("removing an unknown peer from the device: %v, want ErrPeerNotFound", err)
	}
	if d := m.Detach(); d != device {
		t.Errorf("Detach returned %v", d)
	}
	if peers, _ := m.Peers(ctx); len(peers) != 1 || peers[0].PublicKey != peer.PublicKey {
		t.Errorf("detached: peers %v, want the memory's one", peers)
	}
}

type recordingRoutes struct{ replaced, deleted []netip.Prefix }

func (r *recordingRoutes) Replace(_ context.Context, p netip.Prefix) error {
	r.replaced = append(r.replaced, p)
	return nil
}

func (r *recordingRoutes) Delete(_ context.Context, p netip.Prefix) error {
	r.deleted = append(r.deleted, p)
	return nil
}

func TestRoutesAreMadeOnlyWhileAttached(t *testing.T) {
	ctx := context.Background()
	var routes standby.Routes
	p := netip.MustParsePrefix("10.42.0.0/24")
	if err := routes.Replace(ctx, p); err != nil {
		t.Fatal(err)
	}
	table := &recordingRoutes{}
	routes.Attach(table)
	_ = routes.Replace(ctx, p)
	_ = routes.Delete(ctx, p)
	routes.Attach(nil)
	_ = routes.Replace(ctx, p)
	if len(table.replaced) != 1 || len(table.deleted) != 1 {
		t.Errorf("table saw %v replaced and %v deleted, want one each", table.replaced, table.deleted)
	}
}

// A standby answers one peer's status as its device does when attached,
// and as its memory does otherwise.
func TestObserverConformance(t *testing.T) {
	t.Run("detached", func(t *testing.T) {
		meshtest.RunObserver(t, func(t *testing.T) mesh.Mesh { return standby.New(key(t)) })
	})
	t.Run("attached", func(t *testing.T) {
		meshtest.RunObserver(t, func(t *testing.T) mesh.Mesh {
			master := key(t)
			m := standby.New(master)
			m.Attach(memmesh.New(master))
			return m
		})
	})
}
