package rayctl_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	rayv1client "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned/typed/ray/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/rayctltest"
)

// within waits for done, failing the test if it takes longer than a bound
// far above anything the awaited call should need (a hang, not a speed
// check).
func within(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: still blocked", what)
		return nil
	}
}

// TestWritesArePatchesOnFakes holds the write path to both kinds of fake
// object: without a resourceVersion (what the fake clientsets keep) and
// with one (seeded objects may carry one). Every group operation goes
// through, each as a JSON patch, never an update; with Options.Replace,
// each as an update, never a patch, and a change that changes nothing
// writes nothing.
func TestWritesArePatchesOnFakes(t *testing.T) {
	for _, replace := range []bool{false, true} {
		for _, rv := range []string{"", "42"} {
			t.Run(fmt.Sprintf("replace=%t/resourceVersion=%s", replace, rv), func(t *testing.T) {
				rc, err := rayctl.ClusterSpec{Name: "c", Namespace: "ns", WorkerGroups: []rayctl.WorkerGroup{{Name: "a"}, {Name: "b"}}}.Build()
				if err != nil {
					t.Fatal(err)
				}
				rc.ResourceVersion = rv
				f := rayctltest.New(t, "ns", rc)
				client, err := rayctl.New(f.Kube, f.Ray, &rayctl.Options{Namespace: "ns", Replace: replace})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				if _, err := client.AddWorkerGroup(ctx, "", "c", rayctl.WorkerGroup{Name: "gpu", GPUs: 2, NodeHostname: "box"}); err != nil {
					t.Fatalf("add: %v", err)
				}
				if _, err := client.ScaleGroup(ctx, "", "c", "gpu", rayctl.Scale{Replicas: ptr.To[int32](0)}); err != nil {
					t.Fatalf("scale: %v", err)
				}
				writes := len(f.Ray.Actions())
				if _, err := client.ScaleGroup(ctx, "", "c", "gpu", rayctl.Scale{Replicas: ptr.To[int32](0)}); err != nil {
					t.Fatalf("scale again: %v", err)
				}
				for _, a := range f.Ray.Actions()[writes:] {
					if a.GetVerb() != "get" {
						t.Errorf("a scale to the replicas the group has wrote: %s", a.GetVerb())
					}
				}
				next, _ := rayctl.WorkerGroup{Name: "b2", CPU: "2"}.Build()
				if _, err := client.SwapWorkerGroup(ctx, "", "c", "b", next); err != nil {
					t.Fatalf("swap: %v", err)
				}
				if _, err := client.RemoveWorkerGroup(ctx, "", "c", "a", rayctl.RemoveOptions{Immediate: true}); err != nil {
					t.Fatalf("remove: %v", err)
				}
				c2, _ := rayctl.WorkerGroup{Name: "c2"}.Build()
				gpu, _ := rayctl.WorkerGroup{Name: "gpu", GPUs: 2, NodeHostname: "box", Replicas: ptr.To[int32](0)}.Build()
				out, err := client.ReplaceWorkerGroups(ctx, "", "c", []rayv1.WorkerGroupSpec{c2, gpu, next})
				if err != nil {
					t.Fatalf("replace: %v", err)
				}
				var names []string
				for _, g := range out.Spec.WorkerGroupSpecs {
					names = append(names, g.GroupName)
				}
				if fmt.Sprint(names) != "[c2 gpu b2]" {
					t.Fatalf("groups %v, want [c2 gpu b2]", names)
				}
				stored, _ := f.Ray.RayV1().RayClusters("ns").Get(ctx, "c", metav1.GetOptions{})
				if g := stored.Spec.WorkerGroupSpecs[1]; ptr.Deref(g.Replicas, -1) != 0 || g.Template.Spec.NodeSelector["kubernetes.io/hostname"] != "box" {
					t.Errorf("stored group gpu: replicas %v, node selector %v", ptr.Deref(g.Replicas, -1), g.Template.Spec.NodeSelector)
				}
				for _, a := range f.Ray.Actions() {
					if a.GetResource().Resource != "rayclusters" {
						continue
					}
					switch a := a.(type) {
					case k8stesting.UpdateAction:
						if !replace {
							t.Errorf("a full update of the RayCluster was sent: %v", a)
						}
					case k8stesting.PatchAction:
						if replace {
							t.Errorf("a patch was sent with Replace: %s", a.GetPatch())
						} else if a.GetPatchType() != types.JSONPatchType {
							t.Errorf("patch of type %s, want a JSON patch", a.GetPatchType())
						}
					}
				}
			})
		}
	}
}

