package operator_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"gridweave.dev/manifest/validation/operator"
)

// fakeAPIServer decodes with the unstructured converter and refuses what
// it is told to.
type fakeAPIServer struct{ refuseRestartPolicy bool }

func (fakeAPIServer) Decode(obj map[string]any, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(obj, into)
}
func (fakeAPIServer) ServiceErrors(*corev1.Service) field.ErrorList       { return nil }
func (fakeAPIServer) IngressErrors(*networkingv1.Ingress) field.ErrorList { return nil }
func (f fakeAPIServer) RestartPolicy(kind string, p corev1.RestartPolicy, at *field.Path) *field.Error {
	if f.refuseRestartPolicy {
		return field.NotSupported(at, p, []string{"OnFailure", "Never"})
	}
	return nil
}

// TestRulesAskTheAPIServer: what the operator builds is judged by the
// APIServer the engine gives, not by the emulation itself: the submitter
// Job of a RayJob is refused exactly when the API server refuses its
// restart policy.
func TestRulesAskTheAPIServer(t *testing.T) {
	job := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": map[string]any{"name": "train", "namespace": "ml"},
		"spec": map[string]any{
			"entrypoint": "python train.py",
			"submitterPodTemplate": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "submit", "image": "rayproject/ray:2.54.0"}},
			}},
			"rayClusterSpec": map[string]any{
				"rayVersion": "2.54.0",
				"headGroupSpec": map[string]any{"rayStartParams": map[string]any{}, "template": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": "ray-head", "image": "rayproject/ray:2.54.0"}},
				}}},
			},
		},
	}}
	ids := func(fs []operator.Finding) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.ID)
		}
		return out
	}
	if got := ids(operator.Rules(job, fakeAPIServer{refuseRestartPolicy: true})); !slices.Contains(got, "submitter-refused") {
		t.Errorf("the API server refuses the submitter's restart policy: findings %v lack submitter-refused", got)
	}
	if got := ids(operator.Rules(job, fakeAPIServer{})); slices.Contains(got, "submitter-refused") {
		t.Errorf("the API server admits the submitter: findings %v name submitter-refused", got)
	}
}
