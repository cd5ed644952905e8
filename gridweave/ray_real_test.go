package gridweave_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"gridweave.dev/gridweave"
	"gridweave.dev/internal/raytest"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/rayctl/dashboard"
)

// TestRayProxyOnRealRay: /v1/ray/serve/statuses and DELETE
// /v1/ray/serve/applications/{app} against real Serve applications on a
// real Ray head.
func TestRayProxyOnRealRay(t *testing.T) {
	tc := testcluster.Shared(t)
	head := raytest.Shared(t)
	ctx := context.Background()
	d, err := dashboard.New(head.DashboardURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	uri, data, err := raytest.Package(map[string]string{"model.py": raytest.ServeModule})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.UploadPackage(ctx, uri, data); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	app := func(name string) map[string]any {
		return map[string]any{"name": name, "route_prefix": "/" + name, "import_path": "model:app", "runtime_env": map[string]any{"working_dir": uri}}
	}
	if err := d.PutApplications(ctx, map[string]any{"http_options": map[string]any{"host": "127.0.0.1", "port": port}, "applications": []any{app("chat"), app("embed")}}); err != nil {
		t.Fatal(err)
	}
	pub, _, _ := proxyServer(t, tc, head.DashboardURL, nil)
	statuses := waitServe(t, pub, map[string]string{"chat": "RUNNING", "embed": "RUNNING"})
	t.Logf("statuses through the proxy: %s", statuses.raw)

	pub.want(pub.do("DELETE", "/v1/ray/serve/applications/chat", internalToken, nil), 200, "delete chat")
	waitServe(t, pub, map[string]string{"chat": "", "embed": "RUNNING"})
	details, err := d.ServeApplications(ctx)
	if err != nil || details.Applications["embed"].DeployedAppConfig["import_path"] != "model:app" {
		t.Fatalf("embed after chat's removal: %+v %v", details, err)
	}
	if r := pub.do("DELETE", "/v1/ray/serve/applications/chat", internalToken, nil); r.status != 404 {
		t.Errorf("deleting chat again: %d %s", r.status, r.raw)
	}
	pub.want(pub.do("DELETE", "/v1/ray/serve/applications/embed", internalToken, nil), 200, "delete embed")
	waitServe(t, pub, map[string]string{"embed": ""})
}

// waitServe polls the proxy's statuses until each application has the
// status given ("" meaning gone).
func waitServe(t *testing.T, pub *harness, want map[string]string) reply {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r := pub.want(pub.do("GET", "/v1/ray/serve/statuses", internalToken, nil), 200, "statuses")
		got := map[string]string{}
		for _, a := range r.body["applications"].([]any) {
			app := a.(map[string]any)
			got[fmt.Sprint(app["name"])] = fmt.Sprint(app["status"])
		}
		done := true
		for name, status := range want {
			if got[name] != status {
				done = false
			}
			if got[name] == "DEPLOY_FAILED" {
				t.Fatalf("%s failed: %s", name, r.raw)
			}
		}
		if done {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("Serve did not reach %v: %s", want, r.raw)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestKubeTorchOnRealRay: a bundle synced, then trained with real Ray
// Train on two Ray nodes that declare a GPU each and have no CUDA (so
// gloo, not NCCL); the bundle reaches Ray as a package the cluster holds
// (working_dir gcs://...); the user's script calls
// torch.distributed.init_process_group itself; the job's status and logs
// come through /v1/kubetorch/jobs/{id}.
func TestKubeTorchOnRealRay(t *testing.T) {
	tc := testcluster.Shared(t)
	head := raytest.Shared(t)
	ns := raytest.SharedNamespace()
	ctx := context.Background()
	for _, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		raytest.StartNodeT(t, raytest.NodeOptions{NetNS: ns.Name, IP: ip, HeadAddress: head.GCSAddress, NumCPUs: 1, NumGPUs: 1}, head.DashboardURL)
	}
	pub, _, _ := proxyServer(t, tc, head.DashboardURL, func(c *gridweave.Config) { c.KubeTorchDir = t.TempDir() })

	code := codeTarGz(t, map[string]string{"train.py": raytest.DistributedTrainScript})
	synced := send(t, pub, "/v1/kubetorch/sync", testAdminToken, "application/gzip", code)
	if synced.status != 201 {
		t.Fatalf("sync: %d %s", synced.status, synced.raw)
	}
	id := synced.body["id"].(string)

	// The cluster KubeTorch checks (workers on kwok GPU nodes); the
	// training itself runs on the real Ray nodes.
	seq := realSeq.Add(1)
	for i := range 2 {
		if _, err := tc.AddNode(ctx, fmt.Sprintf("ktr-%d-%d", seq, i), corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}, nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	pub.want(pub.do("POST", "/v1/kuberay/clusters", testAdminToken, map[string]any{"name": "train", "head": map[string]any{"cpu": "1", "memory": "2Gi"},
		"worker_groups": []any{map[string]any{"name": "gpu", "replicas": 2, "gpus": 1, "cpu": "1", "memory": "2Gi"}}}), 201, "create the cluster")
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		h := pub.do("GET", "/v1/kubetorch/health?cluster=train", testAdminToken, nil)
		if h.status == 200 && h.body["healthy"] == true {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the GPU workers never became healthy: %d %s", h.status, h.raw)
		}
	}

	train := pub.want(pub.do("POST", "/v1/kubetorch/train", testAdminToken, map[string]any{"cluster": "train", "bundle": id, "command": "python train.py", "owner": "alice"}), 201, "train")
	jobID := train.body["id"].(string)
	var last reply
	for deadline := time.Now().Add(6 * time.Minute); ; time.Sleep(2 * time.Second) {
		last = pub.want(pub.do("GET", "/v1/kubetorch/jobs/"+jobID, userJWT(t, "alice"), nil), 200, "alice's job")
		status := fmt.Sprint(last.body["status"])
		if status == "SUCCEEDED" {
			break
		}
		if status == "FAILED" || status == "STOPPED" || time.Now().After(deadline) {
			t.Fatalf("the training job is %s: %s", status, last.raw)
		}
	}
	if lines, _ := last.body["logs"].([]any); len(lines) == 0 {
		t.Errorf("no log lines through /v1/kubetorch/jobs/%s: %s", jobID, last.raw)
	}
	t.Logf("the job through /v1/kubetorch/jobs/%s: %s", jobID, last.raw)
	// The whole log (the API gives the last lines) from Ray itself.
	d, _ := dashboard.New(head.DashboardURL, nil)
	logs, err := d.JobLogs(ctx, jobID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, "torch.distributed backend gloo") {
		t.Errorf("the job's log does not say it chose gloo:\n%s", logs)
	}
	if met := raytest.DistributedTrainRanks(logs); len(met) != 2 || met["zero"].MetAt != met["one"].MetAt {
		t.Errorf("the ranks' sums (rank: where they met) %v; want ranks zero and one, each with sum 3, met at one address:\n%s", met, logs)
	}
}
