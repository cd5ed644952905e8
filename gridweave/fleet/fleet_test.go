package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

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

func TestMain(m *testing.M) { os.Exit(testcluster.RunMain(m)) }

// world is the fleet over one set of backends, with what a test needs to
// look at them.
type world struct {
	svc     *fleet.Service
	ledger  *joinkeys.Keyring
	peers   mesh.Mesh
	routes  *memfleet.Routes
	targets *memfleet.Targets
	// kubeNode makes the Kubernetes Node k3s would register, with labels.
	kubeNode func(t *testing.T, name, podCIDR string, gpus int, labels map[string]string)
	// kube reads a Node: its labels and annotations; ok false when gone.
	kube func(t *testing.T, name string) (labels, annotations map[string]string, ok bool)
	// group says how many replicas a pool's worker group has (0: none).
	group func(t *testing.T, pool string) int
	// labelsPools: the placement labels a GPU node's Node with its pool.
	labelsPools bool
}

var worldSeq atomic.Int32

func memoryWorld(t *testing.T) *world {
	nodes, placement := new(memfleet.Nodes), new(memfleet.Placement)
	w := newWorld(t, nodes, placement, nil)
	w.kubeNode = func(_ *testing.T, name, podCIDR string, _ int, labels map[string]string) {
		kn := fleet.KubeNode{Name: name, Labels: labels}
		if podCIDR != "" {
			kn.PodCIDR = netip.MustParsePrefix(podCIDR)
		}
		nodes.Put(kn)
	}
	w.kube = func(_ *testing.T, name string) (map[string]string, map[string]string, bool) {
		kn, err := nodes.Get(context.Background(), name)
		return kn.Labels, nodes.Annotations(name), err == nil
	}
	w.group = func(_ *testing.T, pool string) int { return placement.Groups()[pool] }
	return w
}

