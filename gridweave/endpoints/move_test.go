package endpoints_test

import (
	"context"
	"errors"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayfake "github.com/ray-project/kuberay/ray-operator/pkg/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"gridweave.dev/gridweave/crd/v1alpha1"
	"gridweave.dev/gridweave/endpoints"
	"gridweave.dev/rayctl"
)

// TestAMoveCutShortIsFinishedByTheNext: a move whose swap landed and whose
// deletion of the old group's pods failed answers the error and leaves
// the status naming the old group; the next move finishes it (the old
// pods, the status) instead of asking for the new group again, which the
// RayCluster already holds (409 worker_group_exists, for good).
func TestAMoveCutShortIsFinishedByTheNext(t *testing.T) {
	ctx := context.Background()
	const ns = "serving"
	h100 := v1alpha1.Hardware{GPUType: "NVIDIA-H100-80GB-HBM3", GPUs: 1}
	a100 := v1alpha1.Hardware{GPUType: "NVIDIA-A100-SXM4-80GB", GPUs: 1}
	oldGroup, newGroup := endpoints.GroupName("chat", h100), endpoints.GroupName("chat", a100)
	container := []corev1.Container{{Name: "ray", Image: "gridweave-ray:test"}}
	rc := &rayv1.RayCluster{ObjectMeta: metav1.ObjectMeta{Name: "serve", Namespace: ns}, Spec: rayv1.RayClusterSpec{
		HeadGroupSpec:    rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: container}}},
		WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: oldGroup, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: container}}}},
	}}
	kube := k8sfake.NewClientset()
	deletions, failures := 0, 1
	kube.PrependReactor("delete-collection", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		deletions++
		if failures > 0 {
			failures--
			return true, nil, errors.New("the API server is having a bad day")
		}
		return false, nil, nil
	})
	//lint:ignore SA1019 NewClientset's field management needs KubeRay's OpenAPI models, which its fake lacks (its updates fail)
	rays := rayfake.NewSimpleClientset(rc)
	ray, err := rayctl.New(kube, rays, &rayctl.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	ep := &v1alpha1.GridweaveEndpoint{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "GridweaveEndpoint"},
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: ns},
		Spec:       v1alpha1.GridweaveEndpointSpec{Name: "chat", Cluster: "serve", Model: "m", Hardware: a100, Replicas: 1},
		Status:     v1alpha1.GridweaveEndpointStatus{WorkerGroup: oldGroup, Hardware: &h100},
	}
	raw, err := k8sruntime.DefaultUnstructuredConverter.ToUnstructured(ep)
	if err != nil {
		t.Fatal(err)
	}
	gvr := v1alpha1.GroupVersion.WithResource(v1alpha1.EndpointResource)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(k8sruntime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "GridweaveEndpointList"}, &unstructured.Unstructured{Object: raw})
	m := &endpoints.Mover{Ray: ray, Namespace: ns, Endpoints: endpoints.NewEndpoints(dyn, ns)}

	if _, _, err := m.Move(ctx, ep); err == nil {
		t.Fatal("the move whose pod deletion failed answered no error")
	}
	read := func() *v1alpha1.GridweaveEndpoint {
		t.Helper()
		obj, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, "chat", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := endpoints.FromUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(); got.Status.WorkerGroup != oldGroup {
		t.Fatalf("after the cut move the status names %q, want the old group %q", got.Status.WorkerGroup, oldGroup)
	}
	stored, moved, err := m.Move(ctx, read())
	if err != nil || !moved {
		t.Fatalf("the next move: moved %v, %v", moved, err)
	}
	got, err := endpoints.FromUnstructured(stored)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.WorkerGroup != newGroup || got.Status.Hardware == nil || got.Status.Hardware.GPUType != a100.GPUType {
		t.Errorf("the status after the next move: %+v", got.Status)
	}
	if deletions != 2 {
		t.Errorf("the old group's pods were deleted %d times, want 2 (the failed one and the next move's)", deletions)
	}
	cluster, err := ray.GetCluster(ctx, ns, "serve")
	if err != nil {
		t.Fatal(err)
	}
	if len(cluster.Spec.WorkerGroupSpecs) != 1 || cluster.Spec.WorkerGroupSpecs[0].GroupName != newGroup {
		t.Errorf("the RayCluster's groups after both moves: %+v", cluster.Spec.WorkerGroupSpecs)
	}
}
