package gridweave_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"

	"gridweave.dev/gridweave"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
)

// readCounts counts what is read of the fleet: items returned by the
// mesh and the ledger, whatever the call.
type readCounts struct{ mesh, ledger atomic.Int64 }

// countingMesh is a mesh.Observer that counts the peers each read returns.
type countingMesh struct {
	*memmesh.Mesh
	n *readCounts
}

func (m countingMesh) Peers(ctx context.Context) ([]mesh.Peer, error) {
	p, err := m.Mesh.Peers(ctx)
	m.n.mesh.Add(int64(len(p)))
	return p, err
}

func (m countingMesh) PeerStatuses(ctx context.Context) ([]mesh.PeerStatus, error) {
	st, err := m.Mesh.PeerStatuses(ctx)
	m.n.mesh.Add(int64(len(st)))
	return st, err
}

func (m countingMesh) PeerStatus(ctx context.Context, key wgkey.Key) (mesh.PeerStatus, error) {
	m.n.mesh.Add(1)
	return m.Mesh.PeerStatus(ctx, key)
}

// countingStore is a ledger store that counts the records each read
// returns.
type countingStore struct {
	joinkeys.Store
	n *readCounts
}

func (s countingStore) Nodes(ctx context.Context) ([]joinkeys.NodeRecord, error) {
	r, err := s.Store.Nodes(ctx)
	s.n.ledger.Add(int64(len(r)))
	return r, err
}

func (s countingStore) NodesAfter(ctx context.Context, after string, limit int) ([]joinkeys.NodeRecord, error) {
	r, err := s.Store.NodesAfter(ctx, after, limit)
	s.n.ledger.Add(int64(len(r)))
	return r, err
}

func (s countingStore) Node(ctx context.Context, hostname string) (joinkeys.NodeRecord, error) {
	s.n.ledger.Add(1)
	return s.Store.Node(ctx, hostname)
}

func (s countingStore) NodeByPublicKey(ctx context.Context, key wgkey.Key) (joinkeys.NodeRecord, error) {
	s.n.ledger.Add(1)
	return s.Store.NodeByPublicKey(ctx, key)
}

func (s countingStore) Keys(ctx context.Context) ([]joinkeys.KeyRecord, error) {
	r, err := s.Store.Keys(ctx)
	s.n.ledger.Add(int64(len(r)))
	return r, err
}

func (s countingStore) Audit(ctx context.Context, q joinkeys.AuditQuery) ([]joinkeys.AuditEvent, error) {
	r, err := s.Store.Audit(ctx, q)
	s.n.ledger.Add(int64(len(r)))
	return r, err
}

// TestAJoinReadsNothingOfTheFleet: what a validate and a register read of
// the mesh and the ledger is the same with 10 nodes joined as with 10,000:
// nothing on the join's path reads the whole fleet (a regression once put
// every peer's status, sorted, into each register's answer).
func TestAJoinReadsNothingOfTheFleet(t *testing.T) {
	counts := &readCounts{}
	_, masterKey, _ := wgkey.GeneratePair()
	m := countingMesh{Mesh: memmesh.New(masterKey), n: counts}
	store := countingStore{Store: new(memstore.Store), n: counts}
	h := newHarness(t, &harnessOptions{store: store, mesh: m, config: func(c *gridweave.Config) {
		c.VPNCIDR, c.MasterVPNIP = netip.MustParsePrefix("198.18.0.0/16"), netip.MustParseAddr("198.18.0.1")
		c.RateLimitPerMinute = 1 << 30
	}})
	_, key := h.mint("org")
	ctx := context.Background()
	fill := func(upTo int) {
		t.Helper()
		m, err := h.kr.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: 3600e9})
		if err != nil {
			t.Fatal(err)
		}
		for i := len(mustNodes(t, h)); i < upTo; i++ {
			_, pub, _ := wgkey.GeneratePair()
			j, err := h.kr.Join(ctx, joinkeys.JoinRequest{Key: m.Secret, Hostname: fmt.Sprintf("fill-%05d", i), PublicKey: pub.String(), Version: "1.4.2"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.kr.Register(ctx, joinkeys.Registration{NodeToken: j.NodeToken, Hostname: j.Node.Hostname, Version: "1.4.2"}); err != nil {
				t.Fatal(err)
			}
			if err := h.mesh.UpsertPeer(ctx, mesh.Peer{PublicKey: pub, AllowedIPs: []netip.Prefix{netip.PrefixFrom(j.Node.VPNIP, 32)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	joinOne := func(hostname string) (meshReads, ledgerReads int64) {
		t.Helper()
		n := newNode(t, hostname)
		m0, l0 := counts.mesh.Load(), counts.ledger.Load()
		h.want(h.validate(n, key), 200, "validate "+hostname)
		h.want(h.register(n, h100s(1)), 200, "register "+hostname)
		return counts.mesh.Load() - m0, counts.ledger.Load() - l0
	}
	fill(10)
	smallMesh, smallLedger := joinOne("measured-small")
	fill(10_000)
	bigMesh, bigLedger := joinOne("measured-big")
	t.Logf("a validate and a register read %d peers and %d ledger records with 10 nodes, %d and %d with 10,000", smallMesh, smallLedger, bigMesh, bigLedger)
	if bigMesh != smallMesh || bigLedger != smallLedger {
		t.Errorf("what a join reads grows with the fleet: mesh %d → %d, ledger %d → %d", smallMesh, bigMesh, smallLedger, bigLedger)
	}
}

func mustNodes(t *testing.T, h *harness) []joinkeys.Node {
	t.Helper()
	nodes, err := h.kr.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}