// kubernetesWorld is the fleet on the real API server and KubeRay
// operator: KubeNodes, RayGroups on a RayCluster in a namespace of its own.
func kubernetesWorld(t *testing.T) *world {
	tc := testcluster.Shared(t)
	ctx := context.Background()
	n := worldSeq.Add(1)
	ns := fmt.Sprintf("fleet-%d", n)
	if err := tc.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	rc, err := rayctl.New(tc.Kube, tc.Ray, &rayctl.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	nodes := &fleet.KubeNodes{Client: tc.Kube}
	w := newWorld(t, nodes, nil, func(ledger *joinkeys.Keyring) fleet.Placement {
		return &fleet.RayGroups{Ray: rc, Kube: tc.Kube, Ledger: ledger, Marks: testMarks, Namespace: ns, Cluster: "fleet-test",
			HeadImage: "rayproject/ray:2.54.0", WorkerImage: "rayproject/ray:2.54.0-gpu"}
	})
	w.labelsPools = true
	w.kubeNode = func(t *testing.T, name, podCIDR string, gpus int, labels map[string]string) {
		alloc := corev1.ResourceList{}
		if gpus > 0 {
			alloc["nvidia.com/gpu"] = resource.MustParse(fmt.Sprint(gpus))
		}
		if _, err := tc.AddNode(ctx, name, alloc, labels, podCIDR); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tc.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	w.kube = func(t *testing.T, name string) (map[string]string, map[string]string, bool) {
		kn, err := tc.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return kn.Labels, kn.Annotations, true
	}
	w.group = func(t *testing.T, pool string) int {
		c, err := rc.GetCluster(ctx, ns, "fleet-test")
		if errors.Is(err, rayctl.ErrClusterNotFound) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range c.Spec.WorkerGroupSpecs {
			if g.GroupName == pool && g.Replicas != nil {
				return int(*g.Replicas)
			}
		}
		return 0
	}
	return w
}

func newWorld(t *testing.T, nodes fleet.Nodes, placement fleet.Placement, makePlacement func(*joinkeys.Keyring) fleet.Placement) *world {
	t.Helper()
	pool, err := joinkeys.NewPool(netip.MustParsePrefix("198.18.64.0/20"), netip.MustParseAddr("198.18.64.1"))
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte("a-jwt-secret-of-at-least-32-bytes"), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if makePlacement != nil {
		placement = makePlacement(ledger)
	}
	_, masterKey, _ := wgkey.GeneratePair()
	w := &world{ledger: ledger, peers: memmesh.New(masterKey), routes: new(memfleet.Routes), targets: new(memfleet.Targets)}
	w.svc, err = fleet.New(testConfig(), fleet.Backends{
		Ledger: ledger, Peers: w.peers, Routes: w.routes, Nodes: nodes, Placement: placement, Targets: w.targets,
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// worlds runs test on the in-memory backends and, unless -short, on the
// real API server and KubeRay operator.
func worlds(t *testing.T, test func(t *testing.T, w *world)) {
	t.Run("memory", func(t *testing.T) { test(t, memoryWorld(t)) })
	if !testing.Short() {
		t.Run("kubernetes", func(t *testing.T) { test(t, kubernetesWorld(t)) })
	}
}

func (w *world) key(t *testing.T) string {
	t.Helper()
	m, err := w.ledger.Mint(context.Background(), joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return m.Secret
}

func publicKey(t *testing.T) string {
	t.Helper()
	_, pub, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	return pub.String()
}

// testMarks makes the marks of the tests' nodes.
var testMarks, _ = fleet.NewMarker([]byte("the-master's-secret-of-32-bytes!"))

// testClusterCIDR is the tests' cluster pod range.
var testClusterCIDR = netip.MustParsePrefix("198.18.0.0/15")

// testConfig is the fleet's configuration in the tests.
func testConfig() fleet.Config {
	return fleet.Config{ServerVersion: "1.4.0", Marks: testMarks, ClusterCIDR: testClusterCIDR}
}

// marked are the labels k3s registers a joined node's Node with: the
// mark of its public key.
func marked(t *testing.T, pub string) map[string]string {
	t.Helper()
	k, err := wgkey.Parse(pub)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{fleet.MarkLabel: testMarks.Mark(k)}
}

func (w *world) peerOf(t *testing.T, pub string) (mesh.Peer, bool) {
	t.Helper()
	peers, err := w.peers.Peers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(peers, func(p mesh.Peer) bool { return p.PublicKey.String() == pub })
	if i < 0 {
		return mesh.Peer{}, false
	}
	return peers[i], true
}

func h100s(n int) []joinkeys.GPU {
	gpus := make([]joinkeys.GPU, n)
	for i := range gpus {
		gpus[i] = joinkeys.GPU{Index: i, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UUID: fmt.Sprintf("GPU-%d", i)}
	}
	return gpus
}

var hostSeq atomic.Int32

func hostname(prefix string) string { return fmt.Sprintf("%s-%d", prefix, hostSeq.Add(1)) }

// TestNodeLifecycle: a GPU machine validates, registers (its pod CIDR from
// Kubernetes, its group, its target, its version annotation) and is
// disconnected, on each backend.
func TestNodeLifecycle(t *testing.T) {
	worlds(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		host, pub := hostname("gpu"), publicKey(t)
		podCIDR := fmt.Sprintf("198.19.%d.0/24", hostSeq.Load())
		v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: host, PublicKey: pub, Version: "1.4.2"})
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := w.peerOf(t, pub); !ok || len(p.AllowedIPs) != 1 || p.AllowedIPs[0] != netip.PrefixFrom(v.Node.VPNIP, 32) {
			t.Fatalf("after validate the peer is %+v (%v), want %s/32 only", p, ok, v.Node.VPNIP)
		}
		w.kubeNode(t, host, podCIDR, 8, marked(t, pub))
		reg, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.2", GPUs: h100s(8)})
		if err != nil {
			t.Fatal(err)
		}
		pool, _ := fleet.PoolOf(h100s(8))
		if reg.WorkerGroup != pool.Name || reg.Node.Status != joinkeys.StatusRegistered || reg.Node.PodCIDR.String() != podCIDR {
			t.Errorf("registered %+v in group %q; want registered with pod CIDR %s in %s", reg.Node, reg.WorkerGroup, podCIDR, pool.Name)
		}
		if reg.Node.GPUs[0].Vendor != joinkeys.VendorNVIDIA {
			t.Errorf("a GPU reported without a vendor was recorded as %q, want nvidia", reg.Node.GPUs[0].Vendor)
		}
		if got := w.group(t, pool.Name); got != 1 {
			t.Errorf("group %s has %d replicas on return from register, want 1", pool.Name, got)
		}
		if p, _ := w.peerOf(t, pub); !slices.Contains(p.AllowedIPs, netip.MustParsePrefix(podCIDR)) {
			t.Errorf("the peer's allowed IPs %v lack the pod CIDR", p.AllowedIPs)
		}
		if !slices.Contains(w.routes.Routed(), netip.MustParsePrefix(podCIDR)) {
			t.Errorf("the pod CIDR is not routed: %v", w.routes.Routed())
		}
		if tg, ok := w.targets.Targets()[host]; !ok || tg.GPUCount != 8 {
			t.Errorf("scrape target %+v (%v), want one of 8 GPUs", tg, ok)
		}
		if labels, _, _ := w.kube(t, host); w.labelsPools && labels[fleet.NodePoolLabel] != pool.Name {
			t.Errorf("the Node's pool label is %q, want %s", labels[fleet.NodePoolLabel], pool.Name)
		}
		if _, err := w.svc.ReportVersion(ctx, host, v.NodeToken, "1.4.3"); err != nil {
			t.Fatal(err)
		}
		if _, ann, _ := w.kube(t, host); ann[fleet.VersionAnnotation] != "1.4.3" {
			t.Errorf("the version annotation is %q", ann[fleet.VersionAnnotation])
		}

		released, err := w.svc.Disconnect(ctx, host, "admin:test")
		if err != nil || !released {
			t.Fatalf("disconnect: %v, %v", released, err)
		}
		if _, ok := w.peerOf(t, pub); ok {
			t.Error("the peer outlived the disconnect")
		}
		if len(w.routes.Routed()) != 0 || len(w.targets.Targets()) != 0 {
			t.Errorf("left behind: routes %v, targets %v", w.routes.Routed(), w.targets.Targets())
		}
		if _, _, ok := w.kube(t, host); ok {
			t.Error("the Kubernetes Node outlived the disconnect")
		}
		if got := w.group(t, pool.Name); got != 0 {
			t.Errorf("group %s has %d replicas after its only node left", pool.Name, got)
		}
		if _, err := w.ledger.Node(ctx, host); !errors.Is(err, joinkeys.ErrNodeNotFound) {
			t.Errorf("the ledger still holds the node: %v", err)
		}
		if released, err := w.svc.Disconnect(ctx, host, "admin:test"); err != nil || released {
			t.Errorf("a second disconnect: %v, %v; want nothing to release", released, err)
		}
	})
}

// TestRefusals: each bad request is refused with its typed error, before
// anything is written; a credential is judged before the other fields.
func TestRefusals(t *testing.T) {
	worlds(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		key := w.key(t)
		host, pub := hostname("box"), publicKey(t)
		v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: key, Hostname: host, PublicKey: pub, Version: "1.4.0"})
		if err != nil {
			t.Fatal(err)
		}
		badGPUs := []joinkeys.GPU{{Index: 0, Vendor: "intel", Name: "x"}}
		cases := []struct {
			name  string
			call  func() error
			want  error
			field string
		}{
			{"no credential", func() error {
				_, err := w.svc.Validate(ctx, fleet.ValidateRequest{Hostname: "fresh", PublicKey: publicKey(t), Version: "1.4.0"})
				return err
			}, fleet.ErrCredentialRequired, "key"},
			{"a forged key with bad fields", func() error {
				_, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: "gwk_000000000000_" + fmt.Sprintf("%064d", 0), Hostname: "Bad_Host", PublicKey: "AAAA", Version: "x"})
				return err
			}, joinkeys.ErrKeyInvalid, ""},
			{"a forged node token with a malformed GPU list", func() error {
				_, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: "gwn_forged", Hostname: host, Version: "1.4.0", GPUs: badGPUs})
				return err
			}, joinkeys.ErrNodeTokenInvalid, ""},
			{"a reserved hostname", func() error {
				_, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: key, Hostname: "join-keys", PublicKey: publicKey(t), Version: "1.4.0"})
				return err
			}, fleet.ErrInvalid, "hostname"},
			{"a GPU of an unknown vendor", func() error {
				_, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0", GPUs: badGPUs})
				return err
			}, fleet.ErrInvalid, "gpus[0].vendor"},
			{"a GPU without a name", func() error {
				_, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0", GPUs: []joinkeys.GPU{{Index: 0}}})
				return err
			}, fleet.ErrInvalid, "gpus[0].name"},
			{"GPUs of two vendors", func() error {
				gpus := []joinkeys.GPU{{Index: 0, Name: "a"}, {Index: 1, Vendor: joinkeys.VendorAMD, Name: "b"}}
				_, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0", GPUs: gpus})
				return err
			}, fleet.ErrInvalid, "gpus[1].vendor"},
			{"another public key with the node token", func() error {
				_, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, PublicKey: publicKey(t), Version: "1.4.0"})
				return err
			}, fleet.ErrPublicKeyMismatch, "public_key"},
			{"a leave with a wrong token", func() error {
				_, err := w.svc.Leave(ctx, host, "gwn_wrong")
				return err
			}, joinkeys.ErrNodeTokenInvalid, ""},
			{"a version report without a token", func() error {
				_, err := w.svc.ReportVersion(ctx, host, "", "1.4.1")
				return err
			}, fleet.ErrCredentialRequired, ""},
		}
		for _, c := range cases {
			err := c.call()
			if !errors.Is(err, c.want) {
				t.Errorf("%s: %v, want %v", c.name, err, c.want)
				continue
			}
			var fe *fleet.Error
			if errors.As(err, &fe) && fe.Field != c.field {
				t.Errorf("%s: field %q, want %q", c.name, fe.Field, c.field)
			}
		}
		// A major version apart: *VersionMismatchError, and no peer.
		other := publicKey(t)
		_, err = w.svc.Validate(ctx, fleet.ValidateRequest{Key: key, Hostname: hostname("ahead"), PublicKey: other, Version: "2.0.0"})
		var vm *fleet.VersionMismatchError
		if !errors.As(err, &vm) || vm.Min != "1.0.0" || vm.Server != "1.4.0" {
			t.Errorf("version 2.0.0: %v", err)
		}
		if _, ok := w.peerOf(t, other); ok {
			t.Error("a refused version got a peer")
		}
		if n, err := w.ledger.Node(ctx, host); err != nil || n.Status != joinkeys.StatusValidated {
			t.Errorf("the refused registers changed the node: %+v, %v", n, err)
		}
	})
}

