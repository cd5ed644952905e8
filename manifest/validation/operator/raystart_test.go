package operator_test

import (
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"

	"gridweave.dev/manifest/validation/operator"
)

// TestStartResourcesWithoutStartParams: a cluster written without
// rayStartParams, with a Redis password for fault tolerance (the operator
// writes redis-password into the head's rayStartParams), gets its
// `ray start` commands as the operator makes them, the password among
// the head's flags.
func TestStartResourcesWithoutStartParams(t *testing.T) {
	container := []corev1.Container{{Name: "ray", Image: "rayproject/ray:2.54.0"}}
	spec := &rayv1.RayClusterSpec{
		RayVersion:    "2.54.0",
		HeadGroupSpec: rayv1.HeadGroupSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: container}}},
		WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{GroupName: "gpu",
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: container}}}},
		GcsFaultToleranceOptions: &rayv1.GcsFaultToleranceOptions{RedisAddress: "redis:6379",
			RedisPassword: &rayv1.RedisCredential{Value: "p"}, RedisUsername: &rayv1.RedisCredential{Value: "u"}},
	}
	got, err := operator.ComputeStartResources("c", spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.Contains(got[0].Command, "--redis-password=$REDIS_PASSWORD") || !strings.Contains(got[0].Command, "--redis-username=$REDIS_USERNAME") {
		t.Fatalf("start resources %+v: want the head's command with the Redis credentials, and the worker's", got)
	}
	if spec.HeadGroupSpec.RayStartParams != nil {
		t.Errorf("the spec given was changed: rayStartParams %v", spec.HeadGroupSpec.RayStartParams)
	}
}
