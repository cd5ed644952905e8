package validation

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	sigsyaml "sigs.k8s.io/yaml"
)

// compileCRD compiles a verbatim embedded CRD, fast paths and library side,
// the way apiextensions-apiserver reads it: what precompiled/ is generated
// from (go generate runs TestPrecompiledMatchesCRDs -update) and held to.
func compileCRD(name string) (map[schema.GroupVersionKind]*crdValidator, error) {
	data, err := embeddedCRDs.ReadFile(name)
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
		check := compileSchemaCheck(openapiSchema, strfmt.Default)
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Spec.Names.Kind}
		plan := compileStructuralPlan(structural)
		out[gvk] = &crdValidator{
			gvk: gvk, check: check, namespaced: crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			statusSubresource: ver.Subresources != nil && ver.Subresources.Status != nil,
			plan:              plan, root: plan.rootPlan(),
			embedded:    hasEmbeddedResource(structural),
			hasCELRules: hasCELRules(structural),
			lib: &crdLibrary{
				load:  func() (*apiextensions.JSONSchemaProps, error) { return internal, nil },
				check: check,
			},
		}
	}
	return out, nil
}

// hasCELRules reports whether s or any schema below it has
// x-kubernetes-validations.
func hasCELRules(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if len(s.XValidations) > 0 {
		return true
	}
	for _, p := range s.Properties {
		if hasCELRules(&p) {
			return true
		}
	}
	if s.AdditionalProperties != nil && hasCELRules(s.AdditionalProperties.Structural) {
		return true
	}
	return hasCELRules(s.Items)
}

// hasEmbeddedResource reports whether s or any schema below it is an
// x-kubernetes-embedded-resource.
func hasEmbeddedResource(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if s.XEmbeddedResource {
		return true
	}
	for _, p := range s.Properties {
		if hasEmbeddedResource(&p) {
			return true
		}
	}
	if s.AdditionalProperties != nil && hasEmbeddedResource(s.AdditionalProperties.Structural) {
		return true
	}
	return hasEmbeddedResource(s.Items)
}