// TestSyncNodeFollowsKubernetes: a pod CIDR Kubernetes sets after the
// register reaches the ledger, the peer and the route; a Node the ledger
// does not know is left alone.
func TestSyncNodeFollowsKubernetes(t *testing.T) {
	w := memoryWorld(t)
	ctx := context.Background()
	host, pub := hostname("late"), publicKey(t)
	v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: host, PublicKey: pub, Version: "1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0"}); err != nil {
		t.Fatal(err)
	}
	cidr := netip.MustParsePrefix("198.19.200.0/24")
	if err := w.svc.SyncNode(ctx, fleet.KubeNode{Name: host, PodCIDR: cidr, Labels: marked(t, pub)}); err != nil {
		t.Fatal(err)
	}
	if n, _ := w.ledger.Node(ctx, host); n.PodCIDR != cidr {
		t.Errorf("the ledger's pod CIDR is %s, want %s", n.PodCIDR, cidr)
	}
	if p, _ := w.peerOf(t, pub); !slices.Contains(p.AllowedIPs, cidr) {
		t.Errorf("the peer's allowed IPs %v lack %s", p.AllowedIPs, cidr)
	}
	if !slices.Contains(w.routes.Routed(), cidr) {
		t.Errorf("routes %v lack %s", w.routes.Routed(), cidr)
	}
	if err := w.svc.SyncNode(ctx, fleet.KubeNode{Name: "not-ours", PodCIDR: netip.MustParsePrefix("198.19.201.0/24")}); err != nil {
		t.Fatal(err)
	}
	if len(w.routes.Routed()) != 1 {
		t.Errorf("a Node the ledger does not know was routed: %v", w.routes.Routed())
	}
}

// countingTransport counts the writes (PUT, PATCH) of RayClusters and
// the reads (GET) of single Nodes.
type countingTransport struct {
	next      http.RoundTripper
	writes    atomic.Int64
	nodeReads atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if (r.Method == http.MethodPut || r.Method == http.MethodPatch) && strings.Contains(r.URL.Path, "/rayclusters/") {
		c.writes.Add(1)
	}
	if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/v1/nodes/") {
		c.nodeReads.Add(1)
	}
	return c.next.RoundTrip(r)
}

// TestKubeNodesReadTheWatchCache: while Watch runs, a Node the cache holds
// is read without asking the API server; one it does not hold is asked
// for, so a Node k3s registered a moment ago is never reported missing.
func TestKubeNodesReadTheWatchCache(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	counting := &countingTransport{}
	cfg := rest.CopyConfig(tc.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counting.next = rt; return counting })
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	name := hostname("cached")
	if _, err := tc.AddNode(ctx, name, nil, nil, "198.19.250.0/24"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	nodes := &fleet.KubeNodes{Client: kube}
	seen := make(chan struct{}, 1)
	go func() {
		_ = nodes.Watch(ctx, func(kn fleet.KubeNode) {
			if kn.Name == name {
				select {
				case seen <- struct{}{}:
				default:
				}
			}
		})
	}()
	select {
	case <-seen:
	case <-time.After(time.Minute):
		t.Fatal("Watch never delivered the Node")
	}
	var kn fleet.KubeNode
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		before := counting.nodeReads.Load()
		if kn, err = nodes.Get(ctx, name); err != nil {
			t.Fatal(err)
		}
		if counting.nodeReads.Load() == before {
			break // answered from the cache
		}
		if time.Now().After(deadline) {
			t.Fatal("Get kept asking the API server for a Node the watch delivered")
		}
	}
	if kn.PodCIDR.String() != "198.19.250.0/24" {
		t.Errorf("the cached Node's pod CIDR is %s", kn.PodCIDR)
	}
	before := counting.nodeReads.Load()
	if _, err := nodes.Get(ctx, "no-such-node"); !errors.Is(err, fleet.ErrNoKubeNode) {
		t.Errorf("a Node that is nowhere: %v", err)
	}
	if counting.nodeReads.Load() == before {
		t.Error("a Node the cache lacks was not asked of the API server")
	}
}

