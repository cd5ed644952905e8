package gridweave_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave"
	"gridweave.dev/internal/openapitest"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/rayctltest"
)

const internalToken = "internal-token-for-the-gateway-0123456789"

// proxyServer is the service on the real control plane with the CRD and
// Ray proxies: its public handler (INTERNAL_TOKEN set) and internal one.
func proxyServer(t *testing.T, tc *testcluster.Cluster, dashboardURL string, configure func(*gridweave.Config)) (public, internal *harness, ns string) {
	t.Helper()
	ctx := context.Background()
	ns = fmt.Sprintf("gw-proxy-%d", realSeq.Add(1))
	if err := tc.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	c := testConfig()
	c.Namespace = ns
	c.VPNCIDR, c.MasterVPNIP = netip.MustParsePrefix("198.18.128.0/20"), netip.MustParseAddr("198.18.128.1")
	c.InternalToken, c.InternalAddr, c.RayDashboardURL = internalToken, "127.0.0.1:0", dashboardURL
	if configure != nil {
		configure(&c)
	}
	pool, _ := joinkeys.NewPool(c.VPNCIDR, c.MasterVPNIP)
	kr, _ := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte(c.JWTSecret), Pool: pool})
	_, pub, _ := wgkey.GeneratePair()
	rc, err := rayctl.New(tc.Kube, tc.Ray, &rayctl.Options{Namespace: ns, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := gridweave.New(ctx, c, gridweave.Backends{Keyring: kr, Mesh: memmesh.New(pub), Ray: rc, Kube: tc.Kube, Dynamic: tc.Dynamic})
	if err != nil {
		t.Fatal(err)
	}
	public = newHarnessFor(t, s, c)
	doc, err := s.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	isrv := httptest.NewServer(openapitest.Middleware(t, openapitest.MustParse(t, doc), s.InternalHandler()))
	t.Cleanup(isrv.Close)
	internal = &harness{t: t, url: isrv.URL, server: s, cfg: c, client: http.DefaultClient}
	return public, internal, ns
}

func job(name, owner, cluster string) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": name, "labels": map[string]any{"team": "rl"}},
		"spec": map[string]any{"owner": owner, "cluster": cluster, "entrypoint": "python train.py"}}
}

