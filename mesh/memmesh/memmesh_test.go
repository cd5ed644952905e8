package memmesh_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/meshtest"
	"gridweave.dev/mesh/wgkey"
)

func TestConformance(t *testing.T) {
	meshtest.Run(t, func(*testing.T) mesh.Mesh { return new(memmesh.Mesh) })
	meshtest.RunObserver(t, func(*testing.T) mesh.Mesh { return new(memmesh.Mesh) })
}

func TestInterceptorInjectsFaults(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("device busy")
	m := &meshtest.Interceptor{Inner: new(memmesh.Mesh), Before: meshtest.FailNext(meshtest.OpUpsertPeer, 1, boom)}
	p := mesh.Peer{PublicKey: meshtest.NewKey(t), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.0.2/32")}}
	if err := m.UpsertPeer(ctx, p); !errors.Is(err, boom) {
		t.Fatalf("first upsert = %v, want the injected fault", err)
	}
	if peers, _ := m.Peers(ctx); len(peers) != 0 {
		t.Fatalf("a failed upsert reached the mesh: %v", peers)
	}
	if err := m.UpsertPeer(ctx, p); err != nil {
		t.Fatalf("second upsert = %v", err)
	}
	if got := m.Calls(meshtest.OpUpsertPeer); got != 2 {
		t.Fatalf("counted %d upserts, want 2", got)
	}
}

func ExampleMesh() {
	ctx := context.Background()
	m := new(memmesh.Mesh) // the zero value is ready
	node := mesh.Peer{
		PublicKey:  wgkey.MustParse("HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw="),
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.19.0.2/32")},
	}
	fmt.Println(m.UpsertPeer(ctx, node))

	// Another key claiming the same VPN address is refused, naming the holder.
	intruder := mesh.Peer{
		PublicKey:  wgkey.MustParse("xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="),
		AllowedIPs: node.AllowedIPs,
	}
	err := m.UpsertPeer(ctx, intruder)
	fmt.Println(errors.Is(err, mesh.ErrAllowedIPHeld))
	fmt.Println(err)
	// Output:
	// <nil>
	// true
	// allowed IP 198.19.0.2/32 is held by peer HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=; remove that peer first
}

// TestPeerStatuses: the in-memory device reports what SetStatus gave it,
// and a peer's given endpoint until then; a status of a peer that is not
// there is ErrPeerNotFound, and a removed peer's status goes with it.
func TestPeerStatuses(t *testing.T) {
	ctx := context.Background()
	m := memmesh.New(wgkey.Key{1})
	a, b := wgkey.Key{2}, wgkey.Key{3}
	given := netip.MustParseAddrPort("192.0.2.1:51820")
	if err := m.UpsertPeer(ctx, mesh.Peer{PublicKey: a, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.0.2/32")}, Endpoint: given}); err != nil {
		t.Fatal(err)
	}
	if err := m.UpsertPeer(ctx, mesh.Peer{PublicKey: b, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.0.3/32")}}); err != nil {
		t.Fatal(err)
	}
	seen := mesh.PeerStatus{PublicKey: b, Endpoint: netip.MustParseAddrPort("203.0.113.9:4000"), LastHandshake: time.Unix(1700000000, 0), RxBytes: 5, TxBytes: 7}
	if err := m.SetStatus(seen); err != nil {
		t.Fatal(err)
	}
	if err := m.SetStatus(mesh.PeerStatus{PublicKey: wgkey.Key{9}}); !errors.Is(err, mesh.ErrPeerNotFound) {
		t.Errorf("the status of a peer that is not there: %v", err)
	}
	got, err := m.PeerStatuses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []mesh.PeerStatus{{PublicKey: a, Endpoint: given}, seen}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("statuses %+v, want %+v", got, want)
	}
	if err := m.RemovePeer(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := m.UpsertPeer(ctx, mesh.Peer{PublicKey: b, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.0.3/32")}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.PeerStatuses(ctx); got[1] != (mesh.PeerStatus{PublicKey: b}) {
		t.Errorf("a removed peer's status came back with it: %+v", got[1])
	}
}