// TestConcurrentRegistersShareWrites: 200 GPU nodes of three kinds
// register at once, 16 at a time, on the real API server and KubeRay
// operator. Each register returns with its node counted in its group's
// replicas, the RayCluster is written far fewer times than 200, and the
// groups' replicas end equal to the ledger.
func TestConcurrentRegistersShareWrites(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx := context.Background()
	ns := fmt.Sprintf("fleet-%d", worldSeq.Add(1))
	if err := tc.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	counting := &countingTransport{}
	cfg := rest.CopyConfig(tc.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { counting.next = rt; return counting })
	ray, err := rayclient.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rayctl.New(tc.Kube, ray, &rayctl.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	// Suspended: the operator makes no pods for the 200 workers.
	if _, err := rc.CreateCluster(ctx, rayctl.ClusterSpec{Name: "fleet-test", Namespace: ns, Image: "rayproject/ray:2.54.0"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rc.UpdateCluster(ctx, ns, "fleet-test", func(c *rayv1.RayCluster) error { c.Spec.Suspend = ptr.To(true); return nil }); err != nil {
		t.Fatal(err)
	}
	pool, _ := joinkeys.NewPool(netip.MustParsePrefix("198.18.64.0/20"), netip.MustParseAddr("198.18.64.1"))
	ledger, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte("a-jwt-secret-of-at-least-32-bytes"), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	_, masterKey, _ := wgkey.GeneratePair()
	svc, err := fleet.New(testConfig(), fleet.Backends{Ledger: ledger, Peers: memmesh.New(masterKey), Nodes: &fleet.KubeNodes{Client: tc.Kube},
		Placement: &fleet.RayGroups{Ray: rc, Kube: tc.Kube, Ledger: ledger, Marks: testMarks, Namespace: ns, Cluster: "fleet-test", HeadImage: "rayproject/ray:2.54.0", WorkerImage: "rayproject/ray:2.54.0-gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := ledger.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	kinds := [][]joinkeys.GPU{h100s(8), h100s(4), {{Index: 0, Vendor: joinkeys.VendorAMD, Name: "AMD Instinct MI300X", MemoryMiB: 196592}}}
	replicasOf := func(pool string) int32 {
		c, err := rc.GetCluster(ctx, ns, "fleet-test")
		if err != nil {
			t.Error(err)
			return -1
		}
		for _, g := range c.Spec.WorkerGroupSpecs {
			if g.GroupName == pool {
				return ptr.Deref(g.Replicas, 0)
			}
		}
		return 0
	}
	const nodes, clients = 200, 16
	var returned [3]atomic.Int32 // registers of each kind that returned
	writesBefore := counting.writes.Load()
	work := make(chan int)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				kind := i % len(kinds)
				host := fmt.Sprintf("burst-%d", i)
				v, err := svc.Validate(ctx, fleet.ValidateRequest{Key: key.Secret, Hostname: host, PublicKey: publicKey(t), Version: "1.4.0"})
				if err != nil {
					t.Errorf("validate %s: %v", host, err)
					continue
				}
				before := returned[kind].Load()
				reg, err := svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0", GPUs: kinds[kind]})
				if err != nil {
					t.Errorf("register %s: %v", host, err)
					continue
				}
				// Every register of its kind that returned before this one
				// began is in the ledger, and so is this one: the write
				// this one waited for counted them all.
				if got := replicasOf(reg.WorkerGroup); got < before+1 {
					t.Errorf("%s returned with group %s at %d replicas; %d registers of its kind had returned before it began", host, reg.WorkerGroup, got, before)
				}
				returned[kind].Add(1)
			}
		}()
	}
	for i := range nodes {
		work <- i
	}
	close(work)
	wg.Wait()
	writes := counting.writes.Load() - writesBefore
	t.Logf("%d registers, %d RayCluster writes", nodes, writes)
	if writes >= nodes/4 {
		t.Errorf("%d registers wrote the RayCluster %d times; coalesced, far fewer", nodes, writes)
	}
	all, err := ledger.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{}
	for _, n := range all {
		if p, ok := fleet.PoolOf(n.GPUs); ok && n.Status == joinkeys.StatusRegistered {
			want[p.Name]++
		}
	}
	if len(want) != len(kinds) {
		t.Fatalf("the ledger has %d pools, want %d", len(want), len(kinds))
	}
	for p, n := range want {
		if got := replicasOf(p); got != n {
			t.Errorf("group %s has %d replicas, the ledger %d nodes", p, got, n)
		}
	}
}

// TestForeignNodesAreNeverTouched: a Kubernetes Node no Gridweave join
// made (the master's, a machine joined to k3s otherwise) cannot be taken
// over by name; and a Node that carries a joined node's name but not its
// mark is neither routed, labelled, annotated nor deleted.
func TestForeignNodesAreNeverTouched(t *testing.T) {
	worlds(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		victim := hostname("victim")
		victimCIDR := fmt.Sprintf("198.19.%d.0/24", hostSeq.Load()%200)
		w.kubeNode(t, victim, victimCIDR, 8, map[string]string{"team": "infra"})
		before, beforeAnn, _ := w.kube(t, victim)

		// A first join under its name: refused, nothing written.
		_, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: victim, PublicKey: publicKey(t), Version: "1.4.2"})
		var fe *fleet.Error
		if !errors.Is(err, fleet.ErrHostnameInCluster) || !errors.As(err, &fe) || fe.Field != "hostname" {
			t.Fatalf("a join as an existing Node: %v, want ErrHostnameInCluster naming hostname", err)
		}
		if _, err := w.ledger.Node(ctx, victim); !errors.Is(err, joinkeys.ErrNodeNotFound) {
			t.Errorf("the refused join is in the ledger: %v", err)
		}
		if peers, _ := w.peers.Peers(ctx); len(peers) != 0 {
			t.Errorf("the refused join left %d peers", len(peers))
		}

		// A node that joined before a Node of its name appeared without
		// its mark: the fleet leaves that Node alone through register,
		// report-version, the watch and disconnect.
		lookalike, pub := hostname("lookalike"), publicKey(t)
		v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: lookalike, PublicKey: pub, Version: "1.4.2"})
		if err != nil {
			t.Fatal(err)
		}
		lookalikeCIDR := fmt.Sprintf("198.19.%d.0/24", 200+hostSeq.Load()%50)
		w.kubeNode(t, lookalike, lookalikeCIDR, 8, map[string]string{fleet.MarkLabel: strings.Repeat("0", 40)})
		reg, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: lookalike, Version: "1.4.2", GPUs: h100s(8)})
		if err != nil {
			t.Fatal(err)
		}
		if reg.Node.PodCIDR.IsValid() {
			t.Errorf("the pod CIDR of a Node that is not the node's was recorded: %s", reg.Node.PodCIDR)
		}
		if _, err := w.svc.ReportVersion(ctx, lookalike, v.NodeToken, "1.4.3"); err != nil {
			t.Fatal(err)
		}
		if err := w.svc.SyncNode(ctx, fleet.KubeNode{Name: lookalike, PodCIDR: netip.MustParsePrefix(lookalikeCIDR), Labels: map[string]string{fleet.MarkLabel: strings.Repeat("0", 40)}}); err != nil {
			t.Fatal(err)
		}
		if routed := w.routes.Routed(); len(routed) != 0 {
			t.Errorf("routed %v, the pod CIDRs of Nodes that are not the fleet's", routed)
		}
		labels, ann, _ := w.kube(t, lookalike)
		if labels[fleet.NodePoolLabel] != "" || ann[fleet.VersionAnnotation] != "" {
			t.Errorf("the look-alike's Node was written: labels %v, annotations %v", labels, ann)
		}
		if released, err := w.svc.Disconnect(ctx, lookalike, "admin:test"); err != nil || !released {
			t.Fatalf("disconnect: %v, %v", released, err)
		}
		if _, _, ok := w.kube(t, lookalike); !ok {
			t.Error("disconnect deleted a Node that was not the node's")
		}
		after, afterAnn, ok := w.kube(t, victim)
		if !ok || !maps.Equal(before, after) || !maps.Equal(beforeAnn, afterAnn) {
			t.Errorf("the victim's Node changed: %v %v, then %v %v (there: %v)", before, beforeAnn, after, afterAnn, ok)
		}
	})
}

