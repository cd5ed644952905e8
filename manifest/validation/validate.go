package validation

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"go.yaml.in/yaml/v3"
	"gridweave.dev/manifest/internal/jsontree"
	"gridweave.dev/manifest/internal/strictyaml"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	structuralobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	kjson "sigs.k8s.io/json"
)

// Validator validates objects in process with the API server's semantics:
// ray.io kinds against KubeRay's CRD schemas (embedded at the pinned
// version) through k8s.io/apiextensions-apiserver — unknown fields
// (pruning), nulls the schema does not allow (dropped), defaults, the
// structural schema, embedded metadata, list types and CEL rules, as the
// create path runs them — and against KubeRay's
// own validation rules; built-in kinds by a strict decode into their Go
// types and apimachinery's metadata validation; and, inside every pod
// template, the checks no schema makes (names, labels, duplicate env
// names, GPUs only in requests, requests above limits).
//
// A Validator loads each embedded CRD once, on first use, and is safe for
// concurrent use. A valid object needs only the CRD's precompiled fast
// paths (precompiled.go); the library's schemas and CEL rules are built
// from the precompiled schema (library.go) only when an object needs them:
// when the fast paths are not certain it is valid, when something is
// pruned, or when it reaches a CEL rule.
type Validator struct {
	mu     sync.Mutex
	files  map[string]*crdFile // by CRD file, loaded on first use
	target KubernetesVersion   // the release whose API versions count
}

// crdFile is one embedded CRD, loaded once.
type crdFile struct {
	once     sync.Once
	err      error
	versions map[schema.GroupVersionKind]*crdValidator
}

// crdValidator is one served version of an embedded CRD: its fast paths,
// and the library's side, compiled on first need.
type crdValidator struct {
	gvk schema.GroupVersionKind
	// plan walks the structural schema fast; root is it as a resource root.
	plan, root *structuralPlan
	// check confirms, fast, that an object satisfies the OpenAPI schema.
	check      *schemaCheck
	namespaced bool
	// statusSubresource: the version serves /status, so a create's status
	// is dropped.
	statusSubresource bool
	// embedded: the schema has x-kubernetes-embedded-resource somewhere,
	// so embedded objects' metadata must be validated.
	embedded bool
	// hasCELRules: some node of the schema has x-kubernetes-validations.
	hasCELRules bool
	// lib is the library's side of the version, compiled on first need.
	lib *crdLibrary
}

// NewValidator returns a Validator; each CRD is loaded the first time an
// object of its kind is validated, so only the kinds in use stay in
// memory.
func NewValidator(opts ...Option) *Validator {
	v := &Validator{files: map[string]*crdFile{}, target: DefaultKubernetesVersion}
	for _, opt := range opts {
		opt(v)
	}
	return v
}

// crdFor returns an embedded CRD's kind and version (nil when it serves no
// such version), from its precompiled form.
func (v *Validator) crdFor(gvk schema.GroupVersionKind) (*crdValidator, error) {
	name := crdFileName(gvk.Group, gvk.Kind)
	v.mu.Lock()
	f, ok := v.files[name]
	if !ok {
		f = &crdFile{}
		v.files[name] = f
	}
	v.mu.Unlock()
	f.once.Do(func() {
		data, err := precompiledFS.ReadFile(precompiledName(name))
		if err != nil {
			return // no such kind: the caller reports it
		}
		f.versions, f.err = decodePrecompiled(data, name)
	})
	if f.err != nil {
		return nil, f.err
	}
	return f.versions[gvk], nil
}

