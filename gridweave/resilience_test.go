package gridweave_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/scrapetargets"
	"gridweave.dev/joinkeys"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
)

// TestDisconnectFinishesWhatAFailedOneLeft: the Kubernetes Node cannot be
// deleted the first time; the call fails and leaves the node marked
// disconnected (peer still there); the next call finishes the teardown.
func TestDisconnectFinishesWhatAFailedOneLeft(t *testing.T) {
	stores(t, func(t *testing.T, store func(testing.TB) joinkeys.Store) {
		ctx := context.Background()
		h := newHarness(t, &harnessOptions{store: store(t)})
		_, key := h.mint("org")
		n := newNode(t, "flaky")
		h.kubeNode(n, "")
		h.want(h.validate(n, key), 200, "validate")
		h.want(h.register(n, h100s(2)), 200, "register")
		failures := 1
		h.fakes.Kube.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
			if failures > 0 {
				failures--
				return true, nil, errors.New("etcd is having a bad day")
			}
			return false, nil, nil
		})
		if r := h.do("POST", "/v1/nodes/disconnect", testAdminToken, map[string]any{"hostname": "flaky"}); r.status < 500 {
			t.Fatalf("disconnect with a failing Node delete: %d %s", r.status, r.raw)
		}
		node, err := h.kr.Node(ctx, "flaky")
		if err != nil || node.Status != "disconnected" {
			t.Fatalf("after the failed call the node is %+v, %v; want it kept and marked disconnected", node, err)
		}
		if peers, _ := h.mesh.Peers(ctx); len(peers) != 1 {
			t.Fatalf("the failed call removed the peer before the ledger row: %d peers", len(peers))
		}
		// The node cannot re-join or register its way back meanwhile.
		again := h.do("POST", "/v1/nodes/validate", "", map[string]any{"node_token": n.token, "hostname": "flaky", "public_key": n.public, "version": "1.4.2"})
		if again.status != 409 || again.errorField("code") != "node_disconnected" {
			t.Errorf("re-join during a half-done disconnect: %d %s", again.status, again.raw)
		}
		h.want(h.register(n, h100s(2)), 409, "register during a half-done disconnect")
		// Nor report a version (a write that would keep the next call
		// from releasing the record it marked), read its directory or
		// report links.
		for _, r := range []reply{
			h.do("POST", "/v1/nodes/report-version", n.token, map[string]any{"hostname": "flaky", "version": "1.4.3"}),
			h.do("GET", "/v1/nodes/peers?hostname=flaky", n.token, nil),
			h.do("POST", "/v1/nodes/links", n.token, api.LinksReport{Hostname: "flaky", ListenPort: 51820, Links: []api.Link{}}),
		} {
			if r.status != 409 || r.errorField("code") != "node_disconnected" {
				t.Errorf("a node token's call during a half-done disconnect: %d %s", r.status, r.raw)
			}
		}
		r := h.want(h.do("POST", "/v1/nodes/disconnect", testAdminToken, map[string]any{"hostname": "flaky"}), 200, "disconnect again")
		if r.body["released"] != true {
			t.Errorf("second disconnect: %s", r.raw)
		}
		if peers, _ := h.mesh.Peers(ctx); len(peers) != 0 {
			t.Errorf("%d peers left", len(peers))
		}
		if _, err := h.fakes.Kube.CoreV1().Nodes().Get(ctx, "flaky", metav1.GetOptions{}); err == nil {
			t.Error("the Kubernetes Node is still there")
		}
		if _, err := h.kr.Node(ctx, "flaky"); err == nil {
			t.Error("the ledger row is still there")
		}
	})
}

func TestInternalListenerAndReadiness(t *testing.T) {
	h := newHarness(t, nil)
	internal := httptest.NewServer(h.server.InternalHandler())
	defer internal.Close()
	hi := &harness{t: t, url: internal.URL, client: http.DefaultClient}
	h.want(h.do("GET", "/healthz", "", nil), 200, "a public request to count")
	m := hi.want(hi.do("GET", "/metrics", "", nil), 200, "metrics on the internal listener without a credential")
	if !strings.Contains(string(m.raw), "gridweave_http_requests_total") {
		t.Error("internal metrics lack the request counter")
	}
	hi.want(hi.do("POST", "/v1/nodes/join-keys", testAdminToken, "{}"), 404, "the public API is not on the internal listener")
	r := h.want(h.do("GET", "/readyz", "", nil), 200, "readyz")
	if r.body["status"] != "ready" {
		t.Errorf("readyz %s", r.raw)
	}
	h.fakes.Kube.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("connection refused")
	})
	down := h.want(h.do("GET", "/readyz", "", nil), 503, "readyz with Kubernetes down")
	if e, _ := down.body["error"].(string); e != "kubernetes not answering" {
		t.Errorf("readyz does not name the backend that is down, and only it, without its details: %s", down.raw)
	}
}