// TestPodCIDRsStayClearOfOtherNodes: the pod CIDRs and addresses of the
// cluster's Nodes that are not the fleet's (the master's) are the
// master's to route: a node whose Node claims an overlapping pod CIDR is
// refused and nothing is routed; once that Node is gone, the same pod
// CIDR is the node's.
func TestPodCIDRsStayClearOfOtherNodes(t *testing.T) {
	worlds(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		seq := hostSeq.Add(1) % 200
		masterCIDR := netip.MustParsePrefix(fmt.Sprintf("198.19.%d.0/24", seq))
		masterNode := fleet.KubeNode{Name: hostname("master"), PodCIDR: masterCIDR, PodCIDRs: []netip.Prefix{masterCIDR},
			InternalIPs: []netip.Addr{netip.MustParseAddr("198.18.250.1")}}
		if err := w.svc.SyncNode(ctx, masterNode); err != nil {
			t.Fatal(err)
		}
		if got := w.ledger.MasterPrefixes(); !slices.Contains(got, masterCIDR) || !slices.Contains(got, netip.MustParsePrefix("198.18.250.1/32")) {
			t.Fatalf("the ledger's master prefixes %v lack the master Node's pod CIDR and address", got)
		}

		host, pub := hostname("greedy"), publicKey(t)
		v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: host, PublicKey: pub, Version: "1.4.2"})
		if err != nil {
			t.Fatal(err)
		}
		greedy := netip.MustParsePrefix(fmt.Sprintf("198.19.%d.128/25", seq))
		w.kubeNode(t, host, greedy.String(), 0, marked(t, pub))
		_, err = w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.2"})
		var conflict *joinkeys.PodCIDRConflictError
		if !errors.As(err, &conflict) || conflict.Overlaps != masterCIDR {
			t.Fatalf("a pod CIDR inside the master Node's: %v, want a conflict with %s", err, masterCIDR)
		}
		if len(w.routes.Routed()) != 0 {
			t.Errorf("routed %v", w.routes.Routed())
		}
		// An address of the master Node inside a pod CIDR: refused too.
		kn := fleet.KubeNode{Name: host, PodCIDR: netip.MustParsePrefix("198.18.250.0/24"), Labels: marked(t, pub)}
		if err := w.svc.SyncNode(ctx, kn); !errors.As(err, &conflict) {
			t.Errorf("a pod CIDR over the master Node's address: %v", err)
		}

		gone := masterNode
		gone.Deleted = true
		if err := w.svc.SyncNode(ctx, gone); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(w.ledger.MasterPrefixes(), masterCIDR) {
			t.Fatalf("a deleted Node's pod CIDR is still the master's: %v", w.ledger.MasterPrefixes())
		}
		if err := w.svc.SyncNode(ctx, fleet.KubeNode{Name: host, PodCIDR: greedy, Labels: marked(t, pub)}); err != nil {
			t.Fatal(err)
		}
		if n, _ := w.ledger.Node(ctx, host); n.PodCIDR != greedy || !slices.Contains(w.routes.Routed(), greedy) {
			t.Errorf("after the master Node went: pod CIDR %s, routes %v", n.PodCIDR, w.routes.Routed())
		}
	})
}

