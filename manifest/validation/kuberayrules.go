package validation

import (
	"fmt"
	"reflect"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"gridweave.dev/rayctl"
)

// kubeRayRules runs KubeRay v1.6.0's own validation (the functions the
// operator calls before it reconciles; a failure there is an event and no
// reconcile, never an admission error) on ray.io objects: rayctl's port
// of it (rayctl.OperatorRefusals), held word for word to the operator's
// code by rayctl's differential tests. It also returns
// the object's pod templates, taken from the same typed decode; ok is false
// when the object does not decode (its schema errors are reported
// elsewhere).
func kubeRayRules(u *unstructured.Unstructured, errorAt func(id, path, msg, fix string) Finding) (out []Finding, templates []podTemplate, ok bool) {
	var typed any
	switch u.GetKind() {
	case "RayCluster":
		rc := &rayv1.RayCluster{}
		if fromUnstructured(u.Object, rc) != nil {
			return nil, nil, false
		}
		typed = rc
		templates = rayPodTemplates("spec.", &rc.Spec)
	case "RayJob":
		j := &rayv1.RayJob{}
		if fromUnstructured(u.Object, j) != nil {
			return nil, nil, false
		}
		typed = j
		templates = rayPodTemplates("spec.rayClusterSpec.", j.Spec.RayClusterSpec)
		if t := j.Spec.SubmitterPodTemplate; t != nil {
			templates = append(templates, podTemplate{path: "spec.submitterPodTemplate", spec: &t.Spec, labels: t.Labels})
		}
	case "RayService":
		s := &rayv1.RayService{}
		if fromUnstructured(u.Object, s) != nil {
			return nil, nil, false
		}
		typed = s
		templates = rayPodTemplates("spec.rayClusterConfig.", &s.Spec.RayClusterSpec)
	case "RayCronJob":
		c := &rayv1.RayCronJob{}
		if fromUnstructured(u.Object, c) != nil {
			return nil, nil, false
		}
		typed = c
		templates = rayPodTemplates("spec.jobTemplate.rayClusterSpec.", c.Spec.JobTemplate.RayClusterSpec)
	}
	for _, r := range rayctl.OperatorRefusals(typed) {
		out = append(out, errorAt("kuberay-validation", r.Field, r.Message+" (the operator refuses to reconcile it)", ""))
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