// TestCRDProxyOnTheRealAPIServer: GridweaveJobs and GridweaveEndpoints
// through /v1/crd, judged by the real API server with our CRDs: create,
// list (label selector, owner), get, merge patch, a stale resourceVersion,
// status, delete, endpoints by name; validation errors as 422 with the
// field path. And who may call: the internal listener without
// credentials, the public one only with INTERNAL_TOKEN, neither when off.
func TestCRDProxyOnTheRealAPIServer(t *testing.T) {
	tc := testcluster.Shared(t)
	pub, in, _ := proxyServer(t, tc, "", nil)
	tok := internalToken

	created := pub.want(pub.do("POST", "/v1/crd/jobs", tok, job("train-1", "alice", "rl-cluster")), 201, "create")
	if created.body["kind"] != "GridweaveJob" {
		t.Errorf("created %s", created.raw)
	}
	in.want(in.do("POST", "/v1/crd/jobs", "", job("train-2", "bob", "rl-cluster")), 201, "create on the internal listener")
	bad := pub.do("POST", "/v1/crd/jobs", tok, job("train-3", "alice", "Bad_Name"))
	if bad.status != 422 || bad.errorField("field") != "spec.cluster" {
		t.Errorf("an invalid cluster name: %d %s", bad.status, bad.raw)
	}
	cel := job("train-4", "alice", "rl-cluster")
	cel["spec"].(map[string]any)["resources"] = map[string]any{"gpusPerWorker": 2}
	if r := pub.do("POST", "/v1/crd/jobs", tok, cel); r.status != 422 || !strings.Contains(string(r.raw), "gpuType is required") {
		t.Errorf("a CEL rule: %d %s", r.status, r.raw)
	}
	unknown := job("train-5", "alice", "rl-cluster")
	unknown["spec"].(map[string]any)["entrypiont"] = "typo"
	if r := pub.do("POST", "/v1/crd/jobs", tok, unknown); r.status/100 != 4 || !strings.Contains(string(r.raw), "entrypiont") {
		t.Errorf("an unknown field: %d %s", r.status, r.raw)
	}
	if r := pub.do("POST", "/v1/crd/jobs", tok, job("train-1", "alice", "rl-cluster")); r.status != 409 {
		t.Errorf("a second train-1: %d %s", r.status, r.raw)
	}

	list := pub.want(pub.do("GET", "/v1/crd/jobs?owner=alice", tok, nil), 200, "list by owner")
	if items := list.body["items"].([]any); len(items) != 1 {
		t.Errorf("alice's jobs: %s", list.raw)
	}
	list = pub.want(pub.do("GET", "/v1/crd/jobs?label_selector=team%3Drl", tok, nil), 200, "list by label")
	if items := list.body["items"].([]any); len(items) != 2 {
		t.Errorf("team=rl jobs: %s", list.raw)
	}
	got := pub.want(pub.do("GET", "/v1/crd/jobs/train-1", tok, nil), 200, "get")
	rv := got.body["metadata"].(map[string]any)["resourceVersion"].(string)
	if r := pub.do("GET", "/v1/crd/jobs/nonesuch", tok, nil); r.status != 404 {
		t.Errorf("get a missing job: %d", r.status)
	}
	pub.want(pub.do("PATCH", "/v1/crd/jobs/train-1", tok, map[string]any{"spec": map[string]any{"submissionId": "raysubmit_1"}}), 200, "merge patch")
	stale := map[string]any{"metadata": map[string]any{"resourceVersion": rv}, "spec": map[string]any{"submissionId": "raysubmit_2"}}
	if r := pub.do("PATCH", "/v1/crd/jobs/train-1", tok, stale); r.status != 409 {
		t.Errorf("a stale resourceVersion: %d %s", r.status, r.raw)
	}
	st := pub.want(pub.do("PATCH", "/v1/crd/jobs/train-1/status", tok, map[string]any{"status": map[string]any{"phase": "Running", "message": "step 1"}}), 200, "status")
	if st.body["status"].(map[string]any)["phase"] != "Running" || st.body["spec"].(map[string]any)["submissionId"] != "raysubmit_1" {
		t.Errorf("after the status patch: %s", st.raw)
	}
	if r := pub.do("PATCH", "/v1/crd/jobs/train-1/status", tok, map[string]any{"status": map[string]any{"phase": "Exploded"}}); r.status != 422 || r.errorField("field") != "status.phase" {
		t.Errorf("an unknown phase: %d %s", r.status, r.raw)
	}
	pub.want(pub.do("DELETE", "/v1/crd/jobs/train-1", tok, nil), 200, "delete")
	if r := pub.do("DELETE", "/v1/crd/jobs/train-1", tok, nil); r.status != 404 {
		t.Errorf("delete twice: %d", r.status)
	}

	ep := map[string]any{"metadata": map[string]any{"name": "chat-endpoint"}, "spec": map[string]any{"name": "chat", "cluster": "serve",
		"model": "meta-llama/Llama-3-8B", "hardware": map[string]any{"gpuType": "NVIDIA-H100-80GB-HBM3", "gpus": 1}, "replicas": 1}}
	pub.want(pub.do("POST", "/v1/crd/endpoints", tok, ep), 201, "create endpoint")
	byName := pub.want(pub.do("GET", "/v1/crd/endpoints/by-name/chat", tok, nil), 200, "by name")
	if byName.body["metadata"].(map[string]any)["name"] != "chat-endpoint" {
		t.Errorf("by name: %s", byName.raw)
	}
	if r := pub.do("GET", "/v1/crd/endpoints/by-name/nonesuch", tok, nil); r.status != 404 {
		t.Errorf("by a missing name: %d", r.status)
	}

	// Who may call.
	if r := pub.do("GET", "/v1/crd/jobs", "", nil); r.status != 401 {
		t.Errorf("the public listener without the token: %d", r.status)
	}
	if r := pub.do("GET", "/v1/crd/jobs", testAdminToken, nil); r.status != 401 {
		t.Errorf("the public listener with the admin token: %d", r.status)
	}
	off, offIn, _ := proxyServer(t, tc, "", func(c *gridweave.Config) { c.InternalToken, c.InternalAddr = "", "" })
	if r := off.do("GET", "/v1/crd/jobs", tok, nil); r.status != 403 || r.errorField("code") != "internal_route" {
		t.Errorf("the public listener with internal routes off: %d %s", r.status, r.raw)
	}
	if r := offIn.do("GET", "/v1/crd/jobs", "", nil); r.status != 200 {
		// The internal handler is only served when INTERNAL_ADDR is set
		// (examples/server); it needs no credentials.
		t.Errorf("the internal handler: %d", r.status)
	}
}