// validateCreate is what the API server runs on the create of a custom
// resource — customResourceStrategy.Validate of apiextensions-apiserver,
// step by step, calling the same functions (its validator type is not
// exported) — except the embedded-resource metadata walk, skipped when the
// schema has no x-kubernetes-embedded-resource: it could find nothing and
// costs a walk of the whole object. TestValidateCreateMatchesStrategy holds
// this to the strategy's output. The library's side is used only where
// the fast paths are not certain.
func (c *crdValidator) validateCreate(ctx context.Context, u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if u.GetKind() != c.gvk.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), u.GetKind(), fmt.Sprintf("must be %v", c.gvk.Kind)))
	}
	if u.GetAPIVersion() != c.gvk.Group+"/"+c.gvk.Version {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), fmt.Sprintf("must be %v", c.gvk.Group+"/"+c.gvk.Version)))
	}
	libraryFailed := func(err error) field.ErrorList {
		return append(errs, field.InternalError(nil, fmt.Errorf("loading the embedded CRD: %w", err)))
	}
	if len(errs) == 0 {
		errs = append(errs, apivalidation.ValidateObjectMetaAccessor(u, c.namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))...)
		if !c.check.certainlyValid(u.Object, strfmt.Default) {
			result, err := c.lib.validateUncertain(u.Object)
			if err != nil {
				return libraryFailed(err)
			}
			errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.UnstructuredContent(), validated{result})...)
		}
	}
	if c.embedded {
		structural, err := c.lib.structuralSchema()
		if err != nil {
			return libraryFailed(err)
		}
		errs = append(errs, structuralobjectmeta.Validate(nil, u.Object, structural, false)...)
	}
	if !c.plan.listTypesCertainlyValid(u.Object) {
		structural, err := c.lib.structuralSchema()
		if err != nil {
			return libraryFailed(err)
		}
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, structural, u.Object)...)
	}
	if !c.hasCELRules {
		return errs // no CEL rules: nothing to be blocked
	}
	if blocked := blockingError(errs); blocked != nil {
		return append(errs, blocked)
	}
	if !c.plan.reachesCELRule(u.Object) {
		return errs // no rule reached: the CEL validator would find nothing
	}
	celErrs, err := c.lib.validateCEL(ctx, c.plan, u.Object)
	if err != nil {
		return libraryFailed(err)
	}
	return append(errs, celErrs...)
}

// blockingError is the strategy's: errors of these types stop CEL rules.
func blockingError(errs field.ErrorList) *field.Error {
	for _, err := range errs {
		switch err.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")
		}
	}
	return nil
}

// validated is a schema validator whose answer is already known: it lets
// apiextensions word a result as field errors, as it does the API
// server's.
type validated struct{ result *validate.Result }

func (v validated) Validate(any, ...apiservervalidation.ValidationOption) *validate.Result {
	return v.result
}

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
	if u.GetName() == "" && u.GetGenerateName() != "" {
		// The API server names the object before it validates it.
		u = u.DeepCopy()
		u.SetName(generatedName(u.GetGenerateName()))
	}
	versionFindings, removed := v.apiVersionFindings(gvk, func(id string, severity Severity, path, msg, fix string) Finding {
		return Finding{ID: id, Severity: severity, Object: obj, Path: path, Message: msg, Fix: fix}
	})
	if removed {
		return versionFindings // the API server refuses it before anything else
	}
	out := versionFindings
	if u.GetName() == "" && u.GetGenerateName() == "" {
		if !reviewKinds[gvk.Kind] { // reviews are created without a name
			out = append(out, errorAt("metadata", "metadata.name", "is required", ""))
		}
	}

	if crdGroups[gvk.Group] {
		crd, err := v.crdFor(gvk)
		if err != nil {
			return append(out, errorAt("internal", "", "loading the embedded CRDs: "+err.Error(), ""))
		}
		if crd == nil {
			msg, fix := fmt.Sprintf("the embedded CRDs serve no %s %s", gvk.GroupVersion(), gvk.Kind), ""
			if gvk.Group == rayv1.GroupVersion.Group {
				msg, fix = fmt.Sprintf("KubeRay %s serves no %s %s", KubeRayVersion, gvk.GroupVersion(), gvk.Kind), "use apiVersion ray.io/v1"
			}
			return append(out, errorAt("type", "apiVersion", msg, fix))
		}
		found, admitted := v.validateCR(u, crd, errorAt)
		out = append(out, found...)
		if gvk.Group != rayv1.GroupVersion.Group {
			return out
		}
		// The operator reads the object as the API server stored it:
		// pruned and defaulted.
		rules, rayTemplates, decoded := kubeRayRules(admitted, errorAt)
		out = append(out, rules...)
		if !decoded {
			rayTemplates = podTemplates(admitted)
		}
		for _, tmpl := range rayTemplates {
			out = append(out, podTemplateFindings(obj, gvk.Kind, tmpl.path, tmpl.spec, tmpl.labels)...)
		}
		return out
	} else if t := builtinType(gvk); t != nil {
		namespaced := !clusterScoped[gvk.GroupKind()]
		found, typed := strictBuiltin(u, t, errorAt)
		if accessor, err := meta.Accessor(typed); typed != nil && err == nil {
			out = append(out, objectMetaFindings(accessor, namespaced, nameRule(gvk.Kind), errorAt)...)
		} else {
			out = append(out, metadataFindings(u, namespaced, nameRule(gvk.Kind), errorAt)...)
		}
		out = append(out, found...)
		if typed != nil {
			for _, tmpl := range typedPodTemplates(typed) {
				out = append(out, podTemplateFindings(obj, gvk.Kind, tmpl.path, tmpl.spec, tmpl.labels)...)
			}
			return out
		}
	} else {
		if _, historical := lifecycleOf(gvk); !strings.Contains(gvk.Group, ".") && !historical {
			// A custom resource's group has a dot: this one is Kubernetes' own,
			// and it serves no such kind.
			return append(out, errorAt("type", "kind",
				fmt.Sprintf("Kubernetes serves no kind %s in %s", gvk.Kind, gvk.GroupVersion()), "check the kind and apiVersion"))
		}
		out = append(out, Finding{ID: "unknown-kind", Severity: SeverityWarning, Object: obj, Path: "kind",
			Message: fmt.Sprintf("%s %s has no embedded schema; only its metadata was checked", gvk.GroupVersion(), gvk.Kind)})
		out = append(out, metadataFindings(u, true, apivalidation.NameIsDNSSubdomain, errorAt)...)
	}
	for _, tmpl := range podTemplates(u) {
		out = append(out, podTemplateFindings(obj, gvk.Kind, tmpl.path, tmpl.spec, tmpl.labels)...)
	}
	return out
}

