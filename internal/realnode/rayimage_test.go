package realnode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"gridweave.dev/deploy/rayimage"
	"gridweave.dev/internal/raytest"
	"gridweave.dev/internal/testcluster"
)

// TestKubeRayRunsTheRayImagesOnARealNode: the images deploy/rayimage
// builds, imported into a real node's containerd, run the pods the KubeRay
// operator makes for a RayCluster with a GPU worker group: KubeRay's own
// commands (bash -lc, ulimit, ray start), user, probes and the workers'
// wait-gcs-ready init container, which finds the head by its headless
// Service's DNS name through CoreDNS serving the cluster. The head is
// Ready by Ray's health probe at an address of the node's pod CIDR, the
// worker (a GPU from the node's device plugin, no CUDA) joins it, Ray's
// dashboard in the head pod lists both alive at their pod addresses, and
// a job submitted there runs a task pinned to each node that returns its
// pod's name.
func TestKubeRayRunsTheRayImagesOnARealNode(t *testing.T) {
	if testing.Short() {
		t.Skip("a real kubelet and containerd, CoreDNS and the Ray images; run make test")
	}
	tc := testcluster.Shared(t)
	ctx := context.Background()
	dir := t.TempDir()
	headTar, workerTar := filepath.Join(dir, "head.tar"), filepath.Join(dir, "worker.tar")
	if _, err := rayimage.Build(ctx, rayimage.Options{Kind: rayimage.Head}, headTar, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := rayimage.Build(ctx, rayimage.Options{Kind: rayimage.Worker}, workerTar, ""); err != nil {
		t.Fatal(err)
	}
	const name = "realnode-ray"
	n := startNode(t, tc, name, "198.18.231.9", "198.18.231.10", true)
	n.m.FakeGPUs(t, 1)
	began := time.Now()
	n.importImages(t, headTar)
	n.importImages(t, workerTar)
	t.Logf("the Ray images imported in %.1fs", time.Since(began).Seconds())

	resources := func(cpu, memory string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		}
	}
	workerResources := resources("1", "2Gi")
	workerResources.Limits["nvidia.com/gpu"] = resource.MustParse("1")
	rc := &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "image-check", Namespace: "default"},
		Spec: rayv1.RayClusterSpec{
			RayVersion: rayimage.RayVersion,
			HeadGroupSpec: rayv1.HeadGroupSpec{
				RayStartParams: map[string]string{"num-cpus": "1", "dashboard-host": "0.0.0.0"},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					NodeName: name,
					Containers: []corev1.Container{{
						Name: "ray-head", Image: rayimage.HeadTag, ImagePullPolicy: corev1.PullNever, Resources: resources("1", "2Gi"),
					}},
				}},
			},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
				GroupName: "gpu", Replicas: ptr.To[int32](1), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](1),
				RayStartParams: map[string]string{"num-cpus": "1"},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					NodeName: name,
					Containers: []corev1.Container{{
						Name: "ray-worker", Image: rayimage.WorkerTag, ImagePullPolicy: corev1.PullNever, Resources: workerResources,
					}},
				}},
			}},
		},
	}
	if _, err := tc.Ray.RayV1().RayClusters("default").Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tc.Ray.RayV1().RayClusters("default").Delete(context.Background(), rc.Name, metav1.DeleteOptions{})
	})
	created := time.Now()
	t.Cleanup(func() {
		if t.Failed() {
			logRestarts(t, tc, rc.Namespace, "ray.io/cluster="+rc.Name)
		}
	})
	ready := map[string]corev1.Pod{}
	if err := waitFor(4*time.Minute, func() error {
		pods, err := tc.Kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "ray.io/cluster=" + rc.Name})
		if err != nil {
			return err
		}
		var waiting []string
		for _, p := range pods.Items {
			isReady := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			})
			if !isReady {
				waiting = append(waiting, fmt.Sprintf("%s %s %v %v", p.Name, p.Status.Phase, p.Status.InitContainerStatuses, p.Status.ContainerStatuses))
				continue
			}
			if _, seen := ready[p.Name]; !seen {
				t.Logf("%s pod %s Ready at %s, %.1fs after the RayCluster", p.Labels["ray.io/node-type"], p.Name, p.Status.PodIP, time.Since(created).Seconds())
			}
			ready[p.Name] = p
		}
		if len(pods.Items) != 2 || len(waiting) > 0 {
			return fmt.Errorf("%d pods, not Ready: %v", len(pods.Items), waiting)
		}
		return nil
	}); err != nil {
		t.Fatalf("KubeRay's pods: %v", err)
	}
	var head, worker corev1.Pod
	for _, p := range ready {
		if p.Labels["ray.io/node-type"] == "head" {
			head = p
		} else {
			worker = p
		}
		if ip, err := netip.ParseAddr(p.Status.PodIP); err != nil || !n.podCIDR.Contains(ip) {
			t.Errorf("pod %s's address %q is not in the node's pod CIDR %s", p.Name, p.Status.PodIP, n.podCIDR)
		}
	}
	if c := head.Spec.Containers[0]; len(c.Command) == 0 || c.Command[0] != "/bin/bash" || c.ReadinessProbe == nil {
		t.Errorf("not the container KubeRay makes: command %q, readiness probe %v", c.Command, c.ReadinessProbe)
	}
	if len(worker.Spec.InitContainers) == 0 || !strings.Contains(strings.Join(worker.Spec.InitContainers[0].Args, " "), rc.Name+"-head-svc.default.svc.cluster.local") {
		t.Errorf("the worker does not wait for the head by its DNS name: %+v", worker.Spec.InitContainers)
	}

	// Ray's own view, from the dashboard in the head pod (asked from the
	// machine, which reaches its pods). On a busy machine Ray's processes
	// can miss their own deadlines as they start, and a pod's container
	// then exits and starts again (its restarts are logged); a worker that
	// lost its head's first run joins the next once its own container
	// starts again, so this waits for that too. Ray keeps a node that
	// left as DEAD, also at an address a later run of the same pod has:
	// the two pods' addresses must be ALIVE, and no other node.
	dashboard := "http://" + net.JoinHostPort(head.Status.PodIP, "8265")
	var nodes []raytest.NodeState
	if err := waitFor(3*time.Minute, func() error {
		var listed struct {
			Data struct {
				Result struct {
					Result []raytest.NodeState `json:"result"`
				} `json:"result"`
			} `json:"data"`
		}
		if err := n.curlJSON(dashboard+"/api/v0/nodes?limit=10&detail=1", nil, &listed); err != nil {
			return err
		}
		nodes = listed.Data.Result.Result
		alive := map[string]bool{}
		for _, node := range nodes {
			if node.State == "ALIVE" {
				alive[node.IP] = true
			}
		}
		if len(alive) != 2 || !alive[head.Status.PodIP] || !alive[worker.Status.PodIP] {
			return fmt.Errorf("Ray's nodes: %+v, want the head (%s) and the worker (%s) alive, and no other", nodes, head.Status.PodIP, worker.Status.PodIP)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	logRestarts(t, tc, rc.Namespace, "ray.io/cluster="+rc.Name)
	for _, node := range nodes {
		t.Logf("Ray node %s at %s %s (head %v), resources %v", node.NodeID[:12], node.IP, node.State, node.IsHead, node.ResourcesTotal)
		if node.State == "ALIVE" && node.IP == worker.Status.PodIP && node.ResourcesTotal["GPU"] != 1 {
			t.Errorf("the worker's Ray resources %v: want GPU 1 (its pod's nvidia.com/gpu limit)", node.ResourcesTotal)
		}
	}

	want := "RAN ON " + strings.Join(slices.Sorted(slices.Values([]string{head.Name, worker.Name})), ",")
	logs, err := raytest.RunJob(n.curlJSON, dashboard, raytest.HostsScript, 2*time.Minute)
	if err != nil || !strings.Contains(logs, want) {
		t.Fatalf("a job: %v; want %q in its log:\n%s", err, want, tail(logs, 3000))
	}
	t.Logf("the job SUCCEEDED: %s", want)
}

// logRestarts logs, for every container (init containers too) of the
// pods selector picks that has restarted, why its last run ended and that
// run's last lines.
func logRestarts(t *testing.T, tc *testcluster.Cluster, namespace, selector string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := tc.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Logf("the pods of %s: %v", selector, err)
		return
	}
	for _, p := range pods.Items {
		for _, c := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			last := c.LastTerminationState.Terminated
			if c.RestartCount == 0 || last == nil {
				continue
			}
			lines := int64(40)
			raw, err := tc.Kube.CoreV1().Pods(namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, Previous: true, TailLines: &lines}).DoRaw(ctx)
			t.Logf("pod %s, container %s: %d restarts, the last run ended at %s (%s, exit code %d); its last lines (%v):\n%s",
				p.Name, c.Name, c.RestartCount, last.FinishedAt.Format(time.RFC3339), last.Reason, last.ExitCode, err, raw)
		}
	}
}

// curlJSON asks url from the machine (which reaches its pods' addresses)
// with curl, POSTing body as JSON when not nil, and decodes the answer.
func (n *testNode) curlJSON(url string, body, out any) error {
	args := []string{"curl", "-sS", "--fail-with-body", "--max-time", "20"}
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		args = append(args, "-H", "Content-Type: application/json", "--data-binary", string(data))
	}
	var stderr bytes.Buffer
	cmd := n.m.NS.Command(args[0], append(args[1:], url)...)
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("%s: %v: %s %s", url, err, raw, stderr.Bytes())
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: %v: %s", url, err, raw)
	}
	return nil
}
