package validation

import (
	"fmt"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	k8sjson "k8s.io/apimachinery/pkg/util/json"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// crdLibrary is a CRD version's schema as apiextensions-apiserver builds
// it — the structural schema, kube-openapi's schema validator, the CEL
// validator — each part compiled on first need: an object with a wrong
// type needs the schema validator only, one with an unknown field the
// structural schema, one that reaches a CEL rule the CEL validator.
type crdLibrary struct {
	// load returns the version's schema in apiextensions' internal form.
	load  func() (*apiextensions.JSONSchemaProps, error)
	check *schemaCheck

	propsOnce sync.Once
	props     *apiextensions.JSONSchemaProps
	propsErr  error

	structuralOnce sync.Once
	structural     *structuralschema.Structural
	structuralErr  error

	schemaOnce sync.Once
	schema     createValidator
	schemaErr  error

	celOnce sync.Once
	cel     *cel.Validator
}

func (l *crdLibrary) schemaProps() (*apiextensions.JSONSchemaProps, error) {
	l.propsOnce.Do(func() { l.props, l.propsErr = l.load() })
	return l.props, l.propsErr
}

// structuralSchema is what pruning, defaulting, list types, embedded
// metadata and CEL work on.
func (l *crdLibrary) structuralSchema() (*structuralschema.Structural, error) {
	l.structuralOnce.Do(func() {
		props, err := l.schemaProps()
		if err != nil {
			l.structuralErr = err
			return
		}
		l.structural, l.structuralErr = structuralschema.NewStructural(props)
	})
	return l.structural, l.structuralErr
}

// schemaValidator validates objects as creates, with one kube-openapi
// validator built once (the ratcheting validator builds one per call to
// that end).
func (l *crdLibrary) schemaValidator() (createValidator, error) {
	l.schemaOnce.Do(func() {
		props, err := l.schemaProps()
		if err != nil {
			l.schemaErr = err
			return
		}
		_, openapiSchema, err := apiservervalidation.NewSchemaValidator(props)
		if err != nil {
			l.schemaErr = err
			return
		}
		l.schema = createValidator{check: l.check, full: validate.NewSchemaValidator(openapiSchema, nil, "", strfmt.Default)}
	})
	return l.schema, l.schemaErr
}

// celValidator compiles the version's CEL rules (nil: it has none).
func (l *crdLibrary) celValidator() (*cel.Validator, *structuralschema.Structural, error) {
	structural, err := l.structuralSchema()
	if err != nil {
		return nil, nil, err
	}
	l.celOnce.Do(func() { l.cel = cel.NewValidator(structural, true, celconfig.PerCallLimit) })
	return l.cel, structural, nil
}

// precompiledSchemaName is the file of a CRD version's schema in
// apiextensions' internal form, as JSON without descriptions (the
// library's side loads it in a few milliseconds; the verbatim YAML takes
// a hundred).
func precompiledSchemaName(crdFile, version string) string {
	return "precompiled/" + strings.TrimSuffix(strings.TrimPrefix(crdFile, "crds/"), ".yaml") + "." + version + ".json"
}

// loadPrecompiledSchema reads a precompiled version schema.
func loadPrecompiledSchema(crdFile, version string) func() (*apiextensions.JSONSchemaProps, error) {
	return func() (*apiextensions.JSONSchemaProps, error) {
		name := precompiledSchemaName(crdFile, version)
		data, err := precompiledFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		props := &apiextensions.JSONSchemaProps{}
		if err := k8sjson.Unmarshal(data, props); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return props, nil
	}
}

// withoutDescriptions is s with every description dropped: validation
// never reads them, and they are most of a CRD's bytes.
func withoutDescriptions(s *apiextensions.JSONSchemaProps) {
	if s == nil {
		return
	}
	s.Description = ""
	each := func(m map[string]apiextensions.JSONSchemaProps) {
		for k, v := range m {
			withoutDescriptions(&v)
			m[k] = v
		}
	}
	each(s.Properties)
	each(s.PatternProperties)
	each(s.Definitions)
	for _, list := range [][]apiextensions.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range list {
			withoutDescriptions(&list[i])
		}
	}
	withoutDescriptions(s.Not)
	if s.Items != nil {
		withoutDescriptions(s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			withoutDescriptions(&s.Items.JSONSchemas[i])
		}
	}
	if s.AdditionalProperties != nil {
		withoutDescriptions(s.AdditionalProperties.Schema)
	}
	if s.AdditionalItems != nil {
		withoutDescriptions(s.AdditionalItems.Schema)
	}
	for k, v := range s.Dependencies {
		withoutDescriptions(v.Schema)
		s.Dependencies[k] = v
	}
}
