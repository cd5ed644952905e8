package validation_test

import (
	"io"
	"os"
	"strings"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"gridweave.dev/manifest/validation"
)

func group(name string, params, groupRes map[string]string, req, lim corev1.ResourceList) rayv1.WorkerGroupSpec {
	zero, one := int32(0), int32(1)
	if params == nil {
		params = map[string]string{}
	}
	return rayv1.WorkerGroupSpec{
		GroupName: name, Replicas: &one, MinReplicas: &zero, MaxReplicas: &one, RayStartParams: params, Resources: groupRes,
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "ray-worker", Image: "rayproject/ray:2.54.0", Resources: corev1.ResourceRequirements{Requests: req, Limits: lim},
		}}}},
	}
}

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// TestStartResourcesFollowKubeRay checks the precedence and rounding that
// KubeRay v1.6.0 applies (and the operator review's examples: GPU 1 from
// a limit, 2 from rayStartParams, 3 from group resources).
func TestStartResourcesFollowKubeRay(t *testing.T) {
	spec := &rayv1.RayClusterSpec{
		RayVersion: "2.54.0",
		HeadGroupSpec: rayv1.HeadGroupSpec{RayStartParams: map[string]string{"num-cpus": "0"},
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ray-head", Image: "rayproject/ray:2.54.0",
				Resources: corev1.ResourceRequirements{Limits: rl("cpu", "2", "memory", "4Gi")}}}}}},
		WorkerGroupSpecs: []rayv1.WorkerGroupSpec{
			group("limit", nil, nil, nil, rl("cpu", "1500m", "memory", "8Gi", "nvidia.com/gpu", "1")),
			group("params", map[string]string{"num-gpus": "2"}, nil, nil, rl("cpu", "4", "nvidia.com/gpu", "1")),
			group("structured", nil, map[string]string{"GPU": "3", "cpu": "6", "dockyard_fleet_trainer": "0.5"}, nil, rl("cpu", "4", "nvidia.com/gpu", "1")),
			group("requests-only", nil, nil, rl("cpu", "500m", "memory", "2Gi", "nvidia.com/gpu", "1"), nil),
			group("tpu", nil, nil, nil, rl("cpu", "1", "google.com/tpu", "4")),
		},
	}
	got, err := validation.ComputeStartResources("demo", spec)
	if err != nil {
		t.Fatal(err)
	}
	byGroup := map[string]validation.StartResources{}
	for _, g := range got {
		byGroup[g.Group] = g
	}
	want := map[string]string{
		"head":          "head: CPU=0 GPU=unset memory=4Gi",
		"limit":         "limit: CPU=2 GPU=1 memory=8Gi",
		"params":        "params: CPU=4 GPU=2 memory=unset",
		"structured":    "structured: CPU=6 GPU=3 memory=unset dockyard_fleet_trainer=0.5",
		"requests-only": "requests-only: CPU=1 GPU=unset memory=unset",
		"tpu":           "tpu: CPU=1 GPU=unset memory=unset TPU=4",
	}
	for g, w := range want {
		if s := byGroup[g].String(); s != w {
			t.Errorf("%s\n got %s\nwant %s\n(command %s)", g, s, w, byGroup[g].Command)
		}
	}
	if !strings.Contains(byGroup["head"].Command, "ray start --head") {
		t.Errorf("head command %q", byGroup["head"].Command)
	}

	// KubeRay refuses resources in both places.
	spec.WorkerGroupSpecs = append(spec.WorkerGroupSpecs, group("both", map[string]string{"num-cpus": "1"}, map[string]string{"cpu": "2"}, nil, nil))
	if _, err := validation.ComputeStartResources("demo", spec); err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("resources in both places: %v", err)
	}
}

// TestLintWritesNothingToStdout: linting RayClusters whose names KubeRay's
// pod builders shorten (they print when they do: a label value above 63
// characters, an autoscaler service account name above 50) leaves the
// process's stdout alone — `launcher lint -o json` must stay JSON.
func TestLintWritesNothingToStdout(t *testing.T) {
	tooLong := strings.Replace(rayClusterDoc("x"), "name: x", "name: a-ray-cluster-name-that-is-long-enough-for-kuberay-to-shorten-it", 1)
	autoscaled := strings.Replace(rayClusterDoc("x"), "name: x", "name: a-cluster-name-of-52-characters-kuberay-shortens-abc", 1)
	autoscaled = strings.Replace(autoscaled, "spec:\n", "spec:\n  enableInTreeAutoscaling: true\n", 1)
	longAccount := strings.Replace(autoscaled, "containers:", "serviceAccountName: a-service-account-name-of-more-than-fifty-characters-x\n        containers:", 1)
	authJob := `apiVersion: ray.io/v1
kind: RayJob
metadata: {name: a-ray-job-name-of-more-than-fifty-characters-for-checkname}
spec:
  entrypoint: python x.py
  submitterPodTemplate: {spec: {restartPolicy: Never, containers: [{name: s, image: rayproject/ray:2.54.0}]}}
  rayClusterSpec:
    rayVersion: "2.54.0"
    authOptions: {mode: token}
    headGroupSpec:
      rayStartParams: {}
      template:
        spec:
          containers: [{name: ray-head, image: rayproject/ray:2.54.0}]
`
	for _, doc := range []string{tooLong, autoscaled, longAccount, authJob} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout := os.Stdout
		os.Stdout = w
		fs := lintString(t, doc)
		os.Stdout = stdout
		w.Close()
		printed, _ := io.ReadAll(r)
		if len(printed) > 0 {
			t.Errorf("lint printed to stdout: %q", printed)
		}
		if len(fs) == 0 && doc == tooLong {
			t.Error("a 64-character RayCluster name passed")
		}
	}
}