// TestReplaceCarriesTheVersionItRead: a replace is preconditioned on the
// resourceVersion read (an API server answers 409 when another writer got
// there first), and a conflict makes the client start over from a fresh
// read.
func TestReplaceCarriesTheVersionItRead(t *testing.T) {
	rc, _ := rayctl.ClusterSpec{Name: "c", Namespace: "ns", WorkerGroups: []rayctl.WorkerGroup{{Name: "a"}}}.Build()
	rc.ResourceVersion = "42"
	f := rayctltest.New(t, "ns", rc)
	client, _ := rayctl.New(f.Kube, f.Ray, &rayctl.Options{Namespace: "ns", Replace: true})
	conflicts := rayctltest.InjectConflicts(&f.Ray.Fake, "rayclusters", 2)
	if _, err := client.AddWorkerGroup(context.Background(), "", "c", rayctl.WorkerGroup{Name: "gpu", GPUs: 1}); err != nil {
		t.Fatal(err)
	}
	if conflicts.Injected.Load() != 2 || conflicts.Passed.Load() != 1 {
		t.Fatalf("writes: %d conflicts, %d through; want 2 and 1", conflicts.Injected.Load(), conflicts.Passed.Load())
	}
	gets, updates := 0, 0
	for _, a := range f.Ray.Actions() {
		switch a := a.(type) {
		case k8stesting.GetAction:
			gets++
		case k8stesting.UpdateAction:
			updates++
			if rv := a.GetObject().(*rayv1.RayCluster).ResourceVersion; rv != "42" {
				t.Errorf("update %d carries resourceVersion %q, want the one read (42)", updates, rv)
			}
		}
	}
	if gets != 3 || updates != 3 {
		t.Errorf("%d reads and %d updates, want 3 of each (a fresh read before each attempt)", gets, updates)
	}
}

