package launch_test

import (
	"slices"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"gridweave.dev/rayctl/launch"
)

// TestUnrolledChanges: what running pods will not get is named field by
// field; scale changes, new groups and an unchanged spec (quantities
// written differently) are not.
func TestUnrolledChanges(t *testing.T) {
	spec := func() *rayv1.RayClusterSpec {
		return &rayv1.RayClusterSpec{
			RayVersion: "2.54.0",
			HeadGroupSpec: rayv1.HeadGroupSpec{RayStartParams: map[string]string{"num-gpus": "0"},
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: "ray:1"}}}}},
			WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "trainer", Replicas: ptr.To[int32](2),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-worker", Image: "ray:1",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}}},
		}
	}
	same := spec()
	same.WorkerGroupSpecs[0].Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1024Mi")
	same.WorkerGroupSpecs[0].NumOfHosts = 1 // the CRD's default of an unset 0
	if got := launch.UnrolledChanges(spec(), same); len(got) != 0 {
		t.Errorf("an equal spec: %v", got)
	}
	scaled := spec()
	scaled.WorkerGroupSpecs[0].Replicas = ptr.To[int32](5)
	scaled.WorkerGroupSpecs = append(scaled.WorkerGroupSpecs, rayv1.WorkerGroupSpec{GroupName: "eval"})
	if got := launch.UnrolledChanges(spec(), scaled); len(got) != 0 {
		t.Errorf("scale and a new group: %v", got)
	}
	changed := spec()
	changed.RayVersion = "2.55.0"
	changed.WorkerGroupSpecs[0].Template.Spec.Containers[0].Image = "ray:2"
	changed.HeadGroupSpec.RayStartParams["dashboard-host"] = "0.0.0.0"
	got := launch.UnrolledChanges(spec(), changed)
	want := []string{"rayVersion", "headGroupSpec.rayStartParams", "workerGroupSpecs[trainer].template"}
	if !slices.Equal(got, want) {
		t.Errorf("changes %v, want %v", got, want)
	}
}