// TestRayProxy: Serve statuses and the deletion of one application through
// a dashboard with the real API's shapes; an unreachable or slow one is a
// 502 or 504 within the bound.
func TestRayProxy(t *testing.T) {
	tc := testcluster.Shared(t)
	d := rayctltest.NewDashboard(t, "")
	d.DeployApp("chat", "/chat", "chat.app:deployment")
	d.DeployApp("embed", "/embed", "embed.app:deployment")
	pub, _, _ := proxyServer(t, tc, d.URL, nil)
	statuses := pub.want(pub.do("GET", "/v1/ray/serve/statuses", internalToken, nil), 200, "statuses")
	if apps := statuses.body["applications"].([]any); len(apps) != 2 || !strings.Contains(string(statuses.raw), `"RUNNING"`) {
		t.Errorf("statuses: %s", statuses.raw)
	}
	pub.want(pub.do("DELETE", "/v1/ray/serve/applications/chat", internalToken, nil), 200, "delete chat")
	if apps := d.Apps(); len(apps) != 1 || apps[0] != "embed" {
		t.Errorf("after deleting chat the dashboard runs %v", apps)
	}
	if r := pub.do("DELETE", "/v1/ray/serve/applications/chat", internalToken, nil); r.status != 404 {
		t.Errorf("deleting chat again: %d", r.status)
	}
	d.MarkImperative("embed")
	d.DeployApp("other", "/other", "other.app:deployment")
	if r := pub.do("DELETE", "/v1/ray/serve/applications/other", internalToken, nil); r.status != 409 {
		t.Errorf("a delete that would drop an imperative app: %d %s", r.status, r.raw)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	gone, _, _ := proxyServer(t, tc, down.URL, nil)
	if r := gone.do("GET", "/v1/ray/serve/statuses", internalToken, nil); r.status != 502 {
		t.Errorf("an unreachable dashboard: %d %s", r.status, r.raw)
	}
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}))
	defer slow.Close()
	sleepy, _, _ := proxyServer(t, tc, slow.URL, func(c *gridweave.Config) { c.RayDashboardTimeout = 300 * time.Millisecond })
	start := time.Now()
	if r := sleepy.do("GET", "/v1/ray/serve/statuses", internalToken, nil); r.status != 504 {
		t.Errorf("a slow dashboard: %d %s", r.status, r.raw)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a slow dashboard held the request for %s", took)
	}
	noDash, _, _ := proxyServer(t, tc, "", nil)
	if r := noDash.do("GET", "/v1/ray/serve/statuses", internalToken, nil); r.status != 503 {
		t.Errorf("no RAY_DASHBOARD_URL: %d", r.status)
	}
}

