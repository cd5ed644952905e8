package gridweave_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/internal/raytest"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/rayctl"
)

func TestMain(m *testing.M) {
	os.Exit(raytest.RunMain(raytest.RunFunc(func() int { return testcluster.RunMain(m) })))
}

var realSeq atomic.Int32

// realHarness is the service over the real control plane: a namespace of
// its own, a CPU node for the head, and Kubernetes and KubeRay for real.
func realHarness(t *testing.T) (*harness, *testcluster.Cluster, string) {
	t.Helper()
	tc := testcluster.Shared(t)
	ctx := context.Background()
	n := realSeq.Add(1)
	ns := fmt.Sprintf("gridweave-%d", n)
	if err := tc.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.AddNode(ctx, fmt.Sprintf("head-%d", n), nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Namespace = ns
	cfg.VPNCIDR, cfg.MasterVPNIP = netip.MustParsePrefix("198.18.128.0/20"), netip.MustParseAddr("198.18.128.1")
	cfg.ClusterCIDR = netip.MustParsePrefix("198.18.192.0/18") // the pod CIDRs below: 198.18.200+.0/24
	pool, _ := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	kr, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	_, pub, _ := wgkey.GeneratePair()
	m := memmesh.New(pub)
	rc, err := rayctl.New(tc.Kube, tc.Ray, &rayctl.Options{Namespace: ns, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := gridweave.New(ctx, cfg, gridweave.Backends{Keyring: kr, Mesh: m, Ray: rc, Kube: tc.Kube})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessFor(t, s, cfg)
	h.kr, h.mesh = kr, m
	return h, tc, ns
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestGPUNodeRunsAWorkerOnTheRealControlPlane: a GPU node (kwok, 8 GPUs,
// a pod CIDR set by "k3s") joins through the service; its pool's worker
// pod runs on it with its GPU limit; disconnect removes the group, the
// pod and the Node.
func TestGPUNodeRunsAWorkerOnTheRealControlPlane(t *testing.T) {
	h, tc, ns := realHarness(t)
	ctx := context.Background()
	host := fmt.Sprintf("h100-%d", realSeq.Load())
	n := newNode(t, host)
	if _, err := tc.AddNode(ctx, host, corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}, markOf(t, n), fmt.Sprintf("198.18.%d.0/24", 200+realSeq.Load())); err != nil {
		t.Fatal(err)
	}
	_, key := h.mint("org")
	h.want(h.validate(n, key), 200, "validate")
	reg := h.want(h.register(n, h100s(8)), 200, "register")
	group, _ := reg.body["worker_group"].(string)
	if group == "" {
		t.Fatalf("no worker group: %s", reg.raw)
	}
	if reg.body["node"].(map[string]any)["pod_cidr"] != fmt.Sprintf("198.18.%d.0/24", 200+realSeq.Load()) {
		t.Errorf("the pod CIDR did not come from Kubernetes: %s", reg.raw)
	}
	selector := "ray.io/cluster=gridweave-cluster,ray.io/group=" + group
	var worker corev1.Pod
	waitFor(t, "the worker pod running on "+host, 90*time.Second, func() (bool, error) {
		pods, err := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(pods.Items) == 0 {
			return false, err
		}
		worker = pods.Items[0]
		return worker.Spec.NodeName == host && worker.Status.Phase == corev1.PodRunning, nil
	})
	if got := worker.Spec.Containers[0].Resources.Limits.Name("nvidia.com/gpu", resource.DecimalSI).Value(); got != 8 {
		t.Errorf("the worker's GPU limit is %d, want 8", got)
	}

	d := h.want(h.do("POST", "/v1/nodes/disconnect", testAdminToken, map[string]any{"hostname": host}), 200, "disconnect")
	if d.body["released"] != true {
		t.Errorf("disconnect %s", d.raw)
	}
	rc, err := tc.Ray.RayV1().RayClusters(ns).Get(ctx, "gridweave-cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range rc.Spec.WorkerGroupSpecs {
		if g.GroupName == group {
			t.Errorf("the group of the only %s node stayed: %+v", group, g)
		}
	}
	if _, err := tc.Kube.CoreV1().Nodes().Get(ctx, host, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Kubernetes Node is still there: %v", err)
	}
	waitFor(t, "the worker pod gone", 90*time.Second, func() (bool, error) {
		pods, err := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(pods.Items) == 0, err
	})
}

// TestClusterSizeIsFlatInGPUNodes registers GPU nodes of four kinds and
// measures the RayCluster as the API server stores it: its size grows
// with the kinds of machine, not with the machines.
func TestClusterSizeIsFlatInGPUNodes(t *testing.T) {
	h, tc, ns := realHarness(t)
	ctx := context.Background()
	// size is the spec's size (what grows with groups; the status and the
	// operator's managed fields come and go as it reconciles) and the
	// whole stored object's.
	size := func() (spec, stored int) {
		rc, err := tc.Ray.RayV1().RayClusters(ns).Get(ctx, "gridweave-cluster", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rawSpec, _ := json.Marshal(rc.Spec)
		raw, _ := json.Marshal(rc)
		return len(rawSpec), len(raw)
	}
	_, key := h.mint("org")
	kinds := []string{"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA RTX 6000 Ada Generation"}
	join := func(i int) {
		n := newNode(t, fmt.Sprintf("gpu-%d-%03d", realSeq.Load(), i))
		h.want(h.validate(n, key), 200, "validate")
		gpus := h100s(8)
		for _, g := range gpus {
			g["name"] = kinds[i%len(kinds)]
		}
		h.want(h.register(n, gpus), 200, "register")
	}
	for i := range len(kinds) {
		join(i)
	}
	withKinds, storedWithKinds := size()
	rc, _ := tc.Ray.RayV1().RayClusters(ns).Get(ctx, "gridweave-cluster", metav1.GetOptions{})
	if len(rc.Spec.WorkerGroupSpecs) != len(kinds) {
		t.Fatalf("%d groups for %d kinds", len(rc.Spec.WorkerGroupSpecs), len(kinds))
	}
	const nodes = 60
	for i := len(kinds); i < nodes; i++ {
		join(i)
	}
	withNodes, storedWithNodes := size()
	rc, _ = tc.Ray.RayV1().RayClusters(ns).Get(ctx, "gridweave-cluster", metav1.GetOptions{})
	replicas := 0
	for _, g := range rc.Spec.WorkerGroupSpecs {
		replicas += int(*g.Replicas)
	}
	if len(rc.Spec.WorkerGroupSpecs) != len(kinds) || replicas != nodes {
		t.Fatalf("%d groups, %d replicas; want %d and %d", len(rc.Spec.WorkerGroupSpecs), replicas, len(kinds), nodes)
	}
	t.Logf("RayCluster spec: %d bytes with %d GPU nodes of %d kinds, %d bytes with %d nodes (about %d bytes per group); stored object %d and %d bytes",
		withKinds, len(kinds), len(kinds), withNodes, nodes, withKinds/len(kinds), storedWithKinds, storedWithNodes)
	// Only numbers gain digits (replicas): a group per node would add over
	// a kilobyte a node.
	if withNodes > withKinds+100 {
		t.Errorf("the RayCluster's spec grew from %d to %d bytes with %d more nodes of the same kinds", withKinds, withNodes, nodes-len(kinds))
	}
	if storedWithNodes > 64<<10 {
		t.Errorf("the stored RayCluster is %d bytes with %d nodes", storedWithNodes, nodes)
	}
	if !slices.ContainsFunc(rc.Spec.WorkerGroupSpecs, func(g rayv1.WorkerGroupSpec) bool { return g.Template.Labels[fleet.PoolLabel] != "" }) {
		t.Error("the groups are not marked as the service's")
	}
}
