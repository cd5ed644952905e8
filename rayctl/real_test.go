package rayctl_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"gridweave.dev/internal/testcluster"
	"gridweave.dev/rayctl"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

// env gives a test its own namespace, a CPU node and a GPU node (8 GPUs)
// in the package's shared control plane, and a Client on that namespace.
type env struct {
	tc      *testcluster.Cluster
	c       *rayctl.Client
	ns      string
	cpuNode string
	gpuNode string
}

var nodeSeq struct {
	sync.Mutex
	n int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	tc := testcluster.Shared(t)
	ctx := context.Background()
	nodeSeq.Lock()
	nodeSeq.n++
	n := nodeSeq.n
	nodeSeq.Unlock()
	e := &env{tc: tc, ns: fmt.Sprintf("rayctl-%d", n), cpuNode: fmt.Sprintf("cpu-%d", n), gpuNode: fmt.Sprintf("gpu-%d", n)}
	if err := tc.CreateNamespace(ctx, e.ns); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.AddNode(ctx, e.cpuNode, nil, nil, fmt.Sprintf("198.18.%d.0/24", 2*n)); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.AddNode(ctx, e.gpuNode, corev1.ResourceList{gpu: resource.MustParse("8")}, map[string]string{"gridweave.dev/gpu": "true"}, fmt.Sprintf("198.18.%d.0/24", 2*n+1)); err != nil {
		t.Fatal(err)
	}
	var err error
	e.c, err = rayctl.New(tc.Kube, tc.Ray, &rayctl.Options{Namespace: e.ns, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) spec(name string) rayctl.ClusterSpec {
	return rayctl.ClusterSpec{Name: name, Head: rayctl.HeadSpec{NodeSelector: map[string]string{corev1.LabelHostname: e.cpuNode}}}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond (bounded by ctx) and fails the test with what it last saw.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		ok, state := cond()
		last = state
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: %v (last seen: %s)", what, err, last)
	}
}

func headUID(t *testing.T, e *env, cluster string) types.UID {
	t.Helper()
	pods, err := e.tc.Kube.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ray.io/cluster=" + cluster + ",ray.io/node-type=head"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("head pods: %d, %v", len(pods.Items), err)
	}
	return pods.Items[0].UID
}