// TestAMachinesOwnAddressesAreNotTheMasters: a Node named by a ledger
// node's hostname but not that node's own (no mark: what the machine's
// kubelet could register) lists addresses in the pod range; they are
// not taken for the master's, so the next node's pod CIDR over them is
// still its own. Its pod CIDR still is the master's. Nor are they once
// the machine left, its Node marked by its kubelet with another mark.
func TestAMachinesOwnAddressesAreNotTheMasters(t *testing.T) {
	worlds(t, func(t *testing.T, w *world) {
		ctx := context.Background()
		seq := hostSeq.Add(1) % 200
		liar := hostname("liar")
		if _, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: liar, PublicKey: publicKey(t), Version: "1.4.2"}); err != nil {
			t.Fatal(err)
		}
		liarCIDR := netip.MustParsePrefix(fmt.Sprintf("198.19.%d.0/25", seq))
		claimed := netip.MustParseAddr(fmt.Sprintf("198.19.%d.129", seq))
		lies := fleet.KubeNode{Name: liar, PodCIDR: liarCIDR, InternalIPs: []netip.Addr{claimed}}
		if err := w.svc.SyncNode(ctx, lies); err != nil {
			t.Fatal(err)
		}
		if got := w.ledger.MasterPrefixes(); slices.Contains(got, netip.PrefixFrom(claimed, 32)) || !slices.Contains(got, liarCIDR) {
			t.Fatalf("the master's prefixes %v: want the unmarked Node's pod CIDR %s, not its address %s", got, liarCIDR, claimed)
		}

		host, pub := hostname("next"), publicKey(t)
		v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: host, PublicKey: pub, Version: "1.4.2"})
		if err != nil {
			t.Fatal(err)
		}
		podCIDR := netip.MustParsePrefix(fmt.Sprintf("198.19.%d.128/25", seq))
		w.kubeNode(t, host, podCIDR.String(), 0, marked(t, pub))
		if _, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.2"}); err != nil {
			t.Fatalf("a pod CIDR over an address another machine's Node claims: %v", err)
		}
		if n, _ := w.ledger.Node(ctx, host); n.PodCIDR != podCIDR {
			t.Errorf("the node's pod CIDR: %s, want %s", n.PodCIDR, podCIDR)
		}

		// The liar's kubelet marks its Node with a mark not its own (so
		// that its teardown leaves the Node be) and the liar goes: the
		// Node, now of no ledger node, still lists addresses a machine
		// wrote, and they stay the machine's word.
		if _, err := w.svc.Disconnect(ctx, liar, "admin"); err != nil {
			t.Fatal(err)
		}
		later := netip.MustParseAddr(fmt.Sprintf("198.19.%d.130", seq))
		lies.Labels, lies.InternalIPs = marked(t, publicKey(t)), []netip.Addr{claimed, later}
		if err := w.svc.SyncNode(ctx, lies); err != nil {
			t.Fatal(err)
		}
		got := w.ledger.MasterPrefixes()
		for _, a := range lies.InternalIPs {
			if slices.Contains(got, netip.PrefixFrom(a, 32)) {
				t.Errorf("the master's prefixes %v hold %s, an address a marked Node of no ledger node lists", got, a)
			}
		}
		if !slices.Contains(got, liarCIDR) {
			t.Errorf("the master's prefixes %v: want the marked Node's pod CIDR %s", got, liarCIDR)
		}
	})
}

// TestKubeNodesWatchReportsAddressesAndDeletes: the real Watch tells a
// Node's pod CIDRs and InternalIPs, and that it is gone.
func TestKubeNodesWatchReportsAddressesAndDeletes(t *testing.T) {
	if testing.Short() {
		t.Skip("the test control plane; run make test")
	}
	tc := testcluster.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := hostname("watched")
	seen := make(chan fleet.KubeNode, 16)
	nodes := &fleet.KubeNodes{Client: tc.Kube}
	go func() {
		_ = nodes.Watch(ctx, func(kn fleet.KubeNode) {
			if kn.Name == name {
				seen <- kn
			}
		})
	}()
	if _, err := tc.AddNode(ctx, name, nil, nil, "198.19.251.0/24"); err != nil {
		t.Fatal(err)
	}
	next := func() fleet.KubeNode {
		select {
		case kn := <-seen:
			return kn
		case <-time.After(30 * time.Second):
			t.Fatal("the watch reported nothing within 30 s")
			return fleet.KubeNode{}
		}
	}
	var kn fleet.KubeNode
	for kn = next(); len(kn.InternalIPs) == 0; kn = next() { // kwok fills the status after the create
	}
	if !slices.Contains(kn.PodCIDRs, netip.MustParsePrefix("198.19.251.0/24")) || kn.Deleted {
		t.Errorf("the watched Node: %+v", kn)
	}
	if err := tc.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for kn = next(); !kn.Deleted; kn = next() {
	}
}

