package manifest

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// KubeRayVersion is the KubeRay release whose CRDs and rules are embedded.
const KubeRayVersion = "v1.6.0"

func labelsSet(m map[string]string) k8slabels.Set { return k8slabels.Set(m) }

type podTemplate struct {
	path   string
	spec   *corev1.PodSpec
	labels map[string]string
}

// podTemplates finds the pod templates of an object: a Pod, the workload
// kinds, and Ray's head and worker templates (also inside RayJob,
// RayService and RayCronJob).
func podTemplates(u *unstructured.Unstructured) []podTemplate {
	var out []podTemplate
	add := func(path string, m map[string]any) {
		if m == nil {
			return
		}
		tmpl := &corev1.PodTemplateSpec{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, tmpl); err != nil {
			return // a shape error; schema validation reports it
		}
		out = append(out, podTemplate{path: path, spec: &tmpl.Spec, labels: tmpl.Labels})
	}
	get := func(path ...string) map[string]any {
		m, _, _ := unstructured.NestedMap(u.Object, path...)
		return m
	}
	ray := func(prefix string, spec map[string]any) {
		if spec == nil {
			return
		}
		head, _, _ := unstructured.NestedMap(spec, "headGroupSpec", "template")
		add(prefix+"headGroupSpec.template", head)
		groups, _, _ := unstructured.NestedSlice(spec, "workerGroupSpecs")
		for i, g := range groups {
			gm, _ := g.(map[string]any)
			t, _, _ := unstructured.NestedMap(gm, "template")
			add(fmt.Sprintf("%sworkerGroupSpecs[%d].template", prefix, i), t)
		}
	}
	switch u.GetKind() {
	case "Pod":
		add("", map[string]any{"metadata": get("metadata"), "spec": get("spec")})
		if len(out) == 1 {
			out[0].path = "spec"
		}
	case "Deployment", "StatefulSet", "DaemonSet", "Job", "ReplicaSet":
		add("spec.template", get("spec", "template"))
	case "RayCluster":
		ray("spec.", get("spec"))
	case "RayJob":
		ray("spec.rayClusterSpec.", get("spec", "rayClusterSpec"))
		add("spec.submitterPodTemplate", get("spec", "submitterPodTemplate"))
	case "RayService":
		ray("spec.rayClusterConfig.", get("spec", "rayClusterConfig"))
	case "RayCronJob":
		ray("spec.jobTemplate.rayClusterSpec.", get("spec", "jobTemplate", "rayClusterSpec"))
	}
	return out
}

// podTemplateFindings are the checks no schema makes inside a pod
// template, which otherwise surface only when the pod is created.
func podTemplateFindings(obj, path string, spec *corev1.PodSpec, lbls map[string]string) []Finding {
	var out []Finding
	errorAt := func(id, p, msg, fix string) {
		out = append(out, Finding{ID: id, Severity: SeverityError, Object: obj, Path: p, Message: msg, Fix: fix})
	}
	warnAt := func(id, p, msg, fix string) {
		out = append(out, Finding{ID: id, Severity: SeverityWarning, Object: obj, Path: p, Message: msg, Fix: fix})
	}
	specPath := path + ".spec"
	if path == "spec" {
		specPath = "spec"
	}
	for k, v := range lbls {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			errorAt("pod-label", path+".metadata.labels", fmt.Sprintf("label key %q: %s", k, errs[0]), "")
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			errorAt("pod-label", path+".metadata.labels."+k, fmt.Sprintf("label value %q: %s", v, errs[0]), "")
		}
	}
	if len(spec.Containers) == 0 {
		errorAt("pod-containers", specPath+".containers", "at least one container is required", "")
	}
	names := map[string]bool{}
	check := func(kind string, i int, c corev1.Container) {
		p := fmt.Sprintf("%s.%s[%d]", specPath, kind, i)
		if errs := validation.IsDNS1123Label(c.Name); len(errs) > 0 {
			errorAt("container-name", p+".name", fmt.Sprintf("%q: %s", c.Name, errs[0]), "use lowercase letters, digits and '-'")
		} else if names[c.Name] {
			errorAt("container-name", p+".name", fmt.Sprintf("%q is used by two containers", c.Name), "")
		}
		names[c.Name] = true
		if c.Image == "" && kind == "containers" {
			errorAt("container-image", p+".image", "is required", "")
		}
		env := map[string]bool{}
		for j, e := range c.Env {
			if env[e.Name] {
				warnAt("duplicate-env", fmt.Sprintf("%s.env[%d].name", p, j), fmt.Sprintf("%q is set twice; the last value wins", e.Name), "remove one")
			}
			env[e.Name] = true
			if errs := validation.IsEnvVarName(e.Name); len(errs) > 0 {
				errorAt("env-name", fmt.Sprintf("%s.env[%d].name", p, j), fmt.Sprintf("%q: %s", e.Name, errs[0]), "")
			}
		}
		for name, req := range c.Resources.Requests {
			lim, hasLimit := c.Resources.Limits[name]
			extended := strings.Contains(string(name), "/") && !strings.HasPrefix(string(name), "kubernetes.io/")
			if extended && !hasLimit {
				fix := fmt.Sprintf("set resources.limits.%s (requests default to limits for extended resources)", name)
				if strings.HasSuffix(string(name), "gpu") {
					errorAt("gpu-request-only", p+".resources.requests."+string(name), "GPUs are requested but not limited; the API server rejects the pod, and Ray reads GPUs from limits only", fix)
				} else {
					errorAt("extended-request-only", p+".resources.requests."+string(name), "an extended resource needs a limit", fix)
				}
				continue
			}
			if hasLimit && req.Cmp(lim) > 0 {
				errorAt("request-above-limit", p+".resources.requests."+string(name), fmt.Sprintf("request %s is above limit %s", req.String(), lim.String()), "")
			}
			if extended && hasLimit && req.Cmp(lim) != 0 {
				errorAt("extended-request-limit", p+".resources.requests."+string(name), "an extended resource's request must equal its limit", "")
			}
		}
	}
	for i, c := range spec.InitContainers {
		check("initContainers", i, c)
	}
	for i, c := range spec.Containers {
		check("containers", i, c)
	}
	return out
}