func TestClusterLifecycleWithGPUGroups(t *testing.T) {
	e := newEnv(t)
	ctx := ctxFor(t, 4*time.Minute)

	var progress []string
	if _, err := e.c.CreateCluster(ctx, e.spec("life")); err != nil {
		t.Fatal(err)
	}
	if err := e.c.WaitClusterReady(ctx, "", "life", rayctl.WaitOptions{Progress: func(p rayctl.Progress) { progress = append(progress, p.State) }}); err != nil {
		t.Fatal(err)
	}
	if len(progress) == 0 || progress[len(progress)-1] != "ready" {
		t.Errorf("progress reports %v, want it to end with ready", progress)
	}
	head := headUID(t, e, "life")

	// A worker group pinned to the GPU node.
	if _, err := e.c.AddWorkerGroup(ctx, "", "life", rayctl.WorkerGroup{Name: "gpu-a", NodeHostname: e.gpuNode, GPUs: 2}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "GPU worker running", func() (bool, string) {
		ws, err := e.c.ListWorkers(ctx, "", "life", "gpu-a")
		if err != nil || len(ws) != 1 {
			return false, fmt.Sprintf("%v %v", ws, err)
		}
		w := ws[0]
		return w.Phase == "Running" && w.Ready && w.Node == e.gpuNode && w.GPUs == 2 && w.IP != "", fmt.Sprintf("%+v", w)
	})
	pods, _ := e.tc.Kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/group=gpu-a"})
	if lim := pods.Items[0].Spec.Containers[0].Resources.Limits[gpu]; lim.Value() != 2 {
		t.Fatalf("GPU limit %s, want 2", lim.String())
	}

	// Swap it for a one-GPU group: one update, the head untouched.
	next, err := rayctl.WorkerGroup{Name: "gpu-b", NodeHostname: e.gpuNode, GPUs: 1}.Build()
	if err != nil {
		t.Fatal(err)
	}
	before, _ := e.c.GetCluster(ctx, "", "life")
	after, err := e.c.SwapWorkerGroup(ctx, "", "life", "gpu-a", next)
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation+1 {
		t.Errorf("swap moved generation %d → %d, want exactly one update", before.Generation, after.Generation)
	}
	if len(after.Spec.WorkerGroupSpecs) != 1 || after.Spec.WorkerGroupSpecs[0].GroupName != "gpu-b" {
		t.Fatalf("groups after swap: %+v", after.Spec.WorkerGroupSpecs)
	}
	waitFor(t, ctx, "swap settles", func() (bool, string) {
		ws, err := e.c.ListWorkers(ctx, "", "life", "")
		if err != nil {
			return false, err.Error()
		}
		ok := len(ws) == 1 && ws[0].Group == "gpu-b" && ws[0].Phase == "Running" && ws[0].GPUs == 1
		return ok, fmt.Sprintf("%+v", ws)
	})
	if got := headUID(t, e, "life"); got != head {
		t.Fatalf("head pod replaced by the swap: %s → %s", head, got)
	}

	// Scale: two replicas.
	if _, err := e.c.ScaleGroup(ctx, "", "life", "gpu-b", rayctl.Scale{Replicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](3)}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "scale to 2", func() (bool, string) {
		gs, err := e.c.ListWorkerGroups(ctx, "", "life")
		if err != nil || len(gs) != 1 {
			return false, fmt.Sprintf("%v %v", gs, err)
		}
		g := gs[0]
		return g.Replicas == 2 && g.MaxReplicas == 3 && g.Running == 2 && g.Ready == 2 && g.GPUsPerPod == 1, fmt.Sprintf("%+v", g)
	})
	if _, err := e.c.ScaleGroup(ctx, "", "life", "gpu-b", rayctl.Scale{Replicas: ptr.To[int32](5)}); !errors.Is(err, rayctl.ErrInvalidSpec) {
		t.Errorf("scale above max = %v, want ErrInvalidSpec", err)
	}

	// Remove with a drain.
	out, err := e.c.RemoveWorkerGroup(ctx, "", "life", "gpu-b", rayctl.RemoveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Spec.WorkerGroupSpecs) != 0 {
		t.Fatalf("groups after remove: %+v", out.Spec.WorkerGroupSpecs)
	}
	if ws, _ := e.c.ListWorkers(ctx, "", "life", ""); len(ws) != 0 {
		t.Fatalf("workers left after drain: %+v", ws)
	}
	if got := headUID(t, e, "life"); got != head {
		t.Fatalf("head pod replaced by the removal")
	}

	if err := e.c.DeleteCluster(ctx, "", "life", rayctl.DeleteOptions{Wait: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.GetCluster(ctx, "", "life"); !errors.Is(err, rayctl.ErrClusterNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

func TestReplaceWorkerGroupsInOneUpdate(t *testing.T) {
	e := newEnv(t)
	ctx := ctxFor(t, 3*time.Minute)
	spec := e.spec("repl")
	spec.WorkerGroups = []rayctl.WorkerGroup{{Name: "a", NodeHostname: e.gpuNode, GPUs: 1}, {Name: "b", NodeHostname: e.cpuNode}}
	if _, err := e.c.CreateCluster(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := e.c.WaitClusterReady(ctx, "", "repl", rayctl.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	head := headUID(t, e, "repl")
	bPods, _ := e.tc.Kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/group=b"})
	b, _ := rayctl.WorkerGroup{Name: "b", NodeHostname: e.cpuNode, Image: rayctl.DefaultImage}.Build()
	c, _ := rayctl.WorkerGroup{Name: "c", NodeHostname: e.gpuNode, GPUs: 4}.Build()
	before, _ := e.c.GetCluster(ctx, "", "repl")
	after, err := e.c.ReplaceWorkerGroups(ctx, "", "repl", []rayv1.WorkerGroupSpec{b, c})
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation+1 {
		t.Errorf("replace moved generation %d → %d, want one update", before.Generation, after.Generation)
	}
	waitFor(t, ctx, "replacement settles", func() (bool, string) {
		ws, _ := e.c.ListWorkers(ctx, "", "repl", "")
		groups := []string{}
		for _, w := range ws {
			if w.Phase == "Running" {
				groups = append(groups, w.Group)
			}
		}
		s := strings.Join(groups, ",")
		return s == "b,c" && len(ws) == 2, s
	})
	// Group b was unchanged: its pod stayed.
	bAfter, _ := e.tc.Kube.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: "ray.io/group=b"})
	if len(bPods.Items) != 1 || len(bAfter.Items) != 1 || bPods.Items[0].UID != bAfter.Items[0].UID {
		t.Errorf("unchanged group b lost its pod")
	}
	if headUID(t, e, "repl") != head {
		t.Fatal("head replaced")
	}
}

// podUIDs returns the UIDs of the live (not terminating) pods of a group.
func podUIDs(t *testing.T, e *env, cluster, group string) []types.UID {
	t.Helper()
	pods, err := e.tc.Kube.CoreV1().Pods(e.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "ray.io/cluster=" + cluster + ",ray.io/group=" + group})
	if err != nil {
		t.Fatal(err)
	}
	var uids []types.UID
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			uids = append(uids, p.UID)
		}
	}
	return uids
}

