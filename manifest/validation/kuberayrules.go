package validation

import (
	"fmt"
	"reflect"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	rayutils "github.com/ray-project/kuberay/ray-operator/controllers/ray/utils"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kubeRayRules runs KubeRay v1.6.0's own validation (the functions the
// operator calls before it reconciles; a failure there is an event and no
// reconcile, never an admission error) on ray.io objects. It also returns
// the object's pod templates, taken from the same typed decode; ok is false
// when the object does not decode (its schema errors are reported
// elsewhere).
func kubeRayRules(u *unstructured.Unstructured, errorAt func(id, path, msg, fix string) Finding) (out []Finding, templates []podTemplate, ok bool) {
	add := func(path string, err error) {
		if err != nil {
			out = append(out, errorAt("kuberay-validation", path, err.Error()+" (the operator refuses to reconcile it)", ""))
		}
	}
	switch u.GetKind() {
	case "RayCluster":
		rc := &rayv1.RayCluster{}
		if fromUnstructured(u.Object, rc) != nil {
			return nil, nil, false
		}
		add("metadata.name", rayutils.ValidateRayClusterMetadata(rc.ObjectMeta))
		add("spec", rayutils.ValidateRayClusterSpec(&rc.Spec, rc.Annotations))
		add("spec.upgradeStrategy", rayutils.ValidateRayClusterUpgradeOptions(rc))
		templates = rayPodTemplates("spec.", &rc.Spec)
	case "RayJob":
		j := &rayv1.RayJob{}
		if fromUnstructured(u.Object, j) != nil {
			return nil, nil, false
		}
		add("metadata.name", rayutils.ValidateRayJobMetadata(j.ObjectMeta))
		add("spec", rayutils.ValidateRayJobSpec(j))
		templates = rayPodTemplates("spec.rayClusterSpec.", j.Spec.RayClusterSpec)
		if t := j.Spec.SubmitterPodTemplate; t != nil {
			templates = append(templates, podTemplate{path: "spec.submitterPodTemplate", spec: &t.Spec, labels: t.Labels})
		}
	case "RayService":
		s := &rayv1.RayService{}
		if fromUnstructured(u.Object, s) != nil {
			return nil, nil, false
		}
		add("metadata", rayutils.ValidateRayServiceMetadata(s.ObjectMeta))
		add("spec", rayutils.ValidateRayServiceSpec(s))
		templates = rayPodTemplates("spec.rayClusterConfig.", &s.Spec.RayClusterSpec)
	case "RayCronJob":
		c := &rayv1.RayCronJob{}
		if fromUnstructured(u.Object, c) != nil {
			return nil, nil, false
		}
		add("spec", rayutils.ValidateRayCronJobSpec(c))
		templates = rayPodTemplates("spec.jobTemplate.rayClusterSpec.", c.Spec.JobTemplate.RayClusterSpec)
	}
	return out, templates, true
}

// rayPodTemplates are the head and worker templates of a cluster spec; an
// empty template (one the object leaves out: the schema reports it) is
// skipped.
func rayPodTemplates(prefix string, spec *rayv1.RayClusterSpec) []podTemplate {
	if spec == nil {
		return nil
	}
	var out []podTemplate
	add := func(path string, t *corev1.PodTemplateSpec) {
		if !reflect.ValueOf(t).Elem().IsZero() {
			out = append(out, podTemplate{path: path, spec: &t.Spec, labels: t.Labels})
		}
	}
	add(prefix+"headGroupSpec.template", &spec.HeadGroupSpec.Template)
	for i := range spec.WorkerGroupSpecs {
		add(fmt.Sprintf("%sworkerGroupSpecs[%d].template", prefix, i), &spec.WorkerGroupSpecs[i].Template)
	}
	return out
}
