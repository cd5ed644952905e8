package manifest

import (
	"context"
	"encoding/json"
	"fmt"
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
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
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
	mu    sync.Mutex
	files map[string]*crdFile // by CRD file, loaded on first use
}

// crdFile is one embedded CRD, compiled once.
type crdFile struct {
	once     sync.Once
	err      error
	versions map[schema.GroupVersionKind]*crdValidator
}

type crdValidator struct {
	structural *structuralschema.Structural
	strategy   interface {
		Validate(ctx context.Context, obj runtime.Object) field.ErrorList
	}
	namespaced bool
}

// NewValidator returns a Validator; each CRD's schema is compiled the first
// time an object of its kind is validated, so only the kinds in use stay
// in memory.
func NewValidator() *Validator { return &Validator{files: map[string]*crdFile{}} }

// crdFor returns the compiled schema of a ray.io kind and version.
func (v *Validator) crdFor(gvk schema.GroupVersionKind) (*crdValidator, error) {
	name := "crds/ray.io_" + strings.ToLower(gvk.Kind) + "s.yaml"
	v.mu.Lock()
	f, ok := v.files[name]
	if !ok {
		f = &crdFile{}
		v.files[name] = f
	}
	v.mu.Unlock()
	f.once.Do(func() { f.versions, f.err = compileCRD(name) })
	if f.err != nil {
		return nil, f.err
	}
	return f.versions[gvk], nil
}

func compileCRD(name string) (map[schema.GroupVersionKind]*crdValidator, error) {
	data, err := kubeRayCRDs.ReadFile(name)
	if err != nil {
		return nil, nil // no such kind: the caller reports it
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := sigsyaml.Unmarshal(data, crd); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out := map[schema.GroupVersionKind]*crdValidator{}
	for _, ver := range crd.Spec.Versions {
		if ver.Schema == nil || ver.Schema.OpenAPIV3Schema == nil || !ver.Served {
			continue
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(ver.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return nil, err
		}
		structural, err := structuralschema.NewStructural(internal)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", crd.Name, ver.Name, err)
		}
		_, openapiSchema, err := apiservervalidation.NewSchemaValidator(internal)
		if err != nil {
			return nil, err
		}
		// Objects are validated as creates, with one schema validator built
		// once (the ratcheting validator builds one per call to that end).
		validator := createValidator{validate.NewSchemaValidator(openapiSchema, nil, "", strfmt.Default)}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind}
		namespaced := crd.Spec.Scope == apiextensionsv1.NamespaceScoped
		strategy := customresource.NewStrategy(scheme.Scheme, namespaced, gvk, validator, nil, structural, nil, nil, nil)
		out[gvk] = &crdValidator{structural: structural, strategy: strategy, namespaced: namespaced}
	}
	return out, nil
}

// createValidator validates objects as the API server does on create, with
// one schema validator built once.
type createValidator struct{ v *validate.SchemaValidator }

func (c createValidator) Validate(obj any, _ ...apiservervalidation.ValidationOption) *validate.Result {
	return c.v.Validate(obj)
}

func (c createValidator) ValidateUpdate(obj, _ any, _ ...apiservervalidation.ValidationOption) *validate.Result {
	return c.v.Validate(obj)
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
		crd, err := v.crdFor(gvk)
		if err != nil {
			return append(out, errorAt("internal", "", "loading KubeRay CRDs: "+err.Error(), ""))
		}
		if crd == nil {
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
