package gridweave_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/crd/v1alpha1"
	"gridweave.dev/gridweave/kubetorch"
	"gridweave.dev/internal/testcluster"
	"gridweave.dev/rayctl/rayctltest"
)

// send posts body with a content type, as an upload client does.
func send(t *testing.T, h *harness, path, token, contentType string, body []byte) reply {
	t.Helper()
	req, _ := http.NewRequest("POST", h.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: raw}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func codeTarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range files {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

func userJWT(t *testing.T, sub string) string {
	return jwtFor(t, jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "role": "user", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()})
}

// TestKubeTorch: a bundle synced (raw and multipart, content-addressed,
// refused entries named, the size bound), served back without
// credentials on the internal listener (never the public one); training launched on a real cluster's ready GPU workers
// through a dashboard with the real API's shapes, recorded as a
// GridweaveJob whose status follows the Ray job; health per group; a user
// sees only their own job.
func TestKubeTorch(t *testing.T) {
	tc := testcluster.Shared(t)
	ctx := context.Background()
	d := rayctltest.NewDashboard(t, "")
	pub, internal, ns := proxyServer(t, tc, d.URL, func(c *gridweave.Config) {
		c.KubeTorchDir = t.TempDir()
		c.KubeTorchMaxBundle = 64 << 10
		c.KubeTorchBaseURL = "http://198.18.128.1:8800"
	})
	code := codeTarGz(t, map[string]string{"train.py": "import torch\n", "lib/model.py": "x = 1\n"})

	synced := send(t, pub, "/v1/kubetorch/sync", testAdminToken, "application/gzip", code)
	if synced.status != 201 || synced.body["files"] != float64(2) || synced.body["size"] != float64(len(code)) {
		t.Fatalf("sync: %d %s", synced.status, synced.raw)
	}
	id := synced.body["id"].(string)
	if url := synced.body["url"].(string); url != "http://198.18.128.1:8800/v1/kubetorch/bundles/"+id+".zip" {
		t.Errorf("the bundle's url %s", url)
	}
	// The same bytes, as a multipart field: the same bundle.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, _ := mw.CreateFormFile("bundle", "code.tar.gz")
	_, _ = fw.Write(code)
	mw.Close()
	if again := send(t, pub, "/v1/kubetorch/sync", testAdminToken, mw.FormDataContentType(), mp.Bytes()); again.status != 201 || again.body["id"] != id {
		t.Errorf("the same bytes as multipart: %d %s", again.status, again.raw)
	}
	evil := codeTarGz(t, map[string]string{"../../etc/cron.d/evil": "* * * * * root sh\n"})
	if bad := send(t, pub, "/v1/kubetorch/sync", testAdminToken, "application/gzip", evil); bad.status != 400 || bad.errorField("field") != "bundle" || !strings.Contains(string(bad.raw), "../../etc/cron.d/evil") {
		t.Errorf("an escaping entry: %d %s", bad.status, bad.raw)
	}
	if big := send(t, pub, "/v1/kubetorch/sync", testAdminToken, "application/zip", bytes.Repeat([]byte("x"), 200<<10)); big.status != 413 {
		t.Errorf("an upload over the bound: %d %s", big.status, big.raw)
	}
	if odd := send(t, pub, "/v1/kubetorch/sync", testAdminToken, "text/plain", []byte("print('hello')\n")); odd.status != 415 {
		t.Errorf("a text/plain upload: %d", odd.status)
	}
	// A client that says application/octet-stream: the bytes tell.
	if sniffed := send(t, pub, "/v1/kubetorch/sync", testAdminToken, "application/octet-stream", code); sniffed.status != 201 || sniffed.body["id"] != id {
		t.Errorf("an octet-stream tar.gz: %d %s", sniffed.status, sniffed.raw)
	}
	if anon := send(t, pub, "/v1/kubetorch/sync", "", "application/gzip", code); anon.status != 401 {
		t.Errorf("an upload without credentials: %d", anon.status)
	}
	if r := pub.do("GET", "/v1/kubetorch/bundles/"+id+".zip", "", nil); r.status != 404 {
		t.Errorf("a bundle on the public listener: %d", r.status)
	}
	resp, err := http.Get(internal.url + "/v1/kubetorch/bundles/" + id + ".zip")
	if err != nil {
		t.Fatal(err)
	}
	zipped, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	zr, err := zip.NewReader(bytes.NewReader(zipped), int64(len(zipped)))
	if resp.StatusCode != 200 || err != nil || len(zr.File) != 2 || !strings.HasPrefix(zr.File[0].Name, "bundle/") {
		t.Fatalf("the bundle served back: %d %v", resp.StatusCode, err)
	}
	if r := internal.do("GET", "/v1/kubetorch/bundles/"+strings.Repeat("0", 64)+".zip", "", nil); r.status != 404 {
		t.Errorf("an unknown bundle: %d", r.status)
	}

	// A cluster with two 4-GPU workers on kwok GPU nodes.
	seq := realSeq.Add(1)
	for i := range 2 {
		if _, err := tc.AddNode(ctx, fmt.Sprintf("kt-%d-%d", seq, i), corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("4")}, nil, ""); err != nil {
			t.Fatal(err)
		}
	}
	pub.want(pub.do("POST", "/v1/kuberay/clusters", testAdminToken, map[string]any{"name": "train", "head": map[string]any{"cpu": "1", "memory": "2Gi"},
		"worker_groups": []any{map[string]any{"name": "gpu", "replicas": 2, "gpus": 4, "cpu": "1", "memory": "2Gi"}}}), 201, "create the cluster")
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		h := pub.do("GET", "/v1/kubetorch/health?cluster=train", testAdminToken, nil)
		if h.status == 200 && h.body["healthy"] == true {
			if g := h.body["gpu_groups"].([]any)[0].(map[string]any); g["ready"] != float64(2) || g["gpus_per_pod"] != float64(4) {
				t.Errorf("health: %s", h.raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the GPU workers never became healthy: %d %s", h.status, h.raw)
		}
	}

	train := pub.want(pub.do("POST", "/v1/kubetorch/train", testAdminToken, map[string]any{"cluster": "train", "bundle": id, "command": "python train.py --epochs 3", "owner": "alice"}), 201, "train")
	if train.body["nodes"] != float64(2) || train.body["gpus_per_node"] != float64(4) || train.body["owner"] != "alice" {
		t.Errorf("train: %s", train.raw)
	}
	jobID := train.body["id"].(string)
	var jobs []map[string]any
	listed, _ := http.Get(d.URL + "/api/jobs/")
	_ = json.NewDecoder(listed.Body).Decode(&jobs)
	listed.Body.Close()
	if len(jobs) != 1 || jobs[0]["submission_id"] != jobID {
		t.Fatalf("the dashboard's jobs: %v", jobs)
	}
	env, _ := jobs[0]["runtime_env"].(map[string]any)
	entry, _ := jobs[0]["entrypoint"].(string)
	if env["working_dir"] != kubetorch.PackageURI(id) || !strings.Contains(entry, "TorchTrainer") || !strings.Contains(entry, "' 2 4 'python train.py --epochs 3'") {
		t.Errorf("the submitted job: entrypoint %q, runtime_env %v", entry, env)
	}
	// The bundle went to the cluster as a package, its files at the top.
	held := d.Packages()[kubetorch.PackageURI(id)]
	pkg, err := zip.NewReader(bytes.NewReader(held), int64(len(held)))
	if err != nil {
		t.Fatalf("the package the dashboard holds: %v", err)
	}
	var names []string
	for _, f := range pkg.File {
		names = append(names, f.Name)
	}
	if slices.Sort(names); strings.Join(names, " ") != "lib/model.py train.py" {
		t.Errorf("the package holds %v", names)
	}
	gj, err := tc.Dynamic.Resource(v1alpha1.GroupVersion.WithResource(v1alpha1.JobResource)).Namespace(ns).Get(ctx, jobID, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the GridweaveJob: %v", err)
	}
	if spec := gj.Object["spec"].(map[string]any); spec["owner"] != "alice" || spec["submissionId"] != jobID {
		t.Errorf("the GridweaveJob's spec: %v", spec)
	}

	d.SetJobStatus(jobID, "RUNNING", "epoch 1/3 loss 0.42")
	mine := pub.want(pub.do("GET", "/v1/kubetorch/jobs/"+jobID, userJWT(t, "alice"), nil), 200, "alice's job")
	if mine.body["status"] != "RUNNING" || !strings.Contains(string(mine.raw), "epoch 1/3 loss 0.42") {
		t.Errorf("alice's job: %s", mine.raw)
	}
	gj, _ = tc.Dynamic.Resource(v1alpha1.GroupVersion.WithResource(v1alpha1.JobResource)).Namespace(ns).Get(ctx, jobID, metav1.GetOptions{})
	if phase, _ := gj.Object["status"].(map[string]any)["phase"].(string); phase != "Running" {
		t.Errorf("the GridweaveJob's phase %q, want Running", phase)
	}
	// Without anyone asking, the follower brings the status along.
	d.SetJobStatus(jobID, "SUCCEEDED", "done")
	if n, err := pub.server.FollowKubeTorchJobs(ctx); err != nil || n != 1 {
		t.Errorf("following: %d jobs, %v", n, err)
	}
	gj, _ = tc.Dynamic.Resource(v1alpha1.GroupVersion.WithResource(v1alpha1.JobResource)).Namespace(ns).Get(ctx, jobID, metav1.GetOptions{})
	if phase, _ := gj.Object["status"].(map[string]any)["phase"].(string); phase != "Succeeded" {
		t.Errorf("the GridweaveJob's phase after the follower %q, want Succeeded", phase)
	}
	if n, _ := pub.server.FollowKubeTorchJobs(ctx); n != 0 {
		t.Errorf("the follower read %d finished jobs again", n)
	}
	if r := pub.do("GET", "/v1/kubetorch/jobs/"+jobID, userJWT(t, "mallory"), nil); r.status != 404 {
		t.Errorf("another user's job: %d %s", r.status, r.raw)
	}
	if r := pub.do("GET", "/v1/kubetorch/jobs/"+jobID, testAdminToken, nil); r.status != 200 {
		t.Errorf("the admin reading a job: %d", r.status)
	}
	if r := pub.do("POST", "/v1/kubetorch/train", testAdminToken, map[string]any{"cluster": "train", "bundle": "abc", "command": "x"}); r.status != 400 || r.errorField("field") != "bundle" {
		t.Errorf("a bad bundle id: %d %s", r.status, r.raw)
	}
	if r := pub.do("POST", "/v1/kubetorch/train", userJWT(t, "alice"), map[string]any{"cluster": "train", "bundle": id, "command": "x"}); r.status != 403 {
		t.Errorf("a user launching training: %d", r.status)
	}
}
