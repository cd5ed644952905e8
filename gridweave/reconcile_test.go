package gridweave_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
)

// restarted is the same master (ledger, cluster) with a new, empty device.
func restarted(t *testing.T, h *harness) (*gridweave.Server, mesh.Mesh) {
	t.Helper()
	_, pub, _ := wgkey.GeneratePair()
	m := memmesh.New(pub)
	s, err := gridweave.New(context.Background(), h.cfg, gridweave.Backends{Keyring: h.kr, Mesh: m, Ray: h.fakes.Client, Kube: h.fakes.Kube, Now: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

func TestRestoreMeshAfterARestart(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	_, key := h.mint("org")
	a, b, gone := newNode(t, "a"), newNode(t, "b"), newNode(t, "gone")
	h.kubeNode(b, "10.42.9.0/24")
	h.want(h.validate(a, key), 200, "validate a")
	h.want(h.validate(b, key), 200, "validate b")
	h.want(h.register(b, nil), 200, "register b")
	h.want(h.validate(gone, key), 200, "validate gone")
	h.want(h.do("POST", "/v1/nodes/disconnect", testAdminToken, map[string]any{"hostname": "gone"}), 200, "disconnect gone")

	s, m := restarted(t, h)
	_, stale, _ := wgkey.GeneratePair()
	if err := m.UpsertPeer(ctx, mesh.Peer{PublicKey: stale, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.77.7/32")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Fleet().RestoreMesh(ctx); err != nil {
		t.Fatal(err)
	}
	peers, _ := m.Peers(ctx)
	got := map[string][]netip.Prefix{}
	for _, p := range peers {
		got[p.PublicKey.String()] = p.AllowedIPs
	}
	if len(got) != 2 || !slices.Contains(got[a.public], netip.MustParsePrefix(a.vpnIP+"/32")) ||
		!slices.Contains(got[b.public], netip.MustParsePrefix("10.42.9.0/24")) {
		t.Errorf("peers after the restore: %v; want a's and b's (with its pod CIDR) only", got)
	}
}

func TestHalfFinishedJoinsAreReleased(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	_, key := h.mint("org")
	stuck, done := newNode(t, "stuck"), newNode(t, "done")
	h.want(h.validate(stuck, key), 200, "validate stuck")
	h.want(h.validate(done, key), 200, "validate done")
	h.want(h.register(done, nil), 200, "register done")
	if released, err := h.server.Fleet().ReleaseHalfFinishedJoins(ctx); err != nil || len(released) != 0 {
		t.Fatalf("released %v (%v) before the TTL", released, err)
	}
	h.clock.Advance(11 * time.Minute)
	released, err := h.server.Fleet().ReleaseHalfFinishedJoins(ctx)
	if err != nil || !slices.Equal(released, []string{"stuck"}) {
		t.Fatalf("released %v, %v; want [stuck]", released, err)
	}
	if _, err := h.kr.Node(ctx, "stuck"); err == nil {
		t.Error("the half-finished join is still in the ledger")
	}
	peers, _ := h.mesh.Peers(ctx)
	if len(peers) != 1 || peers[0].PublicKey.String() != done.public {
		t.Errorf("peers %v; want only the registered node's", peers)
	}
	// The hostname and the address are free again.
	again := newNode(t, "stuck")
	h.want(h.validate(again, key), 200, "a new machine takes the released hostname")
}

// TestRunFollowsKubernetesNodes: a GPU node registers before k3s made its
// Kubernetes Node; when the Node appears with its pod CIDR, Run routes the
// pod CIDR to the node's peer and labels the Node with its pool.
func TestRunFollowsKubernetesNodes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := newHarness(t, nil)
	done := make(chan error, 1)
	go func() { done <- h.server.Run(ctx) }()
	_, key := h.mint("org")
	n := newNode(t, "late-node")
	h.want(h.validate(n, key), 200, "validate")
	reg := h.want(h.register(n, h100s(4)), 200, "register")
	group := reg.body["worker_group"].(string)
	h.kubeNode(n, "10.42.33.0/24")
	deadline := time.Now().Add(20 * time.Second)
	for {
		node, _ := h.kr.Node(ctx, "late-node")
		kn, _ := h.fakes.Kube.CoreV1().Nodes().Get(ctx, "late-node", metav1.GetOptions{})
		peers, _ := h.mesh.Peers(ctx)
		routed := len(peers) == 1 && slices.Contains(peers[0].AllowedIPs, netip.MustParsePrefix("10.42.33.0/24"))
		if node.PodCIDR.String() == "10.42.33.0/24" && routed && kn != nil && kn.Labels[fleet.NodePoolLabel] == group {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not in step after 20 s: ledger pod CIDR %s, peers %v, labels %v", node.PodCIDR, peers, kn.Labels)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A Node whose pod CIDR overlaps another node's is refused, and logged.
	other := newNode(t, "other")
	h.want(h.validate(other, key), 200, "validate other")
	h.want(h.register(other, nil), 200, "register other")
	h.kubeNode(other, "10.42.33.128/25")
	deadline = time.Now().Add(20 * time.Second)
	for !strings.Contains(h.logs.String(), `"msg":"syncing a Kubernetes node","node":"other"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the refused pod CIDR was never logged:\n%s", h.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(h.logs.String(), `pod CIDR 10.42.33.128/25 overlaps the pod CIDR of node \"late-node\"`) {
		t.Errorf("the log does not say what the pod CIDR overlaps:\n%s", h.logs.String())
	}
	if node, _ := h.kr.Node(ctx, "other"); node.PodCIDR.IsValid() {
		t.Errorf("an overlapping pod CIDR was recorded: %s", node.PodCIDR)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}