// TestWaitBetweenRetriesEndsWithTheContext: a call retrying conflicts
// returns as soon as its context ends, not after the backoff's wait.
func TestWaitBetweenRetriesEndsWithTheContext(t *testing.T) {
	rc, _ := rayctl.ClusterSpec{Name: "c", Namespace: "ns"}.Build()
	f := rayctltest.New(t, "ns", rc)
	c, _ := rayctl.New(f.Kube, f.Ray, &rayctl.Options{Namespace: "ns", Backoff: &wait.Backoff{Steps: 5, Duration: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Ray.PrependReactor("*", "rayclusters", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetVerb() == "patch" || a.GetVerb() == "update" {
			cancel() // the caller gives up while the call waits to retry
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "ray.io", Resource: "rayclusters"}, "c", errors.New("changed"))
		}
		return false, nil, nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := c.AddWorkerGroup(ctx, "", "c", rayctl.WorkerGroup{Name: "w"})
		done <- err
	}()
	err := within(t, done, "AddWorkerGroup after its context was cancelled")
	if !errors.Is(err, context.Canceled) || !apierrors.IsConflict(err) {
		t.Fatalf("error %v: want it to wrap context.Canceled and the last conflict", err)
	}
}

// writtenName is the name of the RayCluster an update or patch writes, or
// "" for other actions.
func writtenName(a k8stesting.Action) string {
	switch a := a.(type) {
	case k8stesting.PatchAction:
		return a.GetName()
	case k8stesting.UpdateAction:
		if rc, ok := a.GetObject().(*rayv1.RayCluster); ok {
			return rc.Name
		}
	}
	return ""
}

// gatedRay is a KubeRay clientset whose reads of one RayCluster wait at a
// gate (the fake clientset cannot do it: it holds its lock while its
// reactors run).
type gatedRay struct {
	rayclient.Interface
	name    string
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedRay) RayV1() rayv1client.RayV1Interface { return gatedRayV1{g.Interface.RayV1(), g} }

type gatedRayV1 struct {
	rayv1client.RayV1Interface
	g *gatedRay
}

func (v gatedRayV1) RayClusters(ns string) rayv1client.RayClusterInterface {
	return gatedClusters{v.RayV1Interface.RayClusters(ns), v.g}
}

type gatedClusters struct {
	rayv1client.RayClusterInterface
	g *gatedRay
}

func (c gatedClusters) Get(ctx context.Context, name string, opts metav1.GetOptions) (*rayv1.RayCluster, error) {
	if name == c.g.name {
		c.g.entered <- struct{}{}
		<-c.g.gate
	}
	return c.RayClusterInterface.Get(ctx, name, opts)
}

// TestUnrelatedClustersDoNotWaitForEachOther: while a write of one
// RayCluster is in flight, a write of another completes. The second name
// is picked to share the first's lock stripe under the former 64-way fnv
// striping, under which it waited.
func TestUnrelatedClustersDoNotWaitForEachOther(t *testing.T) {
	stripe := func(key string) uint32 { h := fnv.New32a(); h.Write([]byte(key)); return h.Sum32() % 64 }
	other := ""
	for i := 0; other == ""; i++ {
		if name := fmt.Sprintf("other-%d", i); stripe("ns/"+name) == stripe("ns/busy") {
			other = name
		}
	}
	busy, _ := rayctl.ClusterSpec{Name: "busy", Namespace: "ns"}.Build()
	free, _ := rayctl.ClusterSpec{Name: other, Namespace: "ns"}.Build()
	f := rayctltest.New(t, "ns", busy, free)
	gated := &gatedRay{Interface: f.Ray, name: "busy", entered: make(chan struct{}, 1), gate: make(chan struct{})}
	defer close(gated.gate)
	c, err := rayctl.New(f.Kube, gated, &rayctl.Options{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	go func() { _, _ = c.AddWorkerGroup(ctx, "", "busy", rayctl.WorkerGroup{Name: "w"}) }()
	<-gated.entered // the write of busy is in flight, the Client's lock of it taken
	done := make(chan error, 1)
	go func() {
		_, err := c.AddWorkerGroup(ctx, "", other, rayctl.WorkerGroup{Name: "w"})
		done <- err
	}()
	if err := within(t, done, "a write of RayCluster "+other+" while one of busy is in flight"); err != nil {
		t.Fatal(err)
	}
}

// TestLockIsNotHeldAcrossRetries: a call waiting to retry a conflict does
// not keep the same Client's other calls on that cluster waiting.
func TestLockIsNotHeldAcrossRetries(t *testing.T) {
	rc, _ := rayctl.ClusterSpec{Name: "c", Namespace: "ns"}.Build()
	f := rayctltest.New(t, "ns", rc)
	c, _ := rayctl.New(f.Kube, f.Ray, &rayctl.Options{Namespace: "ns", Backoff: &wait.Backoff{Steps: 2, Duration: time.Hour}})
	rayctltest.InjectConflicts(&f.Ray.Fake, "rayclusters", 1)
	slowCtx, cancelSlow := context.WithCancel(context.Background())
	defer cancelSlow()
	slow := make(chan error, 1)
	go func() {
		_, err := c.AddWorkerGroup(slowCtx, "", "c", rayctl.WorkerGroup{Name: "slow"})
		slow <- err
	}()
	// Wait until the first call lost its write and waits to retry.
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		for _, a := range f.Ray.Actions() {
			if writtenName(a) == "c" {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("the first call never wrote")
	}
	fast := make(chan error, 1)
	go func() {
		_, err := c.AddWorkerGroup(context.Background(), "", "c", rayctl.WorkerGroup{Name: "fast"})
		fast <- err
	}()
	if err := within(t, fast, "a second call while the first waits to retry"); err != nil {
		t.Fatal(err)
	}
	cancelSlow()
	if err := within(t, slow, "the first call after its context was cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("first call: %v, want context.Canceled", err)
	}
}

func TestNotFoundErrorsAreErrNotFound(t *testing.T) {
	f, _ := fakeCluster(t)
	ctx := context.Background()
	_, err := f.Client.GetCluster(ctx, "", "ghost")
	if !errors.Is(err, rayctl.ErrClusterNotFound) || !errors.Is(err, rayctl.ErrNotFound) {
		t.Errorf("GetCluster of a missing cluster: %v, want ErrClusterNotFound and ErrNotFound", err)
	}
	_, err = f.Client.AddWorkerGroup(ctx, "", "ghost", rayctl.WorkerGroup{Name: "w"})
	if !errors.Is(err, rayctl.ErrClusterNotFound) || !errors.Is(err, rayctl.ErrNotFound) {
		t.Errorf("AddWorkerGroup to a missing cluster: %v, want ErrClusterNotFound and ErrNotFound", err)
	}
	_, err = f.Client.ScaleGroup(ctx, "", "c", "ghost", rayctl.Scale{Replicas: ptr.To[int32](1)})
	if !errors.Is(err, rayctl.ErrGroupNotFound) || !errors.Is(err, rayctl.ErrNotFound) {
		t.Errorf("ScaleGroup of a missing group: %v, want ErrGroupNotFound and ErrNotFound", err)
	}
	if errors.Is(rayctl.ErrNotFound, rayctl.ErrClusterNotFound) {
		t.Error("ErrNotFound matches ErrClusterNotFound; only the other way round should hold")
	}
}

func TestDefaultBackoffCannotBeChangedByCallers(t *testing.T) {
	b := rayctl.DefaultBackoff()
	want := b
	b.Steps, b.Duration = 1, time.Hour
	if got := rayctl.DefaultBackoff(); got != want {
		t.Fatalf("DefaultBackoff() = %+v after a caller edited its copy, want %+v", got, want)
	}
	if want.Steps < 2 || want.Duration <= 0 {
		t.Fatalf("DefaultBackoff() = %+v: no retries", want)
	}
}
