package manifest

import (
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// kubeRayRules runs KubeRay v1.6.0's own validation (the functions the
// operator calls before it reconciles; a failure there is an event and no
// reconcile, never an admission error) on ray.io objects.
func kubeRayRules(u *unstructured.Unstructured, errorAt func(id, path, msg, fix string) Finding) []Finding {
	var out []Finding
	add := func(path string, err error) {
		if err != nil {
			out = append(out, errorAt("kuberay-validation", path, err.Error()+" (the operator refuses to reconcile it)", ""))
		}
	}
	switch u.GetKind() {
	case "RayCluster":
		rc := &rayv1.RayCluster{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rc) != nil {
			return nil
		}
		add("metadata.name", rayutils.ValidateRayClusterMetadata(rc.ObjectMeta))
		add("spec", rayutils.ValidateRayClusterSpec(&rc.Spec, rc.Annotations))
		add("spec.upgradeStrategy", rayutils.ValidateRayClusterUpgradeOptions(rc))
	case "RayJob":
		j := &rayv1.RayJob{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, j) != nil {
			return nil
		}
		add("metadata.name", rayutils.ValidateRayJobMetadata(j.ObjectMeta))
		add("spec", rayutils.ValidateRayJobSpec(j))
	case "RayService":
		s := &rayv1.RayService{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, s) != nil {
			return nil
		}
		add("metadata", rayutils.ValidateRayServiceMetadata(s.ObjectMeta))
		add("spec", rayutils.ValidateRayServiceSpec(s))
	case "RayCronJob":
		c := &rayv1.RayCronJob{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, c) != nil {
			return nil
		}
		add("spec", rayutils.ValidateRayCronJobSpec(c))
	}
	return out
}
