package manifest

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	sigsyaml "sigs.k8s.io/yaml"
)

// Validator validates objects in process with the API server's semantics:
// ray.io kinds against KubeRay's CRD schemas (embedded at the pinned
// version) through k8s.io/apiextensions-apiserver — unknown fields
// (pruning), defaults, the structural schema, embedded metadata, list
// types and CEL rules, as the create path runs them — and against KubeRay's
// own validation rules; built-in kinds by a strict decode into their Go
// types and apimachinery's metadata validation; and, inside every pod
// template, the checks no schema makes (names, labels, duplicate env
// names, GPUs only in requests, requests above limits).
//
// A Validator compiles each CRD's schema and CEL rules once, on first use,
// and is safe for concurrent use.
type Validator struct {
	once    sync.Once
	loadErr error
	crds    map[schema.GroupVersionKind]*crdValidator
}

type crdValidator struct {
	structural *structuralschema.Structural
	strategy   interface {
		Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	}
	namespaced bool
}

// NewValidator returns a Validator; schemas load lazily.
func NewValidator() *Validator { return &Validator{} }

func (v *Validator) load() error {
	v.once.Do(func() {
		v.crds = map[schema.GroupVersionKind]*crdValidator{}
		v.loadErr = fs.WalkDir(kubeRayCRDs, "crds", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := kubeRayCRDs.ReadFile(path)
			if err != nil {
				return err
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := sigsyaml.Unmarshal(data, crd); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			for _, ver := range crd.Spec.Versions {
				if ver.Schema == nil || ver.Schema.OpenAPIV3Schema == nil || !ver.Served {
					continue
				}
				internal := &apiextensions.JSONSchemaProps{}
				if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(ver.Schema.OpenAPIV3Schema, internal, nil); err != nil {
					return err
				}
				structural, err := structuralschema.NewStructural(internal)
				if err != nil {
					return fmt.Errorf("%s %s: %w", crd.Name, ver.Name, err)
				}
				validator, _, err := apiservervalidation.NewSchemaValidator(internal)
				if err != nil {
					return err
				}
				gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind}
				namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
				strategy := customresource.NewStrategy(scheme.Scheme, namespaced, gvk, validator, nil, structural, nil, nil, nil)
				v.crds[gvk] = &crdValidator{structural: structural, strategy: strategy, namespaced: namespaced}
			}
			return nil
		})
	})
	return v.loadErr
}

// builtinTypes are the built-in kinds decoded strictly into Go types.
var builtinTypes = map[schema.GroupVersionKind]reflect.Type{
	{Version: "v1", Kind: "Namespace"}:                                               reflect.TypeFor[corev1.Namespace](),
	{Version: "v1", Kind: "ConfigMap"}:                                               reflect.TypeFor[corev1.ConfigMap](),
	{Version: "v1", Kind: "Secret"}:                                                  reflect.TypeFor[corev1.Secret](),
	{Version: "v1", Kind: "Service"}:                                                 reflect.TypeFor[corev1.Service](),
	{Version: "v1", Kind: "ServiceAccount"}:                                          reflect.TypeFor[corev1.ServiceAccount](),
	{Version: "v1", Kind: "Pod"}:                                                     reflect.TypeFor[corev1.Pod](),
	{Version: "v1", Kind: "ResourceQuota"}:                                           reflect.TypeFor[corev1.ResourceQuota](),
	{Version: "v1", Kind: "LimitRange"}:                                              reflect.TypeFor[corev1.LimitRange](),
	{Version: "v1", Kind: "PersistentVolumeClaim"}:                                   reflect.TypeFor[corev1.PersistentVolumeClaim](),
	{Group: "apps", Version: "v1", Kind: "Deployment"}:                               reflect.TypeFor[appsv1.Deployment](),
	{Group: "apps", Version: "v1", Kind: "StatefulSet"}:                              reflect.TypeFor[appsv1.StatefulSet](),
	{Group: "apps", Version: "v1", Kind: "DaemonSet"}:                                reflect.TypeFor[appsv1.DaemonSet](),
	{Group: "batch", Version: "v1", Kind: "Job"}:                                     reflect.TypeFor[batchv1.Job](),
	{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}:               reflect.TypeFor[networkingv1.NetworkPolicy](),
	{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}:                     reflect.TypeFor[networkingv1.Ingress](),
	{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}:                    reflect.TypeFor[policyv1.PodDisruptionBudget](),
	{Group: "scheduling.k8s.io", Version: "v1", Kind: "PriorityClass"}:               reflect.TypeFor[schedulingv1.PriorityClass](),
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}:                reflect.TypeFor[rbacv1.Role](),
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}:         reflect.TypeFor[rbacv1.RoleBinding](),
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}: reflect.TypeFor[apiextensionsv1.CustomResourceDefinition](),
	{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}:           nil, // schema not embedded: metadata checks only
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}:         reflect.TypeFor[rbacv1.ClusterRole](),
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}:  reflect.TypeFor[rbacv1.ClusterRoleBinding](),
}