// TestReplaceWorkerGroupsRestartsExactlyTheChangedGroups: groups with
// ports (to which the API server adds protocol TCP) sent again unchanged
// keep their pods; a change of rayStartParams alone restarts that group's
// pods and no other's.
func TestReplaceWorkerGroupsRestartsExactlyTheChangedGroups(t *testing.T) {
	e := newEnv(t)
	ctx := ctxFor(t, 3*time.Minute)
	group := func(name string, params map[string]string) rayv1.WorkerGroupSpec {
		g, err := rayctl.WorkerGroup{Name: name, NodeHostname: e.cpuNode, RayStartParams: params}.Build()
		if err != nil {
			t.Fatal(err)
		}
		g.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}}
		return g
	}
	rc, err := e.spec("like").Build()
	if err != nil {
		t.Fatal(err)
	}
	rc.Spec.WorkerGroupSpecs = []rayv1.WorkerGroupSpec{group("a", nil), group("b", nil)}
	if _, err := e.c.CreateRayCluster(ctx, rc); err != nil {
		t.Fatal(err)
	}
	if err := e.c.WaitClusterReady(ctx, "", "like", rayctl.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	stored, _ := e.c.GetCluster(ctx, "", "like")
	if p := stored.Spec.WorkerGroupSpecs[0].Template.Spec.Containers[0].Ports[0]; p.Protocol != corev1.ProtocolTCP {
		t.Fatalf("the server did not default the port's protocol (%q): this test would prove nothing", p.Protocol)
	}
	a, b := podUIDs(t, e, "like", "a"), podUIDs(t, e, "like", "b")
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("pods: a %v, b %v", a, b)
	}

	if _, err := e.c.ReplaceWorkerGroups(ctx, "", "like", []rayv1.WorkerGroupSpec{group("a", nil), group("b", nil)}); err != nil {
		t.Fatal(err)
	}
	if got := podUIDs(t, e, "like", "a"); !slices.Equal(got, a) {
		t.Errorf("group a, sent unchanged, lost its pod: %v → %v", a, got)
	}
	if got := podUIDs(t, e, "like", "b"); !slices.Equal(got, b) {
		t.Errorf("group b, sent unchanged, lost its pod: %v → %v", b, got)
	}

	if _, err := e.c.ReplaceWorkerGroups(ctx, "", "like", []rayv1.WorkerGroupSpec{group("a", nil), group("b", map[string]string{"num-cpus": "1"})}); err != nil {
		t.Fatal(err)
	}
	if got := podUIDs(t, e, "like", "a"); !slices.Equal(got, a) {
		t.Errorf("group a, unchanged, lost its pod when b's rayStartParams changed: %v → %v", a, got)
	}
	waitFor(t, ctx, "group b's pod replaced", func() (bool, string) {
		ws, err := e.c.ListWorkers(ctx, "", "like", "b")
		if err != nil {
			return false, err.Error()
		}
		got := podUIDs(t, e, "like", "b")
		return len(got) == 1 && got[0] != b[0] && len(ws) == 1 && ws[0].Phase == "Running", fmt.Sprintf("%v %+v", got, ws)
	})
}

