package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/fleet/fleettest"
	"gridweave.dev/gridweave/scrapetargets"
	"gridweave.dev/internal/netnstest"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/rayctl"
)

// testLedger is an in-memory ledger for the conformance tables.
func testLedger(t *testing.T) *joinkeys.Keyring {
	pool, err := joinkeys.NewPool(netip.MustParsePrefix("10.100.0.0/24"), netip.MustParseAddr("10.100.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte("a-jwt-secret-of-at-least-32-bytes"), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	return ledger
}

// TestSeamsConformance runs fleettest's tables on the real seams: Nodes
// on the real API server, Placement on a RayCluster there (KubeRay's
// CRDs), Routes on a device in a network namespace
// (netlink), Targets in a directory. memfleet passes the same tables.
func TestSeamsConformance(t *testing.T) {
	t.Run("KubeNodes", func(t *testing.T) {
		tc := testcluster.Shared(t)
		fleettest.Nodes(t, func(t *testing.T) fleettest.NodesBackend {
			return fleettest.NodesBackend{
				Nodes: &fleet.KubeNodes{Client: tc.Kube},
				Register: func(t *testing.T, kn fleet.KubeNode) fleet.KubeNode {
					return registerNode(t, tc, kn)
				},
				Annotation: func(t *testing.T, name, key string) string {
					n, err := tc.Kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
					if apierrors.IsNotFound(err) {
						return ""
					} else if err != nil {
						t.Fatal(err)
					}
					return n.Annotations[key]
				},
				Relabel: func(t *testing.T, name, key, value string) {
					patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
					if _, err := tc.Kube.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
						t.Fatal(err)
					}
				},
			}
		})
	})
	t.Run("RayGroups", func(t *testing.T) {
		tc := testcluster.Shared(t)
		fleettest.Placement(t, func(t *testing.T) fleettest.PlacementBackend {
			ctx := context.Background()
			ns := fmt.Sprintf("fleet-%d", worldSeq.Add(1))
			if err := tc.CreateNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			rc, err := rayctl.New(tc.Kube, tc.Ray, &rayctl.Options{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			ledger := testLedger(t)
			return fleettest.PlacementBackend{
				Placement: &fleet.RayGroups{Ray: rc, Kube: tc.Kube, Ledger: ledger, Marks: testMarks, Namespace: ns, Cluster: "conformance",
					HeadImage: "rayproject/ray:2.54.0", WorkerImage: "rayproject/ray:2.54.0-gpu"},
				Ledger: ledger,
				Groups: func(t *testing.T) map[string]int {
					cluster, err := rc.GetCluster(ctx, ns, "conformance")
					if errors.Is(err, rayctl.ErrClusterNotFound) {
						return map[string]int{}
					} else if err != nil {
						t.Fatal(err)
					}
					groups := map[string]int{}
					for _, g := range cluster.Spec.WorkerGroupSpecs {
						if g.Template.Labels[fleet.PoolLabel] != "" && g.Replicas != nil {
							groups[g.GroupName] = int(*g.Replicas)
						}
					}
					return groups
				},
			}
		})
	})
	t.Run("DeviceRoutes", func(t *testing.T) {
		netnstest.RequireRoot(t)
		fleettest.Routes(t, func(t *testing.T) fleettest.RoutesBackend {
			ns := netnstest.New(t, "gwfc")
			ns.IP(t, "link", "add", "gwfc0", "type", "veth", "peer", "name", "gwfc1")
			ns.IP(t, "link", "set", "gwfc0", "up")
			ns.IP(t, "link", "set", "gwfc1", "up")
			return fleettest.RoutesBackend{
				Routes: nsRoutes{ns, fleet.DeviceRoutes{Interface: "gwfc0"}},
				Routed: func(t *testing.T) []netip.Prefix {
					out, err := ns.Command("ip", "route", "show", "dev", "gwfc0").Output()
					if err != nil {
						t.Fatal(err)
					}
					var routed []netip.Prefix
					for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
						if fields := strings.Fields(line); len(fields) > 0 {
							p, err := netip.ParsePrefix(fields[0])
							if err != nil {
								t.Fatalf("ip route: %q", line)
							}
							routed = append(routed, p)
						}
					}
					return routed
				},
			}
		})
	})
	t.Run("scrapetargets.Dir", func(t *testing.T) {
		fleettest.Targets(t, func(t *testing.T) fleettest.TargetsBackend {
			dir, err := scrapetargets.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return fleettest.TargetsBackend{Targets: dir, List: func(t *testing.T) []scrapetargets.Target {
				targets, err := dir.List()
				if err != nil {
					t.Fatal(err)
				}
				return targets
			}}
		})
	})
}

// nsRoutes runs a Routes inside a network namespace.
type nsRoutes struct {
	ns *netnstest.Namespace
	r  fleet.Routes
}

func (n nsRoutes) Replace(ctx context.Context, p netip.Prefix) error {
	return n.ns.Do(func() error { return n.r.Replace(ctx, p) })
}

func (n nsRoutes) Delete(ctx context.Context, p netip.Prefix) error {
	return n.ns.Do(func() error { return n.r.Delete(ctx, p) })
}

// registerNode makes the Node kn.Name on the API server as a kubelet
// registers one: a new object, after one of that name is gone.
func registerNode(t *testing.T, tc *testcluster.Cluster, kn fleet.KubeNode) fleet.KubeNode {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := tc.Kube.CoreV1().Nodes()
	if err := nodes.Delete(ctx, kn.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: kn.Name, Labels: kn.Labels}}
	if kn.PodCIDR.IsValid() {
		node.Spec.PodCIDR, node.Spec.PodCIDRs = kn.PodCIDR.String(), []string{kn.PodCIDR.String()}
	}
	for {
		made, err := nodes.Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) && ctx.Err() == nil { // the deletion is not through yet
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			uid := made.UID
			_ = nodes.Delete(context.Background(), made.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		})
		kn.UID = string(made.UID)
		return kn
	}
}
