package validation

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

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

	// celByRules: CEL validators of the version's rules reached by the
	// objects seen, by the set of rule nodes reached (celRulesKey).
	celMu       sync.Mutex
	celByRules  map[string]*reachedCEL
	rulesBelowN map[*structuralPlan]bool
	// ruleNodes counts the version's nodes with rules (0: not yet);
	// compiledNodes those the validators in celByRules compiled.
	ruleNodes, compiledNodes int
	// everySet: compile a validator for every set reached (tests).
	everySet bool
}

// reachedCEL is a CEL validator compiled for some of a version's rules,
// and the schema it walks.
type reachedCEL struct {
	once       sync.Once
	validator  *cel.Validator
	structural *structuralschema.Structural
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

// celValidatorReaching is a CEL validator that compiles only the rules of
// the nodes in reached (and, where the plan shares a node among identical
// subtrees, of the nodes that share it): the CEL validator evaluates a
// node's rules only on a value that is there, so on an object that reaches
// no other rule node it finds exactly what the validator of every rule
// finds (TestStructuralPlanMatchesLibrary holds the two together). A
// version with many rules — an HTTPRoute has 77 — compiles, for one object,
// the few it reaches: compiling CEL is most of what a cold process spends
// on an object that reaches a rule.
func (l *crdLibrary) celValidatorReaching(plan *structuralPlan, reached []*structuralPlan) (*cel.Validator, *structuralschema.Structural, error) {
	structural, err := l.structuralSchema()
	if err != nil {
		return nil, nil, err
	}
	key, n := celRulesKey(reached)
	l.celMu.Lock()
	if l.celByRules == nil {
		l.celByRules, l.rulesBelowN = map[string]*reachedCEL{}, map[*structuralPlan]bool{}
		l.ruleNodes = countRuleNodes(plan, map[*structuralPlan]bool{})
	}
	entry := l.celByRules[key]
	// Compiling rules costs about the same per node: validators of the
	// rules reached stop once they would have compiled as many nodes as
	// the validator of every rule, which then serves every object.
	if entry == nil && !l.everySet && (n >= l.ruleNodes || l.compiledNodes+n > l.ruleNodes) {
		l.celMu.Unlock()
		return l.celValidator()
	}
	if entry == nil {
		l.compiledNodes += n
		entry = &reachedCEL{}
		l.celByRules[key] = entry
		keep := make(map[*structuralPlan]bool, len(reached))
		for _, p := range reached {
			keep[p] = true
		}
		entry.structural = withRulesOf(structural, plan, keep, l.rulesBelowN)
	}
	l.celMu.Unlock()
	entry.once.Do(func() { entry.validator = cel.NewValidator(entry.structural, true, celconfig.PerCallLimit) })
	if entry.validator == nil {
		// The nodes reached have rules only in allOf, which NewValidator
		// does not look for on its own: the full validator evaluates them.
		return l.celValidator()
	}
	return entry.validator, entry.structural, nil
}

// celRulesKey names a set of rule nodes; n is how many it has.
func celRulesKey(reached []*structuralPlan) (key string, n int) {
	ids := make([]uintptr, len(reached))
	for i, p := range reached {
		ids[i] = uintptr(unsafe.Pointer(p))
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(strconv.FormatUint(uint64(id), 36))
		b.WriteByte(' ')
	}
	return b.String(), len(ids)
}

// countRuleNodes counts the nodes with rules at and under p.
func countRuleNodes(p *structuralPlan, seen map[*structuralPlan]bool) int {
	if p == nil || seen[p] {
		return 0
	}
	seen[p] = true
	n := countRuleNodes(p.items, seen) + countRuleNodes(p.additionalSchema, seen)
	if p.celRules {
		n++
	}
	for _, child := range p.properties {
		n += countRuleNodes(child, seen)
	}
	return n
}

// withRulesOf is s (whose plan is p) with the x-kubernetes-validations of
// the nodes not in keep left out, copying only the nodes on the way to
// those it changes. below memoizes rulesBelow.
func withRulesOf(s *structuralschema.Structural, p *structuralPlan, keep, below map[*structuralPlan]bool) *structuralschema.Structural {
	if s == nil || p == nil || !rulesBelow(p, below) {
		return s
	}
	c := *s
	if len(c.XValidations) > 0 && !keep[p] {
		c.XValidations = nil
	}
	if len(s.Properties) > 0 {
		c.Properties = make(map[string]structuralschema.Structural, len(s.Properties))
		for name, prop := range s.Properties {
			c.Properties[name] = *withRulesOf(&prop, p.properties[name], keep, below)
		}
	}
	c.Items = withRulesOf(s.Items, p.items, keep, below)
	if a := s.AdditionalProperties; a != nil && a.Structural != nil {
		c.AdditionalProperties = &structuralschema.StructuralOrBool{Structural: withRulesOf(a.Structural, p.additionalSchema, keep, below), Bool: a.Bool}
	}
	return &c
}

// rulesBelow reports whether p or a node under it has rules.
func rulesBelow(p *structuralPlan, memo map[*structuralPlan]bool) bool {
	if p == nil {
		return false
	}
	if v, ok := memo[p]; ok {
		return v
	}
	has := p.celRules || rulesBelow(p.items, memo) || rulesBelow(p.additionalSchema, memo)
	for _, child := range p.properties {
		has = has || rulesBelow(child, memo)
	}
	memo[p] = has
	return has
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
