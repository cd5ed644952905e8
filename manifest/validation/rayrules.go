package validation

import (
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"gridweave.dev/manifest/validation/operator"
)

// rayFindings are the Ray-aware rules of package operator on u, which
// judges what the operator would build with this package's checks of the
// API server.
func rayFindings(u *unstructured.Unstructured) []Finding {
	found := operator.Rules(u, apiServer{})
	if len(found) == 0 {
		return nil
	}
	obj := describe(u)
	out := make([]Finding, len(found))
	for i, f := range found {
		out[i] = Finding{ID: f.ID, Severity: SeverityWarning, Object: obj, Path: f.Path, Message: f.Message, Fix: f.Fix,
			embeddedIn: f.EmbeddedIn, embeddedLine: f.EmbeddedLine}
		if f.Error {
			out[i].Severity = SeverityError
		}
	}
	return out
}

// apiServer is operator.APIServer over this package's checks.
type apiServer struct{}

func (apiServer) Decode(obj map[string]any, into any) error { return fromUnstructured(obj, into) }

func (apiServer) ServiceErrors(s *corev1.Service) field.ErrorList { return serviceErrors(s) }

func (apiServer) IngressErrors(i *networkingv1.Ingress) field.ErrorList { return ingressErrors(i) }

func (apiServer) RestartPolicy(kind string, policy corev1.RestartPolicy, p *field.Path) *field.Error {
	return restartPolicyFinding(kind, policy, p)
}

// StartResources are the resources `ray start` sees in one group's pod.
type StartResources = operator.StartResources

// ComputeStartResources returns, for the head and each worker group of a
// RayCluster spec, the resources KubeRay passes to `ray start` (by
// building the pods as the operator does and reading their start
// command).
func ComputeStartResources(name string, spec *rayv1.RayClusterSpec) ([]StartResources, error) {
	return operator.ComputeStartResources(name, spec)
}
