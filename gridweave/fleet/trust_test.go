package fleet_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/fleet/memfleet"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/rayctl"
)

// trustWorld is the fleet on the real API server, whose kubelets'
// credentials the node authorizer and NodeRestriction hold to their own
// Node: what a joined machine can write about itself, and only that.
type trustWorld struct {
	tc     *testcluster.Cluster
	svc    *fleet.Service
	ledger *joinkeys.Keyring
	peers  *memmesh.Mesh
	routes *memfleet.Routes
	key    string
}

// trustPodRange is the cluster's pod range here: 198.18.0.0/16 in /24s.
var trustPodRange = netip.MustParsePrefix("198.18.0.0/16")

func newTrustWorld(t *testing.T) *trustWorld {
	t.Helper()
	if testing.Short() {
		t.Skip("the test control plane; run make test")
	}
	tc := testcluster.Shared(t)
	ctx := context.Background()
	ns := fmt.Sprintf("fleet-trust-%d", worldSeq.Add(1))
	if err := tc.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	rc, err := rayctl.New(tc.Kube, tc.Ray, &rayctl.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := joinkeys.NewPool(netip.MustParsePrefix("198.18.64.0/20"), netip.MustParseAddr("198.18.64.1"))
	ledger, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte("a-jwt-secret-of-at-least-32-bytes"), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	_, masterKey, _ := wgkey.GeneratePair()
	w := &trustWorld{tc: tc, ledger: ledger, peers: memmesh.New(masterKey), routes: new(memfleet.Routes)}
	cfg := testConfig()
	cfg.ClusterCIDR = trustPodRange
	nodes := &fleet.KubeNodes{Client: tc.Kube}
	w.svc, err = fleet.New(cfg, fleet.Backends{Ledger: ledger, Peers: w.peers, Routes: w.routes, Nodes: nodes,
		Placement: &fleet.RayGroups{Ray: rc, Kube: tc.Kube, Ledger: ledger, Nodes: nodes, Marks: testMarks, Namespace: ns, Cluster: "trust",
			HeadImage: "rayproject/ray:2.54.0", WorkerImage: "rayproject/ray:2.54.0-gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := ledger.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	w.key = m.Secret
	return w
}

// kubelet is a client with the credential of Node name's kubelet.
func (w *trustWorld) kubelet(t *testing.T, name string) kubernetes.Interface {
	t.Helper()
	cfg, err := w.tc.NodeConfig(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createOwnNode creates Node name as its kubelet does, with labels and a
// pod CIDR of its choosing.
func createOwnNode(t *testing.T, kubelet kubernetes.Interface, name string, labels map[string]string, podCIDR string) (*corev1.Node, error) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{PodCIDR: podCIDR}}
	if podCIDR != "" {
		n.Spec.PodCIDRs = []string{podCIDR}
	}
	created, err := kubelet.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{})
	if err == nil {
		t.Cleanup(func() {
			_ = testcluster.Shared(t).Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	return created, err
}

func (w *trustWorld) kubeNode(t *testing.T, name string) fleet.KubeNode {
	t.Helper()
	kn, err := (&fleet.KubeNodes{Client: w.tc.Kube}).Get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return kn
}

// A machine's kubelet creates its own Node with a pod CIDR outside the
// cluster's pod range (a range the master's network or another node's
// endpoints live in; every IPv6 address): the fleet records, routes and
// allows none of it, at register and when its watch sees the Node.
func TestPodCIDROutsideTheClusterRangeIsRefused(t *testing.T) {
	w := newTrustWorld(t)
	ctx := context.Background()
	for _, cidr := range []string{"198.19.200.0/24", "::/0", "198.18.0.0/15"} {
		t.Run(cidr, func(t *testing.T) {
			host, pub := hostname("liar"), publicKey(t)
			v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key, Hostname: host, PublicKey: pub, Version: "1.4.0"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := createOwnNode(t, w.kubelet(t, host), host, marked(t, pub), cidr); err != nil {
				t.Fatalf("the kubelet creates its own Node with pod CIDR %s: %v", cidr, err)
			}
			_, err = w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0", GPUs: h100s(1)})
			if !errors.Is(err, fleet.ErrPodCIDROutsideCluster) {
				t.Errorf("register with pod CIDR %s = %v, want ErrPodCIDROutsideCluster", cidr, err)
			}
			if err := w.svc.SyncNode(ctx, w.kubeNode(t, host)); err != nil {
				t.Fatal(err)
			}
			n, err := w.ledger.Node(ctx, host)
			if err != nil {
				t.Fatal(err)
			}
			if n.PodCIDR.IsValid() {
				t.Errorf("the ledger recorded pod CIDR %s", n.PodCIDR)
			}
			if r := w.routes.Routed(); len(r) != 0 {
				t.Errorf("routed into the tunnel: %v", r)
			}
			all, err := w.peers.Peers(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var peer mesh.Peer
			for _, p := range all {
				if p.PublicKey == wgkey.MustParse(pub) {
					peer = p
				}
			}
			if len(peer.AllowedIPs) != 1 || peer.AllowedIPs[0] != netip.PrefixFrom(n.VPNIP, 32) {
				t.Errorf("the peer's allowed IPs: %v, want its VPN address only", peer.AllowedIPs)
			}
		})
	}
	// A pod CIDR of the range is taken, as before.
	host, pub := hostname("honest"), publicKey(t)
	v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key, Hostname: host, PublicKey: pub, Version: "1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := createOwnNode(t, w.kubelet(t, host), host, marked(t, pub), "198.18.7.0/24"); err != nil {
		t.Fatal(err)
	}
	reg, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0"})
	if err != nil || reg.Node.PodCIDR != netip.MustParsePrefix("198.18.7.0/24") {
		t.Fatalf("register with a pod CIDR of the range: %+v, %v", reg.Node, err)
	}
}

// An attacker whose kubelet credential names the victim's Node (k3s hands
// one for any name to whoever holds the agent token) creates it before
// the victim's kubelet does, with the mark the victim's public key gave
// when marks were its SHA-256, and cannot give it the pool label
// (NodeRestriction): the fleet does not take it for the victim's (no pool
// label, no pod CIDR routed), and a pool label put on it otherwise is
// removed.
func TestAMarkCannotBeForged(t *testing.T) {
	w := newTrustWorld(t)
	ctx := context.Background()
	victim, pub := hostname("victim"), publicKey(t)
	v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key, Hostname: victim, PublicKey: pub, Version: "1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	key := wgkey.MustParse(pub)
	sum := sha256.Sum256(key[:])
	forged := map[string]string{fleet.MarkLabel: hex.EncodeToString(sum[:20])}
	attacker := w.kubelet(t, victim)

	withPool := map[string]string{fleet.MarkLabel: forged[fleet.MarkLabel], fleet.NodePoolLabel: "gpu-nvidia-nvidia-h100-80gb-hbm3-x1"}
	if _, err := createOwnNode(t, attacker, victim, withPool, ""); !apierrors.IsForbidden(err) {
		t.Fatalf("a kubelet labels its own Node with %s: %v, want 403", fleet.NodePoolLabel, err)
	}
	if _, err := createOwnNode(t, attacker, victim, forged, "198.18.9.0/24"); err != nil {
		t.Fatalf("the attacker's Node: %v", err)
	}
	reg, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: victim, Version: "1.4.0", GPUs: h100s(1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.svc.SyncNode(ctx, w.kubeNode(t, victim)); err != nil {
		t.Fatal(err)
	}
	kn := w.kubeNode(t, victim)
	if kn.Labels[fleet.NodePoolLabel] != "" {
		t.Errorf("the forged Node was put into pool %q", kn.Labels[fleet.NodePoolLabel])
	}
	if reg.Node.PodCIDR.IsValid() || len(w.routes.Routed()) != 0 {
		t.Errorf("the forged Node's pod CIDR: ledger %s, routed %v", reg.Node.PodCIDR, w.routes.Routed())
	}

	// An administrator (or anyone but a kubelet) labels it: the fleet's
	// watch takes the label off a Node that is not its own.
	if err := (&fleet.KubeNodes{Client: w.tc.Kube}).SetLabel(ctx, kn, fleet.NodePoolLabel, "gpu-nvidia-nvidia-h100-80gb-hbm3-x1"); err != nil {
		t.Fatal(err)
	}
	if err := w.svc.SyncNode(ctx, w.kubeNode(t, victim)); err != nil {
		t.Fatal(err)
	}
	if got := w.kubeNode(t, victim).Labels[fleet.NodePoolLabel]; got != "" {
		t.Errorf("the pool label on a Node that is not the fleet's stays: %q", got)
	}

	// The victim's own mark, which only its validate answer carries, is
	// what makes its Node the fleet's.
	if testMarks.Mark(key) == forged[fleet.MarkLabel] {
		t.Fatal("the mark is the public key's SHA-256")
	}
}

// A label write carries the Node's metadata.uid: a Node deleted and made
// again under the same name since it was read is not changed.
func TestLabelsGoToTheNodeThatWasRead(t *testing.T) {
	w := newTrustWorld(t)
	ctx := context.Background()
	name := hostname("replaced")
	if _, err := w.tc.AddNode(ctx, name, nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.tc.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	old := w.kubeNode(t, name)
	if err := w.tc.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.tc.AddNode(ctx, name, nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	nodes := &fleet.KubeNodes{Client: w.tc.Kube}
	if err := nodes.SetLabel(ctx, old, fleet.NodePoolLabel, "gpu-x"); !errors.Is(err, fleet.ErrKubeNodeReplaced) {
		t.Errorf("a label for the Node read before it was replaced: %v, want ErrKubeNodeReplaced", err)
	}
	if got := w.kubeNode(t, name).Labels[fleet.NodePoolLabel]; got != "" {
		t.Errorf("the new Node got the label: %q", got)
	}
	if err := nodes.SetLabel(ctx, w.kubeNode(t, name), fleet.NodePoolLabel, "gpu-x"); err != nil {
		t.Fatal(err)
	}
	if got := w.kubeNode(t, name).Labels[fleet.NodePoolLabel]; got != "gpu-x" {
		t.Errorf("the label written with the right uid: %q", got)
	}
}

// A pod CIDR an older server recorded outside the cluster's pod range is
// cleared when the fleet restores the mesh: out of the ledger, the peer
// and the routes.
func TestRestoreClearsPodCIDRsOutsideTheRange(t *testing.T) {
	w := memoryWorld(t)
	ctx := context.Background()
	host, pub := hostname("legacy"), publicKey(t)
	v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: host, PublicKey: pub, Version: "1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0"}); err != nil {
		t.Fatal(err)
	}
	outside := netip.MustParsePrefix("10.9.0.0/24") // outside testClusterCIDR
	if _, err := w.ledger.SetNodePodCIDR(ctx, host, outside); err != nil {
		t.Fatal(err)
	}
	if err := w.routes.Replace(ctx, outside); err != nil {
		t.Fatal(err)
	}
	if err := w.svc.RestoreMesh(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := w.ledger.Node(ctx, host); n.PodCIDR.IsValid() {
		t.Errorf("the ledger keeps %s", n.PodCIDR)
	}
	for _, r := range w.routes.Routed() {
		if r == outside {
			t.Errorf("%s is still routed", outside)
		}
	}
	if p, ok := w.peerOf(t, pub); !ok || len(p.AllowedIPs) != 1 {
		t.Errorf("the peer after the restore: %+v", p)
	}
}

// The pool label older servers used, which a kubelet may set on its own
// Node, goes from every Node the fleet sees.
func TestTheOldPoolLabelGoes(t *testing.T) {
	w := memoryWorld(t)
	ctx := context.Background()
	w.kubeNode(t, "self-labelled", "", 0, map[string]string{fleet.PoolLabel: "gpu-nvidia-nvidia-h100-80gb-hbm3-x8"})
	labels, _, _ := w.kube(t, "self-labelled")
	if err := w.svc.SyncNode(ctx, fleet.KubeNode{Name: "self-labelled", Labels: labels}); err != nil {
		t.Fatal(err)
	}
	if labels, _, _ := w.kube(t, "self-labelled"); labels[fleet.PoolLabel] != "" {
		t.Errorf("the old pool label stays: %v", labels)
	}
}
