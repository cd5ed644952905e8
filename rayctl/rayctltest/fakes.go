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
)

// Fakes are a rayctl.Client over fake clientsets.
type Fakes struct {
	Client *rayctl.Client
	Ray    *rayfake.Clientset
	Kube   *k8sfake.Clientset
}

// New returns a Client over fake clientsets seeded with objects: KubeRay
// objects go to the KubeRay fake, the rest to the Kubernetes fake.
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
	var rayObjs, kubeObjs []runtime.Object
	for _, o := range objects {
		switch o.(type) {
		case *rayv1.RayCluster, *rayv1.RayJob, *rayv1.RayService:
			rayObjs = append(rayObjs, o)
		default:
			kubeObjs = append(kubeObjs, o)
		}
	}
	// KubeRay's field-managed NewClientset has no structured schema for its
	// kinds in v1.6.0 and refuses every update; the simple one works.
	//lint:ignore SA1019 see above
	rayFake := rayfake.NewSimpleClientset(rayObjs...)
	f := &Fakes{Ray: rayFake, Kube: k8sfake.NewClientset(kubeObjs...)}
	var err error
	f.Client, err = rayctl.New(f.Kube, f.Ray, &rayctl.Options{Namespace: namespace})
	return f, err
}

// Conflicts counts the update calls a conflict injector saw.
type Conflicts struct {
	Injected atomic.Int32 // updates answered with 409
	Passed   atomic.Int32 // updates let through
}

// InjectConflicts makes the next n updates of resource (e.g.
// "rayclusters") on the fake answer 409 Conflict, and lets later ones
// through.
func InjectConflicts(fake *k8stesting.Fake, resource string, n int) *Conflicts {
	c := &Conflicts{}
	fake.PrependReactor("update", resource, func(action k8stesting.Action) (bool, runtime.Object, error) {
		if int(c.Injected.Load()) < n {
			c.Injected.Add(1)
			ua := action.(k8stesting.UpdateAction)
			obj, _ := meta.Accessor(ua.GetObject())
			name := ""
			if obj != nil {
				name = obj.GetName()
			}
			gr := schema.GroupResource{Group: action.GetResource().Group, Resource: resource}
			return true, nil, apierrors.NewConflict(gr, name, errConflict)
		}
		c.Passed.Add(1)
		return false, nil, nil
	})
	return c
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