func TestDCGMScrapeTargetsFollowGPUNodes(t *testing.T) {
	dir := t.TempDir()
	targets, err := scrapetargets.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, &harnessOptions{targets: targets})
	_, key := h.mint("org")
	gpu, cpu := newNode(t, "gpu-a"), newNode(t, "cpu-a")
	h.want(h.validate(gpu, key), 200, "validate gpu")
	h.want(h.register(gpu, h100s(8)), 200, "register gpu")
	h.want(h.validate(cpu, key), 200, "validate cpu")
	h.want(h.register(cpu, nil), 200, "register cpu")
	raw, err := os.ReadFile(filepath.Join(dir, "gpu-a.json"))
	if err != nil || !strings.Contains(string(raw), gpu.vpnIP+":9400") || !strings.Contains(string(raw), `"gpu_count": "8"`) {
		t.Fatalf("the GPU node's target: %v\n%s", err, raw)
	}
	if _, err := os.Stat(filepath.Join(dir, "cpu-a.json")); err == nil {
		t.Error("a CPU-only node got a DCGM target")
	}
	h.want(h.do("POST", "/v1/nodes/disconnect", testAdminToken, map[string]any{"hostname": "gpu-a"}), 200, "disconnect")
	if _, err := os.Stat(filepath.Join(dir, "gpu-a.json")); err == nil {
		t.Error("the target survived the disconnect")
	}
}

// TestAMovedNodeTakesItsOwnPod: a node whose GPU report changes leaves its
// old pool with its own pod named for deletion, not a random worker.
func TestAMovedNodeTakesItsOwnPod(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, nil)
	_, key := h.mint("org")
	a, b := newNode(t, "node-a"), newNode(t, "node-b")
	for _, n := range []*node{a, b} {
		h.kubeNode(n, "")
		h.want(h.validate(n, key), 200, "validate")
		h.want(h.register(n, h100s(8)), 200, "register")
	}
	group := "gpu-nvidia-nvidia-h100-80gb-hbm3-x8"
	for _, n := range []*node{a, b} {
		_, err := h.fakes.Kube.CoreV1().Pods(testNamespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "worker-on-" + n.hostname, Namespace: testNamespace,
			Labels: map[string]string{"ray.io/cluster": "gridweave-cluster", "ray.io/group": group}}, Spec: corev1.PodSpec{NodeName: n.hostname}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	h.want(h.register(b, h100s(4)), 200, "b re-registers with 4 GPUs")
	rc, _ := h.fakes.Client.GetCluster(ctx, testNamespace, "gridweave-cluster")
	for _, g := range rc.Spec.WorkerGroupSpecs {
		if g.GroupName == group && (*g.Replicas != 1 || len(g.ScaleStrategy.WorkersToDelete) != 1 || g.ScaleStrategy.WorkersToDelete[0] != "worker-on-node-b") {
			t.Errorf("the x8 group after b moved: replicas %d, workersToDelete %v; want 1 and [worker-on-node-b]", *g.Replicas, g.ScaleStrategy.WorkersToDelete)
		}
	}
	// Once that pod is gone, the next departure does not keep its name.
	_ = h.fakes.Kube.CoreV1().Pods(testNamespace).Delete(ctx, "worker-on-node-b", metav1.DeleteOptions{})
	h.want(h.do("POST", "/v1/nodes/disconnect", testAdminToken, map[string]any{"hostname": "node-a"}), 200, "disconnect a")
	rc, _ = h.fakes.Client.GetCluster(ctx, testNamespace, "gridweave-cluster")
	for _, g := range rc.Spec.WorkerGroupSpecs {
		if g.GroupName == group {
			t.Errorf("the x8 group outlived its last node: %+v", g.ScaleStrategy)
		}
	}
}