// generatedName is a name the API server could give for generateName
// (names.SimpleNameGenerator): the prefix cut to 58 characters and five
// random ones, fixed here so that lint output is stable.
func generatedName(prefix string) string {
	if len(prefix) > names.MaxGeneratedNameLength {
		prefix = prefix[:names.MaxGeneratedNameLength]
	}
	return prefix + "b2c4d"
}

// validateCR returns what the API server would refuse, and the object as
// it would store it.
//
// It takes the object the way the API server's create path does
// (apiextensions-apiserver): decoding it (schemaCoercingDecoder: the
// metadata read as ObjectMeta, pruning of unknown fields,
// PruneNonNullableNullsWithoutDefaults — so a key written with no value
// is dropped where the schema allows no null), defaulting it
// (unstructuredDefaulter), putting it in the request's namespace, then
// customResourceStrategy.PrepareForCreate (no status when the status
// subresource is on; generation 1) and Validate (validateCreate).
func (v *Validator) validateCR(u *unstructured.Unstructured, crd *crdValidator, errorAt func(id, path, msg, fix string) Finding) ([]Finding, *unstructured.Unstructured) {
	var out []Finding
	var obj *unstructured.Unstructured
	pruned := u.Object
	if crd.root.prunes(u.Object) {
		pruned = runtime.DeepCopyJSON(u.Object)
		for _, p := range crd.root.prune(pruned) {
			out = append(out, errorAt("unknown-field", p, "unknown field (the API server drops it, or refuses it with fieldValidation=Strict)", "check the spelling against the CRD"))
		}
	}
	// Drop the nulls and default without copying what that leaves alone.
	// obj shares those parts with u, so from here on it is only read — but
	// for the root and metadata maps, copied below.
	obj = &unstructured.Unstructured{Object: crd.plan.nullsPrunedAndDefaulted(pruned).(map[string]any)}
	// The API server reads metadata the same way; the strategy below
	// validates its values.
	if !metadataDecodes(obj.Object) {
		if _, _, err := structuralobjectmeta.GetObjectMeta(obj.Object, false); err != nil {
			out = append(out, errorAt("metadata", "metadata", err.Error(), ""))
		}
	}
	obj = crd.prepareForCreate(obj)
	unnamed := obj.GetName() == "" && obj.GetGenerateName() == ""
	for _, e := range crd.validateCreate(context.Background(), obj) {
		if e.Field == "<nil>" && strings.Contains(e.Detail, "not checked because the object was invalid") {
			continue // the errors that blocked CEL are reported already
		}
		id := "schema"
		if e.Field == "metadata" || strings.HasPrefix(e.Field, "metadata.") {
			if unnamed && e.Field == "metadata.name" {
				continue // reported once already
			}
			id = "metadata"
		}
		out = append(out, errorAt(id, e.Field, strings.TrimPrefix(e.ErrorBody(), e.Field+": "), ""))
	}
	return out, obj
}

