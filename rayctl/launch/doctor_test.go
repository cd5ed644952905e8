package launch_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"gridweave.dev/rayctl/launch"
)

// TestDoctorSaysHowLongWorkersIdle: for an autoscaled cluster the doctor
// gives each group's effective idle timeout (its own, else the cluster's,
// else Ray's 60 s) and warns when a GPU group's is under five minutes; a
// cluster without autoscaling gets no such check.
func TestDoctorSaysHowLongWorkersIdle(t *testing.T) {
	object := func(doc string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		return u
	}
	const groups = `
    workerGroupSpecs:
    - groupName: trainer
      idleTimeoutSeconds: 900
      template: {spec: {containers: [{name: ray-worker, resources: {limits: {nvidia.com/gpu: 1}}}]}}
    - groupName: rollout
      template: {spec: {containers: [{name: ray-worker, resources: {limits: {nvidia.com/gpu: 1}}}]}}
    - groupName: cpu
      template: {spec: {containers: [{name: ray-worker}]}}`
	for _, c := range []struct {
		doc, want, outcome string
	}{
		{"kind: RayJob\nmetadata: {name: grpo}\nspec:\n  rayClusterSpec:\n    enableInTreeAutoscaling: true" + groups,
			"RayJob grpo: idle workers are removed after trainer 900 s (its own idleTimeoutSeconds), rollout 60 s (Ray's default), cpu 60 s (Ray's default)", launch.CheckWarn},
		{"kind: RayService\nmetadata: {name: c}\nspec:\n  rayClusterConfig:\n    enableInTreeAutoscaling: true\n    autoscalerOptions: {idleTimeoutSeconds: 600}" + strings.Replace(groups, "idleTimeoutSeconds: 900", "idleTimeoutSeconds: 1200", 1),
			"rollout 600 s (autoscalerOptions.idleTimeoutSeconds)", launch.CheckOK},
	} {
		checks := launch.IdleTimeouts(&launch.Plan{Objects: []*unstructured.Unstructured{object(c.doc)}})
		if len(checks) != 1 || !strings.Contains(checks[0].Message, c.want) || checks[0].Outcome != c.outcome {
			t.Errorf("%s\ngave %+v, want %s saying %q", c.doc, checks, c.outcome, c.want)
		}
	}
	if checks := launch.IdleTimeouts(&launch.Plan{Objects: []*unstructured.Unstructured{object("kind: RayJob\nmetadata: {name: c}\nspec:\n  rayClusterSpec:" + groups)}}); len(checks) != 0 {
		t.Errorf("a cluster without autoscaling: %+v", checks)
	}
}