// TestEndpointHardwareSwap: a patch of an endpoint's spec.hardware moves
// its workers in one update of its RayCluster, on the real operator: the
// head pod stays, the new group runs on a node of the new GPU type, the
// old group goes, the status follows.
func TestEndpointHardwareSwap(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx := context.Background()
	pub, _, ns := proxyServer(t, tc, "", nil)
	seq := realSeq.Add(1)
	for _, n := range []struct{ name, product string }{{"h100", "NVIDIA-H100-80GB-HBM3"}, {"a100", "NVIDIA-A100-SXM4-80GB"}} {
		if _, err := tc.AddNode(ctx, fmt.Sprintf("ep-%d-%s", seq, n.name), corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")},
			map[string]string{gridweave.GPUProductLabel: n.product}, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tc.AddNode(ctx, fmt.Sprintf("ep-%d-head", seq), nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	pub.want(pub.do("POST", "/v1/kuberay/clusters", testAdminToken, map[string]any{"name": "serve", "head": map[string]any{"cpu": "1", "memory": "2Gi"}}), 201, "create the cluster")
	ep := map[string]any{"metadata": map[string]any{"name": "chat"}, "spec": map[string]any{"name": "chat", "cluster": "serve",
		"model": "meta-llama/Llama-3-8B", "hardware": map[string]any{"gpuType": "NVIDIA-H100-80GB-HBM3", "gpus": 1}, "replicas": 1}}
	pub.want(pub.do("POST", "/v1/crd/endpoints", internalToken, ep), 201, "create the endpoint")
	hw := func(product string) map[string]any {
		return map[string]any{"spec": map[string]any{"hardware": map[string]any{"gpuType": product, "gpus": 1}}}
	}
	// Pods of the cluster by group, running, and where.
	running := func(group string) (string, bool) {
		pods, _ := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=serve,ray.io/group=" + group})
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				return p.Spec.NodeName, true
			}
		}
		return "", false
	}
	headUID := func() string {
		pods, _ := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=serve,ray.io/node-type=head"})
		if len(pods.Items) != 1 {
			return ""
		}
		return string(pods.Items[0].UID)
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); !cond(); time.Sleep(250 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("not %s after 90s", what)
			}
		}
	}

	// The first hardware patch adds the endpoint's group (there is no old
	// one); the next ones swap it.
	pub.want(pub.do("PATCH", "/v1/crd/endpoints/chat", internalToken, hw("NVIDIA-H100-80GB-HBM3-PCIe")), 200, "first hardware")
	on := pub.want(pub.do("PATCH", "/v1/crd/endpoints/chat", internalToken, hw("NVIDIA-H100-80GB-HBM3")), 200, "onto H100")
	h100Group := on.body["status"].(map[string]any)["workerGroup"].(string)
	waitUntil("running on the H100 node", func() bool { n, ok := running(h100Group); return ok && n == fmt.Sprintf("ep-%d-h100", seq) })
	waitUntil("the head running", func() bool { return headUID() != "" })
	head := headUID()

	moved := pub.want(pub.do("PATCH", "/v1/crd/endpoints/chat", internalToken, hw("NVIDIA-A100-SXM4-80GB")), 200, "onto A100")
	status := moved.body["status"].(map[string]any)
	a100Group, _ := status["workerGroup"].(string)
	if a100Group == h100Group || status["hardware"].(map[string]any)["gpuType"] != "NVIDIA-A100-SXM4-80GB" {
		t.Fatalf("the status after the move: %s", moved.raw)
	}
	rc, err := tc.Ray.RayV1().RayClusters(ns).Get(ctx, "serve", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, g := range rc.Spec.WorkerGroupSpecs {
		groups = append(groups, g.GroupName)
	}
	if len(groups) != 1 || groups[0] != a100Group {
		t.Errorf("the cluster's groups after the move: %v, want only %s", groups, a100Group)
	}
	waitUntil("running on the A100 node", func() bool { n, ok := running(a100Group); return ok && n == fmt.Sprintf("ep-%d-a100", seq) })
	waitUntil("the H100 group's pods gone", func() bool {
		pods, _ := tc.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=serve,ray.io/group=" + h100Group})
		return len(pods.Items) == 0
	})
	if got := headUID(); got != head {
		t.Errorf("the head pod changed: %s, was %s", got, head)
	}
	// A patch that leaves the hardware alone does not touch the cluster.
	before := rc.Generation
	pub.want(pub.do("PATCH", "/v1/crd/endpoints/chat", internalToken, map[string]any{"spec": map[string]any{"replicas": 1}}), 200, "a patch without hardware")
	if rc2, _ := tc.Ray.RayV1().RayClusters(ns).Get(ctx, "serve", metav1.GetOptions{}); rc2.Generation != before {
		t.Errorf("a patch without hardware changed the cluster")
	}
}