// clusterScoped kinds have no namespace.
var clusterScoped = map[string]bool{"Namespace": true, "PriorityClass": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true}

// Validate returns the problems the API server, or the KubeRay operator,
// would reject (errors), for one object.
func (v *Validator) Validate(u *unstructured.Unstructured) []Finding {
	obj := describe(u)
	errorAt := func(id, path, msg, fix string) Finding {
		return Finding{ID: id, Severity: SeverityError, Object: obj, Path: path, Message: msg, Fix: fix}
	}
	gvk := u.GroupVersionKind()
	if gvk.Version == "" || gvk.Kind == "" {
		return []Finding{errorAt("type", "apiVersion", "apiVersion and kind are required", "")}
	}
	var out []Finding
	if u.GetName() == "" && u.GetGenerateName() == "" {
		out = append(out, errorAt("metadata", "metadata.name", "is required", ""))
	}

	if gvk.Group == rayv1.GroupVersion.Group {
		if err := v.load(); err != nil {
			return append(out, errorAt("internal", "", "loading KubeRay CRDs: "+err.Error(), ""))
		}
		crd, ok := v.crds[gvk]
		if !ok {
			return append(out, errorAt("type", "apiVersion", fmt.Sprintf("KubeRay %s serves no %s %s", KubeRayVersion, gvk.GroupVersion(), gvk.Kind), "use apiVersion ray.io/v1"))
		}
		out = append(out, v.validateCR(u, crd, errorAt)...)
		out = append(out, kubeRayRules(u, errorAt)...)
	} else if t, known := builtinTypes[gvk]; known {
		out = append(out, metadataFindings(u, !clusterScoped[gvk.Kind], errorAt)...)
		if t != nil {
			out = append(out, strictBuiltin(u, t, errorAt)...)
		}
	} else {
		out = append(out, Finding{ID: "unknown-kind", Severity: SeverityWarning, Object: obj, Path: "kind",
			Message: fmt.Sprintf("%s %s has no embedded schema; only its metadata was checked", gvk.GroupVersion(), gvk.Kind)})
		out = append(out, metadataFindings(u, true, errorAt)...)
	}
	for _, tmpl := range podTemplates(u) {
		out = append(out, podTemplateFindings(obj, tmpl.path, tmpl.spec, tmpl.labels)...)
	}
	return out
}

func (v *Validator) validateCR(u *unstructured.Unstructured, crd *crdValidator, errorAt func(id, path, msg, fix string) Finding) []Finding {
	var out []Finding
	obj := u.DeepCopy()
	for _, p := range pruning.PruneWithOptions(obj.Object, crd.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}) {
		out = append(out, errorAt("unknown-field", p, "unknown field (the API server drops it, or refuses it with fieldValidation=Strict)", "check the spelling against the CRD"))
	}
	structuraldefaulting.Default(obj.Object, crd.structural)
	out = append(out, metadataFindings(obj, crd.namespaced, errorAt)...)
	if crd.namespaced && obj.GetNamespace() == "" {
		obj.SetNamespace("default") // the namespace comes from the context at apply time
	}
	for _, e := range crd.strategy.Validate(context.Background(), obj) {
		if e.Field == "<nil>" && strings.Contains(e.Detail, "not checked because the object was invalid") {
			continue // the errors that blocked CEL are reported already
		}
		out = append(out, errorAt("schema", e.Field, strings.TrimPrefix(e.ErrorBody(), e.Field+": "), ""))
	}
	return out
}

