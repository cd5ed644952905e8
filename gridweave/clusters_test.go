package gridweave_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"

	"gridweave.dev/joinkeys"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/rayctl/rayctltest"
)

const workerSpecJSON = `{"groupName":"cpu","replicas":1,"minReplicas":0,"maxReplicas":2,"rayStartParams":{},
 "template":{"spec":{"containers":[{"name":"ray-worker","image":"rayproject/ray:2.54.0-py312",
 "resources":{"limits":{"cpu":"1","memory":"2Gi"},"requests":{"cpu":"1","memory":"2Gi"}}}]}}}`

func TestClustersAPI(t *testing.T) {
	stores(t, func(t *testing.T, store func(testing.TB) joinkeys.Store) {
		ctx := context.Background()
		h := newHarness(t, &harnessOptions{store: store(t)})
		admin := testAdminToken
		base := "/v1/kuberay/clusters"

		created := h.want(h.do("POST", base, admin, map[string]any{"name": "train", "head": map[string]any{"cpu": "2", "memory": "4Gi"},
			"worker_groups": []map[string]any{{"name": "gpu", "gpus": 8, "replicas": 1, "max_replicas": 2}}}), 201, "create typed")
		if created.body["metadata"].(map[string]any)["namespace"] != testNamespace {
			t.Errorf("created in %v", created.body["metadata"])
		}
		full := `{"apiVersion":"ray.io/v1","kind":"RayCluster","metadata":{"name":"full"},"spec":{"headGroupSpec":{"rayStartParams":{},
		  "template":{"spec":{"containers":[{"name":"ray-head","image":"rayproject/ray:2.54.0-py312"}]}}}}}`
		h.want(h.do("POST", base, admin, full), 201, "create a full RayCluster")
		h.want(h.do("POST", base, admin, map[string]any{"name": "train"}), 409, "create an existing cluster")
		bad := h.do("POST", base, admin, map[string]any{"name": "x", "head": map[string]any{"cpu": "2"}, "bogus": 1})
		if bad.status != 400 || bad.errorField("field") != "bogus" {
			t.Errorf("unknown field in a typed spec: %d %s", bad.status, bad.raw)
		}
		if r := h.do("POST", base, admin, map[string]any{"name": "x", "namespace": "other"}); r.status != 400 || r.errorField("field") != "namespace" {
			t.Errorf("another namespace: %d %s", r.status, r.raw)
		}
		list := h.want(h.do("GET", base, admin, nil), 200, "list")
		if got := len(list.body["clusters"].([]any)); got != 2 {
			t.Errorf("%d clusters listed, want 2", got)
		}
		h.want(h.do("GET", base+"/train", admin, nil), 200, "get")
		h.want(h.do("GET", base+"/missing", admin, nil), 404, "get a missing cluster")
		if r := h.do("GET", base+"/Not_A_Name", admin, nil); r.status != 400 || r.errorField("field") != "name" {
			t.Errorf("bad name: %d %s", r.status, r.raw)
		}
		// A bad name is the answer whatever the body: it is checked first.
		for _, path := range []string{"/Not_A_Name/scale", "/Not_A_Name/worker-groups", "/Not_A_Name/worker-groups-raw", "/Not_A_Name/swap-worker-groups", "/Not_A_Name/replace-worker-groups"} {
			method := "POST"
			if strings.HasSuffix(path, "/scale") {
				method = "PATCH"
			}
			if r := h.do(method, base+path, admin, "not json"); r.status != 400 || r.errorField("field") != "name" {
				t.Errorf("%s %s with a bad name and body: %d %s", method, path, r.status, r.raw)
			}
		}

		// Scale: KubeRay's rules are 422, naming the field.
		h.want(h.do("PATCH", base+"/train/scale", admin, map[string]any{"group": "gpu", "replicas": 2}), 200, "scale")
		over := h.want(h.do("PATCH", base+"/train/scale", admin, map[string]any{"group": "gpu", "replicas": 5}), 422, "scale past max")
		if over.errorField("field") == "" {
			t.Errorf("422 without a field: %s", over.raw)
		}
		h.want(h.do("PATCH", base+"/train/scale", admin, map[string]any{"group": "nope", "replicas": 1}), 404, "scale a missing group")
		h.want(h.do("PATCH", base+"/train/scale", admin, map[string]any{"replicas": 1}), 400, "scale without a group")

		// Worker groups, typed and raw.
		h.want(h.do("POST", base+"/train/worker-groups", admin, map[string]any{"name": "small", "cpu": "1", "memory": "1Gi"}), 201, "add typed group")
		h.want(h.do("POST", base+"/train/worker-groups", admin, map[string]any{"name": "small", "cpu": "1", "memory": "1Gi"}), 409, "add a group twice")
		h.want(h.do("POST", base+"/train/worker-groups-raw", admin, workerSpecJSON), 201, "add raw group")
		if r := h.do("POST", base+"/train/worker-groups-raw", admin, strings.Replace(workerSpecJSON, `"groupName":"cpu"`, `"groupName":"cpu2","replica":3`, 1)); r.status != 400 || r.errorField("field") != "replica" {
			t.Errorf("raw group with an unknown field: %d %s", r.status, r.raw)
		}
		if r := h.do("POST", base+"/train/worker-groups-raw", admin, strings.NewReplacer(`"minReplicas":0`, `"minReplicas":3`, `"groupName":"cpu"`, `"groupName":"cpu3"`).Replace(workerSpecJSON)); r.status != 422 {
			t.Errorf("raw group KubeRay refuses (min > max): %d %s", r.status, r.raw)
		}
		groups := h.want(h.do("GET", base+"/train/worker-groups", admin, nil), 200, "worker groups")
		if got := len(groups.body["worker_groups"].([]any)); got != 3 {
			t.Errorf("%d groups, want 3", got)
		}

		// Workers and logs of a group's pods.
		for _, name := range []string{"train-gpu-worker-a", "train-gpu-worker-b"} {
			_, err := h.fakes.Kube.CoreV1().Pods(testNamespace).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace,
				Labels: map[string]string{"ray.io/cluster": "train", "ray.io/group": "gpu", "ray.io/node-type": "worker"}},
				Spec: corev1.PodSpec{NodeName: "gpu-node", Containers: []corev1.Container{{Name: "ray-worker"}}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		workers := h.want(h.do("GET", base+"/train/workers?group=gpu", admin, nil), 200, "workers")
		if got := len(workers.body["workers"].([]any)); got != 2 {
			t.Errorf("%d workers, want 2: %s", got, workers.raw)
		}
		req, _ := http.NewRequest("GET", h.url+base+"/train/worker-groups/gpu/logs?tail=10", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || len(lines) != 2 || !strings.HasPrefix(lines[0], "[train-gpu-worker-") {
			t.Errorf("logs: %d %q", resp.StatusCode, lines)
		}
		for _, q := range []string{"tail=-1", "since=yesterday", "follow=perhaps"} {
			if r := h.do("GET", base+"/train/worker-groups/gpu/logs?"+q, admin, nil); r.status != 400 {
				t.Errorf("logs?%s: %d", q, r.status)
			}
		}

		// Swap and replace in one update each.
		swap := `{"old_group":"small","new_group":` + strings.Replace(workerSpecJSON, `"groupName":"cpu"`, `"groupName":"small-v2"`, 1) + `}`
		h.want(h.do("POST", base+"/train/swap-worker-groups", admin, swap), 200, "swap")
		h.want(h.do("POST", base+"/train/swap-worker-groups", admin, strings.Replace(swap, `"old_group":"small"`, `"old_group":"gone"`, 1)), 404, "swap a missing group")
		h.want(h.do("POST", base+"/train/replace-worker-groups", admin, `{"worker_groups":[`+workerSpecJSON+`]}`), 200, "replace")
		rc, _ := h.fakes.Client.GetCluster(ctx, testNamespace, "train")
		if len(rc.Spec.WorkerGroupSpecs) != 1 || rc.Spec.WorkerGroupSpecs[0].GroupName != "cpu" {
			t.Errorf("after replace: %+v", rc.Spec.WorkerGroupSpecs)
		}
		h.want(h.do("DELETE", base+"/train/worker-groups/cpu/pods", admin, nil), 200, "delete a group's pods")
		h.want(h.do("DELETE", base+"/train/worker-groups/cpu?immediate=true", admin, nil), 200, "remove a group at once")
		h.want(h.do("DELETE", base+"/train/worker-groups/cpu?immediate=true", admin, nil), 404, "remove it again")

		// A write that keeps conflicting past the retries is 409.
		rayctltest.InjectConflicts(&h.fakes.Ray.Fake, "rayclusters", 1000)
		h.want(h.do("POST", base+"/train/worker-groups", admin, map[string]any{"name": "late", "cpu": "1", "memory": "1Gi"}), 409, "conflicts past the retries")

		h.want(h.do("DELETE", base+"/full", admin, nil), 200, "delete")
		h.want(h.do("GET", base+"/full", admin, nil), 404, "get after delete")
		h.want(h.do("GET", base, "", nil), 401, "clusters need a credential")
	})
}