// TestDrainWithTheAutoscaler: with the autoscaler on, KubeRay ignores a
// lower replica count and deletes only the pods named in workersToDelete;
// the drain names them and the group goes.
func TestDrainWithTheAutoscaler(t *testing.T) {
	e := newEnv(t)
	ctx := ctxFor(t, 3*time.Minute)
	spec := e.spec("auto")
	spec.WorkerGroups = []rayctl.WorkerGroup{{Name: "w", NodeHostname: e.cpuNode, Replicas: ptr.To[int32](2), MaxReplicas: ptr.To[int32](2)}}
	rc, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
	if _, err := e.c.CreateRayCluster(ctx, rc); err != nil {
		t.Fatal(err)
	}
	if err := e.c.WaitClusterReady(ctx, "", "auto", rayctl.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	if ws, _ := e.c.ListWorkers(ctx, "", "auto", "w"); len(ws) != 2 {
		t.Fatalf("workers before the drain: %+v", ws)
	}
	out, err := e.c.RemoveWorkerGroup(ctx, "", "auto", "w", rayctl.RemoveOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Spec.WorkerGroupSpecs) != 0 {
		t.Fatalf("groups after the drain: %+v", out.Spec.WorkerGroupSpecs)
	}
	if ws, _ := e.c.ListWorkers(ctx, "", "auto", ""); len(ws) != 0 {
		t.Fatalf("workers left after the drain: %+v", ws)
	}
}

// TestConcurrentAddWorkerGroupsLoseNothing runs 50 add calls at once on one
// cluster, through two Clients (so that they really conflict at the API
// server, not only inside one process), and expects all 50 groups.
func TestConcurrentAddWorkerGroupsLoseNothing(t *testing.T) {
	e := newEnv(t)
	ctx := ctxFor(t, 3*time.Minute)
	if _, err := e.c.CreateCluster(ctx, e.spec("busy")); err != nil {
		t.Fatal(err)
	}
	// The second Client is a separate writer (as a second server replica
	// would be) whose requests are counted, to see the conflicts happen.
	counter := &countingTransport{}
	cfg := rest.CopyConfig(e.tc.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	kube, _ := kubernetes.NewForConfig(cfg)
	ray, _ := rayclient.NewForConfig(cfg)
	other, err := rayctl.New(kube, ray, &rayctl.Options{Namespace: e.ns, Backoff: &wait.Backoff{Steps: 60, Duration: 5 * time.Millisecond, Factor: 1.5, Jitter: 1, Cap: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	clients := []*rayctl.Client{e.c, other}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Go(func() {
			g := rayctl.WorkerGroup{Name: fmt.Sprintf("g%02d", i), Replicas: ptr.To[int32](0), MaxReplicas: ptr.To[int32](1)}
			_, err := clients[i%2].AddWorkerGroup(ctx, "", "busy", g)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("add: %v", err)
		}
	}
	rc, err := e.c.GetCluster(ctx, "", "busy")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, g := range rc.Spec.WorkerGroupSpecs {
		names[g.GroupName] = true
	}
	if len(names) != 50 || len(rc.Spec.WorkerGroupSpecs) != 50 {
		t.Fatalf("%d groups (%d distinct) after 50 concurrent adds", len(rc.Spec.WorkerGroupSpecs), len(names))
	}
	_, conflicts, _ := counter.take()
	t.Logf("the second client retried %d conflicts", conflicts)
	if conflicts == 0 {
		t.Error("the two clients never conflicted: the retry path was not exercised")
	}
}

func TestErrorsNameTheProblemAndChangeNothing(t *testing.T) {
	e := newEnv(t)
	ctx := ctxFor(t, time.Minute)
	spec := e.spec("errs")
	spec.WorkerGroups = []rayctl.WorkerGroup{{Name: "w", Replicas: ptr.To[int32](0)}}
	if _, err := e.c.CreateCluster(ctx, spec); err != nil {
		t.Fatal(err)
	}
	before, _ := e.c.GetCluster(ctx, "", "errs")

	if _, err := e.c.AddWorkerGroup(ctx, "", "nope", rayctl.WorkerGroup{Name: "x"}); !errors.Is(err, rayctl.ErrClusterNotFound) {
		t.Errorf("add to a missing cluster: %v", err)
	}
	if _, err := e.c.AddWorkerGroup(ctx, "", "errs", rayctl.WorkerGroup{Name: "w"}); !errors.Is(err, rayctl.ErrGroupExists) {
		t.Errorf("add an existing group: %v", err)
	}
	if _, err := e.c.RemoveWorkerGroup(ctx, "", "errs", "ghost", rayctl.RemoveOptions{}); !errors.Is(err, rayctl.ErrGroupNotFound) {
		t.Errorf("remove a missing group: %v", err)
	}
	if _, err := e.c.ScaleGroup(ctx, "", "errs", "ghost", rayctl.Scale{Replicas: ptr.To[int32](1)}); !errors.Is(err, rayctl.ErrGroupNotFound) {
		t.Errorf("scale a missing group: %v", err)
	}
	raw := []string{
		`{"groupName":"r1","replicas":1,"minReplicas":0,"maxReplicas":1,"rayStartParams":{},"template":{"spec":{"containers":[{"name":"w","image":"rayproject/ray:2.54.0"}]}},"replcas":3}`,
		`{"groupName":"r2","replicas":1,"minReplicas":2,"maxReplicas":1,"rayStartParams":{},"template":{"spec":{"containers":[{"name":"w","image":"rayproject/ray:2.54.0"}]}}}`,
		`{"groupName":"r3","replicas":1,"minReplicas":0,"maxReplicas":1,"rayStartParams":{"num-gpus":"1"},"resources":{"GPU":"1"},"template":{"spec":{"containers":[{"name":"w","image":"rayproject/ray:2.54.0"}]}}}`,
		`{"groupName":"r4","rayStartParams":{},"template":{"spec":{"containers":[]}}}`,
		`{"groupName":"Bad Name!","replicas":0,"minReplicas":0,"maxReplicas":1,"rayStartParams":{},"template":{"spec":{"containers":[{"name":"w","image":"x"}]}}}`,
	}
	for _, r := range raw {
		_, err := e.c.AddWorkerGroupRaw(ctx, "", "errs", []byte(r))
		var ise *rayctl.InvalidSpecError
		if !errors.As(err, &ise) || ise.Field == "" {
			t.Errorf("raw %s: %v, want an InvalidSpecError naming a field", r, err)
		}
	}
	if _, err := e.c.CreateCluster(ctx, rayctl.ClusterSpec{Name: strings.Repeat("x", 54)}); !errors.Is(err, rayctl.ErrInvalidSpec) {
		t.Errorf("a 54-character name: %v", err)
	}
	after, _ := e.c.GetCluster(ctx, "", "errs")
	if after.Generation != before.Generation {
		t.Fatalf("a failed call changed the cluster: generation %d → %d", before.Generation, after.Generation)
	}
	if _, err := e.c.CreateCluster(ctx, e.spec("errs")); !apierrors.IsAlreadyExists(err) {
		t.Errorf("create twice: %v, want AlreadyExists recognisable by apierrors", err)
	}
}

// TestLogsOfAPodAndOfAGroup reads worker logs end to end: rayctl → the API
// server → the node's kubelet (kwok) → the pod's log.
func TestLogsOfAPodAndOfAGroup(t *testing.T) {
	e := newEnv(t)
	ctx := ctxFor(t, 2*time.Minute)
	spec := e.spec("logs")
	spec.WorkerGroups = []rayctl.WorkerGroup{{Name: "w", Replicas: ptr.To[int32](2), NodeHostname: e.gpuNode, GPUs: 1}}
	if _, err := e.c.CreateCluster(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := e.c.WaitClusterReady(ctx, "", "logs", rayctl.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("worker says hello %d", time.Now().UnixNano())
	if err := e.tc.AppendPodLog(marker); err != nil {
		t.Fatal(err)
	}
	ws, err := e.c.ListWorkers(ctx, "", "logs", "w")
	if err != nil || len(ws) != 2 {
		t.Fatalf("workers %v, %v", ws, err)
	}
	s, err := e.c.PodLogs(ctx, "", ws[0].Name, rayctl.LogOptions{TailLines: ptr.To[int64](1)})
	if err != nil {
		t.Fatal(err)
	}
	one, _ := io.ReadAll(s)
	s.Close()
	if strings.TrimSpace(string(one)) != marker {
		t.Fatalf("tail of pod log = %q, want %q", one, marker)
	}

	s, err = e.c.GroupLogs(ctx, "", "logs", "w", rayctl.LogOptions{TailLines: ptr.To[int64](1)})
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(s)
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if !strings.Contains(string(all), "["+w.Name+"] "+marker) {
			t.Errorf("group log lacks %s's line:\n%s", w.Name, all)
		}
	}

	// Follow: a line written after the stream opened arrives, then Close ends it.
	s, err = e.c.GroupLogs(ctx, "", "logs", "w", rayctl.LogOptions{Follow: true, TailLines: ptr.To[int64](0)})
	if err != nil {
		t.Fatal(err)
	}
	later := marker + " again"
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(s)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	// The follow may start after a first append; keep appending (bounded)
	// until a line arrives.
	received := false
	for attempt := 0; attempt < 30 && !received; attempt++ {
		if err := e.tc.AppendPodLog(later); err != nil {
			t.Fatal(err)
		}
		select {
		case line := <-lines:
			if !strings.HasSuffix(line, later) {
				t.Fatalf("followed line %q", line)
			}
			received = true
		case <-time.After(time.Second):
		}
	}
	if !received {
		t.Fatal("a followed log line never arrived")
	}
	s.Close()

	if _, err := e.c.GroupLogs(ctx, "", "logs", "ghost", rayctl.LogOptions{}); !errors.Is(err, rayctl.ErrNotFound) {
		t.Errorf("logs of a group without pods: %v", err)
	}
}
