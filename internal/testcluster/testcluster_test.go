package testcluster_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"gridweave.dev/internal/testcluster"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(testcluster.RunMain(m))
}

const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// TestGPURayClusterBecomesReadyAndIsCollected is the smoke test of the whole
// harness: a kwok GPU node, a RayCluster whose GPU worker group is pinned to
// it, the real operator bringing it to ready, and garbage collection of its
// pods and Services on delete.
func TestGPURayClusterBecomesReadyAndIsCollected(t *testing.T) {
	c := testcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	const ns = "smoke"
	if err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddNode(ctx, "smoke-cpu-0", nil, map[string]string{"gridweave.dev/role": "head"}, "198.18.10.0/24"); err != nil {
		t.Fatal(err)
	}
	gpuNode, err := c.AddNode(ctx, "smoke-gpu-0", corev1.ResourceList{gpuResource: resource.MustParse("8")}, nil, "198.18.11.0/24")
	if err != nil {
		t.Fatal(err)
	}
	if got := gpuNode.Status.Allocatable[gpuResource]; got.Value() != 8 {
		t.Fatalf("GPU node allocatable %s = %s, want 8", gpuResource, got.String())
	}

	rc := smokeRayCluster(ns, "smoke", "smoke-cpu-0", "smoke-gpu-0")
	if _, err := c.Ray.RayV1().RayClusters(ns).Create(ctx, rc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := c.Ray.RayV1().RayClusters(ns).Get(ctx, rc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		rc = got
		// status.state is deprecated in favour of conditions, but it is
		// still what users and kubectl read; require both.
		//lint:ignore SA1019 the smoke test's contract is status.state: ready
		ready := got.Status.State == rayv1.Ready
		return ready && meta.IsStatusConditionTrue(got.Status.Conditions, string(rayv1.RayClusterProvisioned)) &&
			meta.IsStatusConditionTrue(got.Status.Conditions, string(rayv1.HeadPodReady)), nil
	})
	if err != nil {
		//lint:ignore SA1019 reported for diagnosis
		state := rc.Status.State
		t.Fatalf("RayCluster never became ready (state %q, conditions %+v): %v", state, rc.Status.Conditions, err)
	}

	selector := metav1.ListOptions{LabelSelector: "ray.io/cluster=" + rc.Name}
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("got %d pods, want a head and one worker", len(pods.Items))
	}
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s is %s, want Running", pod.Name, pod.Status.Phase)
		}
		switch pod.Labels["ray.io/node-type"] {
		case "head":
			if pod.Spec.NodeName != "smoke-cpu-0" {
				t.Errorf("head pod on node %q, want smoke-cpu-0", pod.Spec.NodeName)
			}
		case "worker":
			if pod.Spec.NodeName != "smoke-gpu-0" {
				t.Errorf("GPU worker on node %q, want smoke-gpu-0", pod.Spec.NodeName)
			}
			if got := pod.Spec.Containers[0].Resources.Limits[gpuResource]; got.Value() != 1 {
				t.Errorf("GPU worker limit %s = %s, want 1", gpuResource, got.String())
			}
		default:
			t.Errorf("pod %s has node type %q", pod.Name, pod.Labels["ray.io/node-type"])
		}
	}
	services, err := c.Kube.CoreV1().Services(ns).List(ctx, selector)
	if err != nil {
		t.Fatal(err)
	}
	if len(services.Items) == 0 {
		t.Fatal("the operator made no Service for the cluster")
	}

	if err := c.Ray.RayV1().RayClusters(ns).Delete(ctx, rc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var left string
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, selector)
		if err != nil {
			return false, err
		}
		services, err := c.Kube.CoreV1().Services(ns).List(ctx, selector)
		if err != nil {
			return false, err
		}
		left = fmt.Sprintf("%d pods, %d services", len(pods.Items), len(services.Items))
		return len(pods.Items) == 0 && len(services.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("after deleting the RayCluster, %s remain: %v", left, err)
	}
}

func smokeRayCluster(namespace, name, headNode, gpuNode string) *rayv1.RayCluster {
	const image = "rayproject/ray:2.54.0-py312"
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	gpuLimits := small.DeepCopy()
	gpuLimits[gpuResource] = resource.MustParse("1")
	return &rayv1.RayCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: rayv1.RayClusterSpec{
			RayVersion: "2.54.0",
			HeadGroupSpec: rayv1.HeadGroupSpec{
				RayStartParams: map[string]string{},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelHostname: headNode},
					Containers: []corev1.Container{{
						Name: "ray-head", Image: image,
						Resources: corev1.ResourceRequirements{Requests: small, Limits: small},
					}},
				}},
			},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
				GroupName:      "gpu",
				Replicas:       ptr.To[int32](1),
				MinReplicas:    ptr.To[int32](1),
				MaxReplicas:    ptr.To[int32](1),
				RayStartParams: map[string]string{},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelHostname: gpuNode},
					Containers: []corev1.Container{{
						Name: "ray-worker", Image: image,
						Resources: corev1.ResourceRequirements{Requests: small, Limits: gpuLimits},
					}},
				}},
			}},
		},
	}
}

