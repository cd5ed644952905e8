package rayctl_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/rayctltest"
)

func groupPod(cluster, group, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{
		"ray.io/cluster": cluster, "ray.io/group": group, "ray.io/node-type": "worker",
	}}}
}

func podNames(t *testing.T, f *rayctltest.Fakes, selector string) []string {
	t.Helper()
	pods, err := f.Kube.CoreV1().Pods("ns").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// afterWrites runs react on every RayCluster the fake stores after a write
// (update or patch), inside the write, as a controller reacting at once
// would; what react returns is stored instead.
func afterWrites(f *rayctltest.Fakes, react func(rc *rayv1.RayCluster) *rayv1.RayCluster) {
	store := k8stesting.ObjectReaction(f.Ray.Tracker())
	f.Ray.PrependReactor("*", "rayclusters", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if (a.GetVerb() != "patch" && a.GetVerb() != "update") || a.GetSubresource() != "" {
			return false, nil, nil
		}
		_, obj, err := store(a)
		if err != nil {
			return true, nil, err
		}
		rc := react(obj.(*rayv1.RayCluster))
		if err := f.Ray.Tracker().Update(a.GetResource(), rc, rc.Namespace); err != nil {
			return true, nil, err
		}
		return true, rc, nil
	})
}

// TestDrainNamesPodsCreatedAfterTheScaleDown: with the autoscaler on,
// KubeRay deletes only the pods named in workersToDelete. A pod the
// operator creates while the scale-down is being written must be named
// too, or the drain never ends.
func TestDrainNamesPodsCreatedAfterTheScaleDown(t *testing.T) {
	rc, err := rayctl.ClusterSpec{Name: "c", Namespace: "ns", WorkerGroups: []rayctl.WorkerGroup{{Name: "w", Replicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](2)}}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
	f := rayctltest.New(t, "ns", rc, groupPod("c", "w", "w-1"))
	var (
		mu      sync.Mutex
		named   []string
		created bool
	)
	// The operator, as KubeRay runs it with the autoscaler: it deletes the
	// pods named in workersToDelete and ignores a lower replica count. It
	// happens to create a pod just as the scale-down arrives.
	afterWrites(f, func(rc *rayv1.RayCluster) *rayv1.RayCluster {
		mu.Lock()
		defer mu.Unlock()
		for _, g := range rc.Spec.WorkerGroupSpecs {
			if g.GroupName != "w" {
				continue
			}
			if ptr.Deref(g.Replicas, 1) == 0 && !created {
				created = true
				if _, err := f.Kube.CoreV1().Pods("ns").Create(context.Background(), groupPod("c", "w", "w-2"), metav1.CreateOptions{}); err != nil {
					t.Error(err)
				}
			}
			for _, p := range g.ScaleStrategy.WorkersToDelete {
				named = append(named, p)
				_ = f.Kube.CoreV1().Pods("ns").Delete(context.Background(), p, metav1.DeleteOptions{})
			}
		}
		return rc
	})
	out, err := f.Client.RemoveWorkerGroup(context.Background(), "", "c", "w", rayctl.RemoveOptions{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if len(out.Spec.WorkerGroupSpecs) != 0 {
		t.Errorf("groups after the drain: %v", out.Spec.WorkerGroupSpecs)
	}
	if left := podNames(t, f, "ray.io/group=w"); len(left) != 0 {
		t.Errorf("pods left: %v", left)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(named, "w-2") {
		t.Errorf("workersToDelete named %v, never the pod created during the scale-down", named)
	}
}

// TestDrainTimeoutPutsTheGroupBack: a drain whose pods do not go within the
// timeout leaves the group as it was (counts and workersToDelete) and says
// so in its error.
func TestDrainTimeoutPutsTheGroupBack(t *testing.T) {
	rc, err := rayctl.ClusterSpec{Name: "c", Namespace: "ns", WorkerGroups: []rayctl.WorkerGroup{{Name: "w", Replicas: ptr.To[int32](2), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](3)}}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	rc.Spec.EnableInTreeAutoscaling = ptr.To(true)
	rc.Spec.WorkerGroupSpecs[0].ScaleStrategy.WorkersToDelete = []string{"named-earlier"}
	// Nothing deletes the pod: the drain cannot finish.
	f := rayctltest.New(t, "ns", rc, groupPod("c", "w", "w-1"))
	_, err = f.Client.RemoveWorkerGroup(context.Background(), "", "c", "w", rayctl.RemoveOptions{Timeout: time.Second})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain error %v, want it to wrap context.DeadlineExceeded", err)
	}
	for _, want := range []string{`"w"`, "w-1", "not removed", "replicas 2 (min 1, max 3)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("drain error %q does not say %q", err, want)
		}
	}
	got, err := f.Client.GetCluster(context.Background(), "", "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Spec.WorkerGroupSpecs) != 1 {
		t.Fatalf("groups %v", got.Spec.WorkerGroupSpecs)
	}
	g := got.Spec.WorkerGroupSpecs[0]
	if ptr.Deref(g.Replicas, -1) != 2 || ptr.Deref(g.MinReplicas, -1) != 1 || ptr.Deref(g.MaxReplicas, -1) != 3 {
		t.Errorf("group left at replicas %d (min %d, max %d), want 2 (1, 3)", ptr.Deref(g.Replicas, -1), ptr.Deref(g.MinReplicas, -1), ptr.Deref(g.MaxReplicas, -1))
	}
	if !slices.Equal(g.ScaleStrategy.WorkersToDelete, []string{"named-earlier"}) {
		t.Errorf("workersToDelete %v, want it as before the drain", g.ScaleStrategy.WorkersToDelete)
	}
}

// TestReplaceRestartsGroupsWhoseRayStartParamsChanged: KubeRay does not
// roll pods, so a group whose rayStartParams changed gets its pods
// deleted; an unchanged group keeps them.
func TestReplaceRestartsGroupsWhoseRayStartParamsChanged(t *testing.T) {
	rc, err := rayctl.ClusterSpec{Name: "c", Namespace: "ns", WorkerGroups: []rayctl.WorkerGroup{
		{Name: "a", RayStartParams: map[string]string{"num-cpus": "1"}},
		{Name: "b", RayStartParams: map[string]string{"num-cpus": "1"}},
	}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	f := rayctltest.New(t, "ns", rc, groupPod("c", "a", "a-1"), groupPod("c", "b", "b-1"))
	a, _ := rayctl.WorkerGroup{Name: "a", RayStartParams: map[string]string{"num-cpus": "1"}}.Build()
	b, _ := rayctl.WorkerGroup{Name: "b", RayStartParams: map[string]string{"num-cpus": "2"}}.Build()
	if _, err := f.Client.ReplaceWorkerGroups(context.Background(), "", "c", []rayv1.WorkerGroupSpec{a, b}); err != nil {
		t.Fatal(err)
	}
	if got := podNames(t, f, "ray.io/cluster=c"); !slices.Equal(got, []string{"a-1"}) {
		t.Fatalf("pods after the replace: %v, want [a-1] (b's rayStartParams changed, a is unchanged)", got)
	}
}

// TestReplaceComparesGroupsAsTheServerStoresThem: the server fills in
// defaults (protocol TCP on a port); a group sent again without them is
// unchanged and keeps its pods.
func TestReplaceComparesGroupsAsTheServerStoresThem(t *testing.T) {
	withPort := func(name string) rayv1.WorkerGroupSpec {
		g, _ := rayctl.WorkerGroup{Name: name}.Build()
		g.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}}
		return g
	}
	defaultPorts := func(rc *rayv1.RayCluster) *rayv1.RayCluster {
		for i := range rc.Spec.WorkerGroupSpecs {
			for j := range rc.Spec.WorkerGroupSpecs[i].Template.Spec.Containers {
				ports := rc.Spec.WorkerGroupSpecs[i].Template.Spec.Containers[j].Ports
				for k := range ports {
					if ports[k].Protocol == "" {
						ports[k].Protocol = corev1.ProtocolTCP
					}
				}
			}
		}
		return rc
	}
	rc, _ := rayctl.ClusterSpec{Name: "c", Namespace: "ns"}.Build()
	rc.Spec.WorkerGroupSpecs = []rayv1.WorkerGroupSpec{withPort("a")}
	f := rayctltest.New(t, "ns", defaultPorts(rc), groupPod("c", "a", "a-1"))
	afterWrites(f, defaultPorts) // as the API server applies the CRD's defaults
	out, err := f.Client.ReplaceWorkerGroups(context.Background(), "", "c", []rayv1.WorkerGroupSpec{withPort("a"), withPort("b")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Spec.WorkerGroupSpecs) != 2 {
		t.Fatalf("groups %v", out.Spec.WorkerGroupSpecs)
	}
	if got := podNames(t, f, "ray.io/cluster=c"); !slices.Equal(got, []string{"a-1"}) {
		t.Fatalf("pods after the replace: %v, want [a-1]: group a did not change", got)
	}
}