// TestServiceRangesFromTheCluster: the real API server's Service range
// (the test cluster's --service-cluster-ip-range, 198.19.0.0/17) is read
// from its ServiceCIDR objects, and a pod CIDR inside it is refused.
func TestServiceRangesFromTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("the test control plane; run make test")
	}
	tc := testcluster.Shared(t)
	ctx := context.Background()
	ranges, err := fleet.KubeServiceCIDRs{Client: tc.Kube}.ServiceCIDRs(ctx)
	if err != nil || !slices.Contains(ranges, netip.MustParsePrefix(testcluster.ServiceCIDR)) {
		t.Fatalf("the cluster's service CIDRs: %v, %v", ranges, err)
	}
	pool, _ := joinkeys.NewPool(netip.MustParsePrefix("198.18.64.0/20"), netip.MustParseAddr("198.18.64.1"))
	ledger, _ := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte("a-jwt-secret-of-at-least-32-bytes"), Pool: pool})
	_, masterKey, _ := wgkey.GeneratePair()
	nodes, routes := new(memfleet.Nodes), new(memfleet.Routes)
	svc, err := fleet.New(testConfig(), fleet.Backends{Ledger: ledger, Peers: memmesh.New(masterKey), Nodes: nodes, Routes: routes,
		ServiceRanges: fleet.KubeServiceCIDRs{Client: tc.Kube}})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ledger.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	host, pub := hostname("svc"), publicKey(t)
	v, err := svc.Validate(ctx, fleet.ValidateRequest{Key: key.Secret, Hostname: host, PublicKey: pub, Version: "1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	nodes.Put(fleet.KubeNode{Name: host, PodCIDR: netip.MustParsePrefix("198.19.7.0/24"), Labels: marked(t, pub)})
	_, err = svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0"})
	var conflict *joinkeys.PodCIDRConflictError
	if !errors.As(err, &conflict) || conflict.Overlaps != netip.MustParsePrefix(testcluster.ServiceCIDR) {
		t.Fatalf("a pod CIDR inside the Service range: %v", err)
	}
	if len(routes.Routed()) != 0 {
		t.Errorf("routed %v", routes.Routed())
	}
}

// TestReleasedJoinTakesItsRoute: a node that validated, had its Node's
// pod CIDR routed and never registered is released with its route.
func TestReleasedJoinTakesItsRoute(t *testing.T) {
	ctx := context.Background()
	pool, _ := joinkeys.NewPool(netip.MustParsePrefix("198.18.64.0/20"), netip.MustParseAddr("198.18.64.1"))
	ledger, _ := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte("a-jwt-secret-of-at-least-32-bytes"), Pool: pool})
	_, masterKey, _ := wgkey.GeneratePair()
	routes := new(memfleet.Routes)
	later := func() time.Time { return time.Now().Add(time.Hour) } // past every validated node's TTL
	svc, err := fleet.New(testConfig(), fleet.Backends{Ledger: ledger, Peers: memmesh.New(masterKey), Nodes: new(memfleet.Nodes), Routes: routes, Now: later})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ledger.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: time.Hour})
	host, pub := hostname("gave-up"), publicKey(t)
	if _, err := svc.Validate(ctx, fleet.ValidateRequest{Key: key.Secret, Hostname: host, PublicKey: pub, Version: "1.4.0"}); err != nil {
		t.Fatal(err)
	}
	cidr := netip.MustParsePrefix("198.19.77.0/24")
	if err := svc.SyncNode(ctx, fleet.KubeNode{Name: host, PodCIDR: cidr, Labels: marked(t, pub)}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(routes.Routed(), cidr) {
		t.Fatalf("the validated node's pod CIDR is not routed: %v", routes.Routed())
	}
	released, err := svc.ReleaseHalfFinishedJoins(ctx)
	if err != nil || len(released) != 1 {
		t.Fatalf("released %v, %v", released, err)
	}
	if got := routes.Routed(); len(got) != 0 {
		t.Errorf("the released node's route stayed: %v", got)
	}
}

// TestRunFollowsNodesWhileNodesLeave: with Run following the in-memory
// Nodes, a node leaves (its Node deleted while the fleet holds its
// hostname's lock) and the watch hears of it without a deadlock.
func TestRunFollowsNodesWhileNodesLeave(t *testing.T) {
	w := memoryWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.svc.Run(ctx) }()
	host, pub := hostname("leaving"), publicKey(t)
	v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: host, PublicKey: pub, Version: "1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	w.kubeNode(t, host, "198.19.88.0/24", 0, marked(t, pub))
	if _, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0"}); err != nil {
		t.Fatal(err)
	}
	left := make(chan error, 1)
	go func() { _, err := w.svc.Leave(ctx, host, v.NodeToken); left <- err }()
	select {
	case err := <-left:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("leave did not return within 10 s while Run follows the Nodes")
	}
	if _, _, ok := w.kube(t, host); ok {
		t.Error("the Node outlived the leave")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// drainingNodes are in-memory Nodes whose deletion drains first, as the
// kubelet join mode's does: the Node is cordoned (an update the watch
// hears, from another goroutine, as from an informer), then the drain
// waits until release is closed.
type drainingNodes struct {
	*memfleet.Nodes
	draining chan struct{} // closed once a drain began
	release  chan struct{}
}

func (d *drainingNodes) Delete(ctx context.Context, kn fleet.KubeNode) error {
	cordoned := kn
	cordoned.Labels = maps.Clone(kn.Labels)
	cordoned.Labels["example.com/cordoned"] = "true"
	go d.Put(cordoned)
	close(d.draining)
	<-d.release
	return d.Nodes.Delete(ctx, kn)
}

// TestANodeDrainedHoldsUpNoOtherNode: while a leaving node's Node drains
// (its teardown holds its hostname's lock, and the watch hears of the
// cordon), the watch still follows the other Nodes: a new machine's pod
// CIDR is recorded before the drain ends, and the leave finishes once it
// does.
func TestANodeDrainedHoldsUpNoOtherNode(t *testing.T) {
	nodes := &drainingNodes{Nodes: new(memfleet.Nodes), draining: make(chan struct{}), release: make(chan struct{})}
	w := newWorld(t, nodes, new(memfleet.Placement), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.svc.Run(ctx) }()
	host, pub := hostname("draining"), publicKey(t)
	v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: host, PublicKey: pub, Version: "1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	nodes.Put(fleet.KubeNode{Name: host, PodCIDR: netip.MustParsePrefix("198.19.90.0/24"), Labels: marked(t, pub)})
	if _, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0"}); err != nil {
		t.Fatal(err)
	}
	left := make(chan error, 1)
	go func() { _, err := w.svc.Leave(ctx, host, v.NodeToken); left <- err }()
	<-nodes.draining

	next, nextPub := hostname("next"), publicKey(t)
	if _, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: next, PublicKey: nextPub, Version: "1.4.0"}); err != nil {
		t.Fatal(err)
	}
	nextCIDR := netip.MustParsePrefix("198.19.91.0/24")
	go nodes.Put(fleet.KubeNode{Name: next, PodCIDR: nextCIDR, Labels: marked(t, nextPub)})
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := w.ledger.Node(ctx, next)
		if err == nil && n.PodCIDR == nextCIDR {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("while another Node drains, the new machine's pod CIDR is %s (%v), want %s", n.PodCIDR, err, nextCIDR)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(nodes.release)
	if err := <-left; err != nil {
		t.Fatal(err)
	}
	if _, err := w.ledger.Node(ctx, host); !errors.Is(err, joinkeys.ErrNodeNotFound) {
		t.Errorf("the drained node after its leave: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
}

// TestRestoreMeshWritesScrapeTargets: a target directory that a reboot
// emptied (/run) gets every registered GPU node's target back at start.
func TestRestoreMeshWritesScrapeTargets(t *testing.T) {
	w := memoryWorld(t)
	ctx := context.Background()
	host, pub := hostname("scraped"), publicKey(t)
	v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: host, PublicKey: pub, Version: "1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0", GPUs: h100s(2)}); err != nil {
		t.Fatal(err)
	}
	if err := w.targets.Remove(host); err != nil {
		t.Fatal(err)
	}
	if err := w.svc.RestoreMesh(ctx); err != nil {
		t.Fatal(err)
	}
	if tg, ok := w.targets.Targets()[host]; !ok || tg.GPUCount != 2 {
		t.Errorf("after RestoreMesh the target is %+v (%v)", tg, ok)
	}
}