// TestKubeRayCRDApplyIsIdempotent applies the CRDs a second time (the first
// was at start) and expects the server to store nothing new.
func TestKubeRayCRDApplyIsIdempotent(t *testing.T) {
	c := testcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	first, err := c.ApplyKubeRayCRDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.ApplyKubeRayCRDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 4 || len(second) != 4 {
		t.Fatalf("applied %d then %d CRDs, want RayCluster, RayCronJob, RayJob, RayService", len(first), len(second))
	}
	for i := range first {
		a, b := first[i], second[i]
		if a.GetName() != b.GetName() {
			t.Fatalf("CRD order changed: %s vs %s", a.GetName(), b.GetName())
		}
		if a.GetResourceVersion() != b.GetResourceVersion() || a.GetGeneration() != b.GetGeneration() {
			t.Errorf("re-applying %s changed it: resourceVersion %s → %s, generation %d → %d",
				a.GetName(), a.GetResourceVersion(), b.GetResourceVersion(), a.GetGeneration(), b.GetGeneration())
		}
	}
}

// TestStopLeavesNoProcess starts a second, private cluster, stops it, and
// checks that every process it started is gone.
func TestStopLeavesNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane; run make test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	c, err := testcluster.New(ctx, &testcluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	pids := c.PIDs()
	if len(pids) != 6 {
		t.Errorf("started %d processes, want etcd, apiserver, controller-manager, scheduler, kwok, operator", len(pids))
	}
	if left, err := testcluster.Leftovers(c.ID); err != nil || len(left) != len(pids) {
		t.Errorf("Leftovers before Stop = %v, %v; want the %d running components", left, err, len(pids))
	}
	c.Stop()
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("pid %d still exists after Stop (kill -0: %v)", pid, err)
		}
	}
	assertNoLeftovers(t, c.ID)
}

// TestDyingTestBinaryLeavesNoProcess runs this test binary as a child that
// starts a cluster and then panics, or is killed with SIGKILL, and checks
// that none of the cluster's processes outlive it.
func TestDyingTestBinaryLeavesNoProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane; run make test")
	}
	for _, mode := range []string{"panic", "sigkill"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			// The helper's cluster lives in a directory of the test's:
			// the helper dies before it could remove it.
			cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperDirEnv+"="+t.TempDir())
			var stderr strings.Builder
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			id := ""
			scanner := bufio.NewScanner(stdout)
			for scanner.Scan() {
				if v, ok := strings.CutPrefix(scanner.Text(), "cluster-id="); ok {
					id = v
				}
			}
			err = cmd.Wait()
			if id == "" {
				t.Fatalf("helper never reported a running cluster (exit: %v):\n%s", err, stderr.String())
			}
			if err == nil {
				t.Fatalf("helper in %s mode exited cleanly; it should have died", mode)
			}
			assertNoLeftovers(t, id)
		})
	}
}

const (
	helperEnv    = "GRIDWEAVE_TESTCLUSTER_HELPER"
	helperDirEnv = "GRIDWEAVE_TESTCLUSTER_HELPER_DIR"
)

// runHelper is the child of TestDyingTestBinaryLeavesNoProcess; its
// cluster's files go in the directory helperDirEnv names.
func runHelper(mode string) int {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		fmt.Fprintln(os.Stderr, helperDirEnv+" is not set")
		return 2
	}
	c, err := testcluster.New(context.Background(), &testcluster.Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Printf("cluster-id=%s\n", c.ID)
	switch mode {
	case "sigkill":
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	default:
		panic("helper: dying with the cluster running")
	}
}

// assertNoLeftovers waits briefly (the kernel delivers the parent-death
// signal at once, but a killed process takes a moment to be gone) and then
// requires that no process of cluster id is alive.
func assertNoLeftovers(t *testing.T, id string) {
	t.Helper()
	var left []testcluster.Leftover
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		left, err = testcluster.Leftovers(id)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range left {
		t.Errorf("left running: pid %d: %s", p.PID, p.Cmdline)
	}
}

// TestPodLogsTravelThroughTheAPIServer reads a fake pod's log the way
// kubectl does: the API server proxies to the node's kubelet, which kwok
// plays on a loopback port.
func TestPodLogsTravelThroughTheAPIServer(t *testing.T) {
	c := testcluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.AddNode(ctx, "logs-node", nil, nil, "198.18.12.0/24"); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "talker", Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   "logs-node",
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
		},
	}
	if _, err := c.Kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.AppendPodLog("first line", "second line"); err != nil {
		t.Fatal(err)
	}
	var got []byte
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = c.Kube.CoreV1().Pods("default").GetLogs("talker", &corev1.PodLogOptions{}).DoRaw(ctx)
		return err == nil, nil
	})
	if err != nil || string(got) != "first line\nsecond line\n" {
		t.Fatalf("pod log = %q, %v", got, err)
	}
}

// TestAddNodeRefusesCIDRsKwokCannotRead: a pod CIDR the API server takes
// but kwok cannot parse is refused before any node is made.
func TestAddNodeRefusesCIDRsKwokCannotRead(t *testing.T) {
	for _, cidr := range []string{"198.18.00.0/24", "198.18.1.0", "nonsense"} {
		if _, err := (&testcluster.Cluster{}).AddNode(context.Background(), "n", nil, nil, cidr); err == nil || !strings.Contains(err.Error(), "pod CIDR") {
			t.Errorf("%q: %v", cidr, err)
		}
	}
}