func metadataFindings(u *unstructured.Unstructured, namespaced bool, errorAt func(id, path, msg, fix string) Finding) []Finding {
	var out []Finding
	meta := &metav1.ObjectMeta{}
	m, _, _ := unstructured.NestedMap(u.Object, "metadata")
	data, _ := json.Marshal(m)
	if err := json.Unmarshal(data, meta); err != nil {
		return []Finding{errorAt("metadata", "metadata", err.Error(), "")}
	}
	if meta.Namespace == "" && namespaced {
		meta.Namespace = "default" // namespaces come from the context at apply time
	}
	for _, e := range apivalidation.ValidateObjectMeta(meta, namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata")) {
		if meta.Name == "" && e.Field == "metadata.name" {
			continue // reported once already
		}
		out = append(out, errorAt("metadata", e.Field, strings.TrimPrefix(e.ErrorBody(), e.Field+": "), ""))
	}
	return out
}

// strictBuiltin decodes the object into its Go type the strict way: every
// key must be a field of the type, every value of its type.
func strictBuiltin(u *unstructured.Unstructured, t reflect.Type, errorAt func(id, path, msg, fix string) Finding) []Finding {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return []Finding{errorAt("decode", "", err.Error(), "")}
	}
	var node yaml.Node
	if err := yaml.Unmarshal(data, &node); err != nil || len(node.Content) == 0 {
		return []Finding{errorAt("decode", "", fmt.Sprint(err), "")}
	}
	w := walker{lines: map[string]int{}}
	generic, err := w.convert(node.Content[0], t, "")
	if err != nil {
		if se, ok := err.(*SpecError); ok {
			id := "schema"
			if strings.HasPrefix(se.Problem, "unknown field") {
				id = "unknown-field"
			}
			return []Finding{errorAt(id, se.Path, se.Problem, "")}
		}
		return []Finding{errorAt("decode", "", err.Error(), "")}
	}
	typed := reflect.New(t).Interface()
	js, _ := json.Marshal(generic)
	if err := json.Unmarshal(js, typed); err != nil {
		return []Finding{errorAt("schema", "", err.Error(), "")}
	}
	return builtinSemantics(typed, errorAt)
}

// builtinSemantics are the API server checks users hit most on the kinds
// this project renders.
func builtinSemantics(obj any, errorAt func(id, path, msg, fix string) Finding) []Finding {
	var out []Finding
	switch o := obj.(type) {
	case *appsv1.Deployment:
		if o.Spec.Selector == nil {
			out = append(out, errorAt("schema", "spec.selector", "is required", ""))
		} else if sel, err := metav1.LabelSelectorAsSelector(o.Spec.Selector); err != nil {
			out = append(out, errorAt("schema", "spec.selector", err.Error(), ""))
		} else if !sel.Empty() && !sel.Matches(labelsSet(o.Spec.Template.Labels)) {
			out = append(out, errorAt("schema", "spec.template.metadata.labels", "`selector` does not match template `labels`", "make spec.selector.matchLabels a subset of the template's labels"))
		}
	case *corev1.Service:
		if len(o.Spec.Ports) == 0 && o.Spec.Type != corev1.ServiceTypeExternalName && o.Spec.ClusterIP != corev1.ClusterIPNone {
			out = append(out, errorAt("schema", "spec.ports", "at least one port is required", ""))
		}
		for i, p := range o.Spec.Ports {
			if p.Port < 1 || p.Port > 65535 {
				out = append(out, errorAt("schema", fmt.Sprintf("spec.ports[%d].port", i), fmt.Sprintf("%d is not between 1 and 65535", p.Port), ""))
			}
			if len(o.Spec.Ports) > 1 && p.Name == "" {
				out = append(out, errorAt("schema", fmt.Sprintf("spec.ports[%d].name", i), "is required when there is more than one port", ""))
			}
		}
	case *policyv1.PodDisruptionBudget:
		if o.Spec.MinAvailable != nil && o.Spec.MaxUnavailable != nil {
			out = append(out, errorAt("schema", "spec", "minAvailable and maxUnavailable cannot both be set", ""))
		}
	}
	return out
}
