package rayctltest

import (
	"context"
	"sync/atomic"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayclient "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned"
	rayfake "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/raymem"
)

// Fakes are a rayctl.Client over fake clientsets.
type Fakes struct {
	Client *rayctl.Client
	Ray    *rayfake.Clientset
	Kube   *k8sfake.Clientset
}

// New returns a Client over fake clientsets seeded with objects: KubeRay
// objects go to the KubeRay fake, the rest to the Kubernetes fake. The
// Kubernetes fake deletes collections of pods by label selector, as the
// API server does (so DeleteGroupPods works on it).
func New(t testing.TB, namespace string, objects ...runtime.Object) *Fakes {
	t.Helper()
	f, err := NewFakes(namespace, objects...)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// NewFakes is New for code without a testing.TB (examples, tools).
func NewFakes(namespace string, objects ...runtime.Object) (*Fakes, error) {
	c := raymem.New(objects...)
	f := &Fakes{Ray: c.Ray, Kube: c.Kube}
	var err error
	f.Client, err = rayctl.New(f.Kube, f.Ray, &rayctl.Options{Namespace: namespace})
	return f, err
}

// Conflicts counts the writes a conflict injector saw.
type Conflicts struct {
	Injected atomic.Int32 // writes answered with 409
	Passed   atomic.Int32 // writes let through
}

// InjectConflicts makes the next n writes (updates or patches) of
// resource (e.g. "rayclusters") on the fake answer 409 Conflict, as the
// API server does when another writer got there first, and lets later ones
// through.
func InjectConflicts(fake *k8stesting.Fake, resource string, n int) *Conflicts {
	c := &Conflicts{}
	inject := func(action k8stesting.Action) (bool, runtime.Object, error) {
		if int(c.Injected.Load()) < n {
			c.Injected.Add(1)
			gr := schema.GroupResource{Group: action.GetResource().Group, Resource: resource}
			return true, nil, apierrors.NewConflict(gr, writtenName(action), errConflict)
		}
		c.Passed.Add(1)
		return false, nil, nil
	}
	fake.PrependReactor("update", resource, inject)
	fake.PrependReactor("patch", resource, inject)
	return c
}

// writtenName is the name of the object an update or patch writes.
func writtenName(action k8stesting.Action) string {
	switch a := action.(type) {
	case k8stesting.UpdateAction:
		if obj, err := meta.Accessor(a.GetObject()); err == nil {
			return obj.GetName()
		}
	case k8stesting.PatchAction:
		return a.GetName()
	}
	return ""
}

type conflictError struct{}

func (conflictError) Error() string {
	return "the object has been modified; please apply your changes to the latest version and try again"
}

var errConflict = conflictError{}

// MarkClusterReady sets a RayCluster's status the way the operator does
// once every pod is ready: state ready, RayClusterProvisioned and
// HeadPodReady true.
func MarkClusterReady(ctx context.Context, ray rayclient.Interface, namespace, name string) error {
	rc, err := ray.RayV1().RayClusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	//lint:ignore SA1019 the state field is still set by the operator
	rc.Status.State = rayv1.Ready
	now := metav1.Now()
	for _, t := range []rayv1.RayClusterConditionType{rayv1.RayClusterProvisioned, rayv1.HeadPodReady} {
		meta.SetStatusCondition(&rc.Status.Conditions, metav1.Condition{Type: string(t), Status: metav1.ConditionTrue, Reason: "MarkedReady", LastTransitionTime: now})
	}
	_, err = ray.RayV1().RayClusters(namespace).UpdateStatus(ctx, rc, metav1.UpdateOptions{})
	return err
}
