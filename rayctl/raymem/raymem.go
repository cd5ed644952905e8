package raymem

import (
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayfake "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Cluster is the two clientsets over one set of objects.
type Cluster struct {
	Ray  *rayfake.Clientset
	Kube *k8sfake.Clientset
}

// New returns a cluster seeded with objects: KubeRay objects go to the
// KubeRay clientset, the rest to the Kubernetes one. It deletes
// collections of pods by label selector, as the API server does.
func New(objects ...runtime.Object) *Cluster {
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
	c := &Cluster{Ray: rayfake.NewSimpleClientset(rayObjs...), Kube: k8sfake.NewClientset(kubeObjs...)}
	c.Kube.PrependReactor("delete-collection", "pods", deletePodCollection(c.Kube.Tracker()))
	return c
}

// deletePodCollection does what the API server does for a DeleteCollection
// of pods, which the fake's object tracker does not implement: it deletes
// every pod of the namespace that matches the label selector.
func deletePodCollection(tracker k8stesting.ObjectTracker) k8stesting.ReactionFunc {
	podsResource := corev1.SchemeGroupVersion.WithResource("pods")
	podKind := corev1.SchemeGroupVersion.WithKind("Pod")
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		dc := action.(k8stesting.DeleteCollectionAction)
		selector := dc.GetListRestrictions().Labels
		list, err := tracker.List(podsResource, podKind, dc.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		for _, p := range list.(*corev1.PodList).Items {
			if selector != nil && !selector.Matches(labels.Set(p.Labels)) {
				continue
			}
			if err := tracker.Delete(podsResource, p.Namespace, p.Name); err != nil && !apierrors.IsNotFound(err) {
				return true, nil, err
			}
		}
		return true, nil, nil
	}
}