// TestKubeNodesDeleteOnlyTheNodeRead: a Node replaced by another of the
// same name after it was read is not deleted in its place.
func TestKubeNodesDeleteOnlyTheNodeRead(t *testing.T) {
	if testing.Short() {
		t.Skip("the test control plane; run make test")
	}
	tc := testcluster.Shared(t)
	ctx := context.Background()
	name := hostname("replaced")
	if _, err := tc.AddNode(ctx, name, nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.Kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	nodes := &fleet.KubeNodes{Client: tc.Kube}
	read, err := nodes.Get(ctx, name)
	if err != nil || read.UID == "" {
		t.Fatalf("read %+v, %v", read, err)
	}
	if err := tc.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.AddNode(ctx, name, nil, map[string]string{"team": "infra"}, ""); err != nil {
		t.Fatal(err)
	}
	if err := nodes.Delete(ctx, read); err == nil {
		t.Error("deleting the Node read deleted its replacement")
	}
	if n, err := tc.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil || n.Labels["team"] != "infra" {
		t.Errorf("the replacement after the delete: %v", err)
	}
	again, _ := nodes.Get(ctx, name)
	if err := nodes.Delete(ctx, again); err != nil {
		t.Errorf("deleting the Node as read now: %v", err)
	}
}

// TestFollowLedgerChangesOnlyWhatDiffers: a device that missed a join
// (another replica wrote it) and holds a peer the ledger does not gets
// the one and loses the other; a second pass changes nothing.
func TestFollowLedgerChangesOnlyWhatDiffers(t *testing.T) {
	w := memoryWorld(t)
	ctx := context.Background()
	host := hostname("followed")
	v, err := w.svc.Validate(ctx, fleet.ValidateRequest{Key: w.key(t), Hostname: host, PublicKey: publicKey(t), Version: "1.4.0"})
	if err != nil {
		t.Fatal(err)
	}
	pub := wgkey.MustParse(v.Node.PublicKey.String())
	if err := w.peers.RemovePeer(ctx, pub); err != nil {
		t.Fatal(err)
	}
	stray := mesh.Peer{PublicKey: wgkey.MustParse(publicKey(t)), AllowedIPs: []netip.Prefix{netip.MustParsePrefix("198.18.200.9/32")}}
	if err := w.peers.UpsertPeer(ctx, stray); err != nil {
		t.Fatal(err)
	}
	changed, err := w.svc.FollowLedger(ctx)
	if err != nil || changed != 2 {
		t.Fatalf("FollowLedger = %d, %v; want 2 (one added, one removed)", changed, err)
	}
	peers, _ := w.peers.Peers(ctx)
	if len(peers) != 1 || peers[0].PublicKey != pub {
		t.Errorf("peers after following the ledger: %+v", peers)
	}
	if changed, err := w.svc.FollowLedger(ctx); err != nil || changed != 0 {
		t.Errorf("a second pass = %d, %v; want nothing changed", changed, err)
	}

	// A GPU node registered through another replica gets its scrape
	// target here; released there, its target and peer go.
	if _, err := w.svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: host, Version: "1.4.0", GPUs: h100s(2)}); err != nil {
		t.Fatal(err)
	}
	if err := w.targets.Remove(host); err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.FollowLedger(ctx); err != nil {
		t.Fatal(err)
	}
	if tg, ok := w.targets.Targets()[host]; !ok || tg.GPUCount != 2 {
		t.Errorf("the target after following the ledger: %+v (%v)", tg, ok)
	}
	if _, err := w.ledger.SetNodePodCIDR(ctx, host, netip.MustParsePrefix("198.18.7.0/24")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.FollowLedger(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(w.routes.Routed(), netip.MustParsePrefix("198.18.7.0/24")) {
		t.Error("the pod CIDR set through another replica is not routed")
	}
	if _, err := w.ledger.Release(ctx, host, "another replica"); err != nil {
		t.Fatal(err)
	}
	if changed, err := w.svc.FollowLedger(ctx); err != nil || changed != 1 {
		t.Errorf("after the release elsewhere = %d, %v; want its peer removed", changed, err)
	}
	if _, ok := w.targets.Targets()[host]; ok {
		t.Error("the released node's scrape target stayed")
	}
	if slices.Contains(w.routes.Routed(), netip.MustParsePrefix("198.18.7.0/24")) {
		t.Error("the released node's pod CIDR is still routed")
	}
	if peers, _ := w.peers.Peers(ctx); len(peers) != 0 {
		t.Errorf("peers after the release elsewhere: %+v", peers)
	}
}