// prepareForCreate returns obj as the create path hands it to validation:
// in the request's namespace ("default" when it names none: the namespace
// comes from the context at apply time), then
// customResourceStrategy.PrepareForCreate — the status dropped when the
// status subresource is on (a create cannot set it), generation 1. It
// changes copies of the root and metadata maps only, which obj may share
// with the user's object.
func (c *crdValidator) prepareForCreate(obj *unstructured.Unstructured) *unstructured.Unstructured {
	root := maps.Clone(obj.Object)
	if c.statusSubresource {
		delete(root, "status")
	}
	meta, _ := root["metadata"].(map[string]any) // not a map: reported above
	meta = maps.Clone(meta)
	if meta == nil {
		meta = map[string]any{}
	}
	if ns, _ := meta["namespace"].(string); c.namespaced && ns == "" {
		meta["namespace"] = "default"
	}
	meta["generation"] = int64(1)
	root["metadata"] = meta
	return &unstructured.Unstructured{Object: root}
}

func metadataFindings(u *unstructured.Unstructured, namespaced bool, names apivalidation.ValidateNameFunc, errorAt func(id, path, msg, fix string) Finding) []Finding {
	meta := &metav1.ObjectMeta{}
	m, _, _ := unstructured.NestedMap(u.Object, "metadata")
	data, _ := jsontree.Marshal(m)
	if err := json.Unmarshal(data, meta); err != nil {
		return []Finding{errorAt("metadata", "metadata", err.Error(), "")}
	}
	return objectMetaFindings(meta, namespaced, names, errorAt)
}

// metadataDecodes reports whether an object's metadata certainly decodes
// into ObjectMeta the way objectmeta.GetObjectMeta decodes it (encoding/json,
// which also matches keys case-insensitively: any key that is not exactly
// a field's name is left to it).
func metadataDecodes(obj map[string]any) bool {
	m, ok := obj["metadata"].(map[string]any)
	if !ok {
		return obj["metadata"] == nil
	}
	fields := fieldsOf(objectMetaType)
	for k := range m {
		if _, known := fields[k]; !known {
			return false
		}
	}
	return decodeValue(m, reflect.New(objectMetaType).Elem()) == nil
}

var objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()

// objectMetaFindings validates decoded metadata as the API server does.
func objectMetaFindings(meta metav1.Object, namespaced bool, names apivalidation.ValidateNameFunc, errorAt func(id, path, msg, fix string) Finding) []Finding {
	var out []Finding
	if meta.GetNamespace() == "" && namespaced {
		meta = &namespacedMeta{meta} // namespaces come from the context at apply time
	}
	for _, e := range apivalidation.ValidateObjectMetaAccessor(meta, namespaced, names, field.NewPath("metadata")) {
		if meta.GetName() == "" && e.Field == "metadata.name" {
			continue // reported once already
		}
		out = append(out, errorAt("metadata", e.Field, strings.TrimPrefix(e.ErrorBody(), e.Field+": "), ""))
	}
	return out
}

// namespacedMeta reads as being in the default namespace.
type namespacedMeta struct{ metav1.Object }

func (namespacedMeta) GetNamespace() string { return "default" }

// strictBuiltin decodes the object into its Go type the strict way: every
// key must be a field of the type, every value of its type.
//
// It also returns the decoded object, or nil when it does not decode.
func strictBuiltin(u *unstructured.Unstructured, t reflect.Type, errorAt func(id, path, msg, fix string) Finding) ([]Finding, any) {
	data, err := jsontree.Marshal(u.Object)
	if err != nil {
		return []Finding{errorAt("decode", "", err.Error(), "")}, nil
	}
	// The API server's strict decoding first: a clean object (the steady
	// state) is done; any complaint is located precisely below.
	typed := reflect.New(t).Interface()
	if strictErrs, err := kjson.UnmarshalStrict(data, typed); err == nil && len(strictErrs) == 0 {
		return builtinSemantics(typed, errorAt), typed
	}
	var node yaml.Node
	if err := yaml.Unmarshal(data, &node); err != nil || len(node.Content) == 0 {
		return []Finding{errorAt("decode", "", fmt.Sprint(err), "")}, nil
	}
	d := strictyaml.Decoder{JSONScalars: true}
	generic, err := d.Convert(node.Content[0], t)
	if err != nil {
		if se, ok := err.(*strictyaml.Error); ok {
			id := "schema"
			if strings.HasPrefix(se.Problem, "unknown field") {
				id = "unknown-field"
			}
			return []Finding{errorAt(id, se.Path, se.Problem, "")}, nil
		}
		return []Finding{errorAt("decode", "", err.Error(), "")}, nil
	}
	typed = reflect.New(t).Interface()
	js, _ := jsontree.Marshal(generic)
	if err := json.Unmarshal(js, typed); err != nil {
		return []Finding{errorAt("schema", "", err.Error(), "")}, nil
	}
	return builtinSemantics(typed, errorAt), typed
}
