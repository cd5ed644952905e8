package validation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	k8sjson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
)

// crdLibrary is a CRD version's schema as apiextensions-apiserver builds
// it — the structural schema, kube-openapi's schema validators, the CEL
// validator — each part compiled on first need: an object with a value of
// the wrong type needs that value's schema node only, one with an unknown
// field the structural schema, one that reaches a CEL rule the CEL
// validator of that rule's node.
type crdLibrary struct {
	// load returns the version's schema in apiextensions' internal form;
	// nodeAt, if set, the JSON of only the schema at the end of steps
	// (decodeReached decodes it), reading no more of the rest than it
	// must.
	load   func() (*apiextensions.JSONSchemaProps, error)
	nodeAt func(steps []schemaStep) ([]byte, error)
	check  *schemaCheck

	propsOnce   sync.Once
	props       *apiextensions.JSONSchemaProps
	propsErr    error
	propsLoaded atomic.Bool // props or propsErr is set

	// The kube-openapi schemas uncertain values were validated with:
	// nodeSchemas, whole nodes converted from the whole schema, by their
	// steps from the root (stepsKey); reachedSchemas, what values reached
	// of their nodes, read from the precompiled form, by steps and the
	// value's shape — at most maxReachedSchemas, of shapes up to
	// maxReachedShape bytes, so that values of ever new shapes are
	// validated in bounded memory (past the bound they are converted
	// each time, in the size of the value).
	valueMu        sync.Mutex
	nodeSchemas    map[string]*spec.Schema
	reachedSchemas map[string]*spec.Schema

	structuralOnce sync.Once
	structural     *structuralschema.Structural
	structuralErr  error

	celOnce sync.Once
	cel     *cel.Validator

	// celByNode: the CEL validator of each schema node's own rules, by
	// the node's rules (their first element: a copy of a Structural shares
	// it, and no two nodes do), compiled when an object first reaches it.
	celMu     sync.Mutex
	celByNode map[*apiextensionsv1.ValidationRule]*nodeCEL
	// celPlanOnce: rulesBelow, the plan nodes with rules at or under them
	// (complete), and ruleNodes, how the validator of every rule treats
	// each node with rules (upstreamRuleNodes).
	celPlanOnce sync.Once
	rulesBelow  map[*structuralPlan]bool
	ruleNodes   map[*apiextensionsv1.ValidationRule]ruleNodeTreatment
	everyRule   bool // rules in allOf: the validator of every rule, always
}

// nodeCEL is the CEL validator of one schema node's own rules.
type nodeCEL struct {
	once      sync.Once
	validator *cel.Validator
	panicked  any         // what compiling panicked with, rethrown to each caller
	compiled  atomic.Bool // validator or panicked is set
}

// ruleNodeTreatment is how the validator of every rule treats a schema
// node with rules.
type ruleNodeTreatment int

const (
	// neverEvaluated: the validator leaves the node out (the zero value,
	// for nodes upstreamRuleNodes does not list): its parent's CEL type
	// has no such field.
	neverEvaluated ruleNodeTreatment = iota
	// ownRules: the node's own validator finds what it finds there.
	ownRules
	// everyRuleNeeded: the node's CEL type there is not the one its own
	// schema gives (apiVersion, kind and metadata of a resource root), or
	// there is none: only the validator of every rule finds the same.
	everyRuleNeeded
)

func (l *crdLibrary) schemaProps() (*apiextensions.JSONSchemaProps, error) {
	l.propsOnce.Do(func() {
		l.props, l.propsErr = l.load()
		l.propsLoaded.Store(true)
	})
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

// validateUncertain validates obj with kube-openapi as a validator of the
// whole schema does, where the compiled check is not certain of it: each
// outermost value it is not certain of is validated by a validator of
// that value's schema alone, at the path the whole validator gives it —
// which is what the whole validator does at each item and property value,
// so the errors are word for word the same (TestValueValidatorsMatchWhole
// holds them together). A value of the wrong type converts the schema of
// that value, not the whole version's, and the precompiled form reads no
// more of the version than the way to that node.
func (l *crdLibrary) validateUncertain(obj any) (*validate.Result, error) {
	result := &validate.Result{}
	for _, u := range l.check.uncertainValues(obj, strfmt.Default, "", nil, nil) {
		s, err := l.valueSchema(u.steps, u.value)
		if err != nil {
			return nil, err
		}
		result.Merge(validate.NewSchemaValidator(s, nil, u.path, strfmt.Default).Validate(u.value))
	}
	return result, nil
}

// valueSchema is the kube-openapi schema at the end of steps for
// validating value, converted from that node alone as apiextensions'
// NewSchemaValidator converts the whole (a node's conversion depends on
// it and the nodes under it only). Read from the precompiled form, only
// what value reaches of the node is decoded and converted
// (decodeReached), and the schema is kept for values of value's shape.
func (l *crdLibrary) valueSchema(steps []schemaStep, value any) (*spec.Schema, error) {
	key := stepsKey(steps)
	cache := &l.nodeSchemas
	reachedOnly := l.nodeAt != nil && !l.propsLoaded.Load()
	if reachedOnly {
		cache = &l.reachedSchemas
		key += "\x00" + reachedShape(value) // stepsKey quotes every NUL
	}
	l.valueMu.Lock()
	s, ok := (*cache)[key]
	l.valueMu.Unlock()
	if ok {
		return s, nil
	}
	var props *apiextensions.JSONSchemaProps
	var err error
	if reachedOnly {
		var node []byte
		if node, err = l.nodeAt(steps); err == nil {
			if props, err = decodeReached(node, []any{value}); err != nil {
				err = fmt.Errorf("the schema at %s: %w", stepsKey(steps), err)
			}
		}
	} else {
		props, err = l.schemaProps()
		if err == nil {
			props, err = propsAt(props, steps)
		}
	}
	if err != nil {
		return nil, err
	}
	s = &spec.Schema{}
	if err := apiservervalidation.ConvertJSONSchemaPropsWithPostProcess(props, s, apiservervalidation.StripUnsupportedFormatsPostProcessorForVersion(environment.DefaultCompatibilityVersion())); err != nil {
		return nil, err
	}
	l.valueMu.Lock()
	defer l.valueMu.Unlock()
	if first, ok := (*cache)[key]; ok {
		return first, nil // converted meanwhile by another goroutine
	}
	if reachedOnly && (len(l.reachedSchemas) >= maxReachedSchemas || len(key) > maxReachedShape) {
		return s, nil
	}
	if *cache == nil {
		*cache = map[string]*spec.Schema{}
	}
	(*cache)[key] = s
	return s, nil
}

// The bounds of a library's reachedSchemas: how many, and the longest
// key (steps and shape) kept.
const (
	maxReachedSchemas = 256
	maxReachedShape   = 1 << 10
)

// stepsKey is steps as one string: a property name quoted, items "[]",
// additional properties "*".
func stepsKey(steps []schemaStep) string {
	var b strings.Builder
	for _, step := range steps {
		switch {
		case step.items:
			b.WriteString("[]")
		case step.additional:
			b.WriteString("*")
		default:
			b.WriteString(strconv.Quote(step.property))
		}
	}
	return b.String()
}

// propsAt is the schema at the end of steps from root.
func propsAt(root *apiextensions.JSONSchemaProps, steps []schemaStep) (*apiextensions.JSONSchemaProps, error) {
	s := root
	for i, step := range steps {
		var next *apiextensions.JSONSchemaProps
		switch {
		case step.items:
			if s.Items != nil {
				next = s.Items.Schema
			}
		case step.additional:
			if s.AdditionalProperties != nil {
				next = s.AdditionalProperties.Schema
			}
		default:
			if p, ok := s.Properties[step.property]; ok {
				next = &p
			}
		}
		if next == nil {
			return nil, fmt.Errorf("the schema has no node at %s", stepsKey(steps[:i+1]))
		}
		s = next
	}
	return s, nil
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

// validateCEL evaluates the CEL rules validating obj reaches, finding
// what the validator of every rule finds (TestStructuralPlanMatchesLibrary
// and TestValidateCELNodeByNode hold the two together): the CEL validator
// evaluates a node's rules only on a value that is there, so each node
// with rules that obj reaches is validated on its own, at the value there
// and with its path, by a validator compiled from that node's rules
// alone, once per node — but for the nodes the CEL validator leaves out,
// and those it gives another CEL type (upstreamRuleNodes), for which the
// validator of every rule is used. A version with many rules — an
// HTTPRoute has 77 — compiles, for one object, the few it reaches; many
// objects, the union of what they reach, each node once: compiling CEL is
// most of what a cold process spends on an object that reaches a rule.
// The nodes are validated in the order the CEL validator walks them, a
// node before those under it, sharing one cost budget.
func (l *crdLibrary) validateCEL(ctx context.Context, plan *structuralPlan, obj map[string]any) (field.ErrorList, error) {
	structural, err := l.structuralSchema()
	if err != nil {
		return nil, err
	}
	l.celPlanOnce.Do(func() {
		l.rulesBelow = map[*structuralPlan]bool{}
		markRulesBelow(plan, l.rulesBelow)
		l.ruleNodes, l.everyRule = upstreamRuleNodes(structural)
	})
	if l.everyRule {
		return l.validateEveryRule(ctx, obj)
	}
	reached := plan.ruleSites(structural, obj, nil, l.rulesBelow, nil)
	sites := reached[:0]
	for _, site := range reached {
		switch l.ruleNodes[&site.schema.XValidations[0]] {
		case neverEvaluated:
			continue
		case everyRuleNeeded:
			return l.validateEveryRule(ctx, obj)
		}
		sites = append(sites, site)
	}
	// The nodes not compiled yet are compiled side by side: a first object
	// that reaches several waits for the longest, not for their sum.
	nodes := make([]*nodeCEL, len(sites))
	var uncompiled []int // of sites, one per node
	for i, site := range sites {
		nodes[i] = l.nodeCEL(site)
		if !nodes[i].compiled.Load() && !slices.ContainsFunc(uncompiled, func(j int) bool { return nodes[j] == nodes[i] }) {
			uncompiled = append(uncompiled, i)
		}
	}
	var compiling sync.WaitGroup
	for _, i := range uncompiled {
		compiling.Go(func() { nodes[i].compile(sites[i], sites[i].plan == plan, l.rulesBelow) })
	}
	compiling.Wait()
	for _, n := range nodes {
		if n.panicked != nil {
			panic(n.panicked) // here, where the caller recovers it
		}
	}
	var errs field.ErrorList
	budget := int64(celconfig.RuntimeCELCostBudget)
	for i, site := range sites {
		var siteErrs field.ErrorList
		siteErrs, budget = nodes[i].validator.Validate(ctx, site.path, site.schema, site.value, nil, budget)
		errs = append(errs, siteErrs...)
		if budget < 0 {
			break // out of budget: the CEL validator stops there too
		}
	}
	return errs, nil
}

// upstreamRuleNodes walks the structural schema as apiextensions' CEL
// validator builds itself (cel.NewValidator: validator), CEL types
// included, and says how it treats each node with rules: a property its
// parent's CEL type does not have is left out with all under it (a
// parent without a type, such as x-kubernetes-preserve-unknown-fields
// alone, has none; a resource root's metadata has only name and
// generateName); a node reached with its own schema's CEL type finds the
// same with its own validator. everyRule: rules in allOf, which only the
// validator of every rule evaluates (the API server refuses them).
func upstreamRuleNodes(root *structuralschema.Structural) (nodes map[*apiextensionsv1.ValidationRule]ruleNodeTreatment, everyRule bool) {
	nodes = map[*apiextensionsv1.ValidationRule]ruleNodeTreatment{}
	var walk func(s *structuralschema.Structural, t *apiservercel.DeclType, resourceRoot, ownType bool)
	walk = func(s *structuralschema.Structural, t *apiservercel.DeclType, resourceRoot, ownType bool) {
		if allOfHasRules(s.ValueValidation) {
			everyRule = true
		}
		if len(s.XValidations) > 0 {
			treatment := ownRules
			if t == nil || !ownType {
				treatment = everyRuleNeeded
			}
			nodes[&s.XValidations[0]] = treatment
		}
		var elem *apiservercel.DeclType
		if t != nil {
			elem = t.ElemType
		}
		if s.Items != nil {
			walk(s.Items, elem, s.Items.XEmbeddedResource, ownType)
		}
		if a := s.AdditionalProperties; a != nil && a.Structural != nil {
			walk(a.Structural, elem, a.Structural.XEmbeddedResource, ownType)
		}
		for name, prop := range s.Properties {
			var fieldType *apiservercel.DeclType
			if escaped, ok := apiservercel.Escape(name); ok {
				if t == nil || t.Fields[escaped] == nil {
					continue
				}
				fieldType = t.Fields[escaped].Type
			} else if fieldType = model.SchemaDeclType(&prop, prop.XEmbeddedResource); fieldType == nil {
				continue
			}
			walk(&prop, fieldType, prop.XEmbeddedResource, ownType && !(resourceRoot && metaFields[name]))
		}
	}
	walk(root, model.SchemaDeclType(root, true), true, true)
	return nodes, everyRule
}

// validateEveryRule validates obj with the validator of every rule.
func (l *crdLibrary) validateEveryRule(ctx context.Context, obj map[string]any) (field.ErrorList, error) {
	full, structural, err := l.celValidator()
	if err != nil {
		return nil, err
	}
	errs, _ := full.Validate(ctx, nil, structural, obj, nil, celconfig.RuntimeCELCostBudget)
	return errs, nil
}

// nodeCEL is the entry of site's node.
func (l *crdLibrary) nodeCEL(site ruleSite) *nodeCEL {
	key := &site.schema.XValidations[0]
	l.celMu.Lock()
	defer l.celMu.Unlock()
	if l.celByNode == nil {
		l.celByNode = map[*apiextensionsv1.ValidationRule]*nodeCEL{}
	}
	entry := l.celByNode[key]
	if entry == nil {
		entry = &nodeCEL{}
		l.celByNode[key] = entry
	}
	return entry
}

// compile compiles the rules of site's node, once. root: the node is the
// object's root. below: the plan nodes with rules at or under them.
func (n *nodeCEL) compile(site ruleSite, root bool, below map[*structuralPlan]bool) {
	n.once.Do(func() {
		defer n.compiled.Store(true)
		defer func() { n.panicked = recover() }()
		own := withRulesOf(site.schema, site.plan, site.plan, below)
		// As apiextensions' validator does below the root: a node is a
		// resource's root when it is an embedded resource.
		n.validator = cel.NewValidator(own, root || site.schema.XEmbeddedResource, celconfig.PerCallLimit)
	})
}

// withRulesOf is s (whose plan is p) with the x-kubernetes-validations of
// every node but keep's left out, copying only the nodes on the way to
// those it changes. below: the plan nodes with rules at or under them.
func withRulesOf(s *structuralschema.Structural, p, keep *structuralPlan, below map[*structuralPlan]bool) *structuralschema.Structural {
	if s == nil || p == nil || !below[p] {
		return s
	}
	c := *s
	if len(c.XValidations) > 0 && p != keep {
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

// markRulesBelow records in below, for p and every node under it, whether
// it or a node under it has rules; it reports p's.
func markRulesBelow(p *structuralPlan, below map[*structuralPlan]bool) bool {
	if p == nil {
		return false
	}
	if has, ok := below[p]; ok {
		return has
	}
	has := p.celRules
	for _, child := range []*structuralPlan{p.items, p.additionalSchema} {
		has = markRulesBelow(child, below) || has
	}
	for _, child := range p.properties {
		has = markRulesBelow(child, below) || has
	}
	below[p] = has
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

// precompiledNodeAt reads from a precompiled version schema only the
// JSON of the schema at the end of steps (schemaNodeAt). The file is read
// on first need and kept (embed's ReadFile copies it on every call).
//
// Where each node lies is kept once found (by its steps' key, up to
// maxFoundNodes of them): a later lookup of it, or of a node under it,
// starts there instead of skipping from the root again.
func precompiledNodeAt(crdFile, version string) func(steps []schemaStep) ([]byte, error) {
	name := precompiledSchemaName(crdFile, version)
	read := sync.OnceValues(func() ([]byte, error) { return precompiledFS.ReadFile(name) })
	var mu sync.Mutex
	found := map[string][]byte{} // a slice of the file's data
	return func(steps []schemaStep) ([]byte, error) {
		data, err := read()
		if err != nil {
			return nil, err
		}
		keys := make([]string, len(steps)+1) // keys[i]: of steps[:i]
		for i := range steps {
			keys[i+1] = keys[i] + stepsKey(steps[i:i+1])
		}
		node, from := data, 0
		mu.Lock()
		for i := len(steps); i > 0; i-- {
			if n, ok := found[keys[i]]; ok {
				node, from = n, i
				break
			}
		}
		mu.Unlock()
		for i := from; i < len(steps); i++ {
			if node, err = nodeUnder(node, steps[i]); err != nil {
				return nil, fmt.Errorf("%s at %s: %w", name, keys[i+1], err)
			}
			mu.Lock()
			if len(found) < maxFoundNodes {
				found[keys[i+1]] = node
			}
			mu.Unlock()
		}
		return node, nil
	}
}

// maxFoundNodes bounds the node locations a precompiled library keeps
// (a key and a slice header each).
const maxFoundNodes = 4096

// schemaNodeAt is the JSON of the node at the end of steps in schema, the
// JSON of an apiextensions.JSONSchemaProps: the way there is found by
// skipping over the JSON of every other node, and nothing is decoded.
func schemaNodeAt(schema []byte, steps []schemaStep) ([]byte, error) {
	node := schema
	for i, step := range steps {
		var err error
		if node, err = nodeUnder(node, step); err != nil {
			return nil, fmt.Errorf("at %s: %w", stepsKey(steps[:i+1]), err)
		}
	}
	return node, nil
}

// nodeUnder is the JSON of the node one step under node.
func nodeUnder(node []byte, step schemaStep) ([]byte, error) {
	// The fields of apiextensions.JSONSchemaProps, as json.Marshal names
	// them.
	var path []string
	switch {
	case step.items:
		path = []string{"Items", "Schema"}
	case step.additional:
		path = []string{"AdditionalProperties", "Schema"}
	default:
		path = []string{"Properties", step.property}
	}
	for _, key := range path {
		var err error
		if node, err = memberValue(node, key); err != nil {
			return nil, err
		}
	}
	return node, nil
}

// memberValue is the JSON of the value of obj's member key, found by
// skipping over the others without decoding them (obj is a JSON object
// as json.Marshal writes one).
func memberValue(obj []byte, key string) ([]byte, error) {
	var found []byte
	errFound := errors.New("found")
	err := eachMember(obj, func(name, value []byte) error {
		if jsonStringIs(name, key) {
			found = value
			return errFound
		}
		return nil
	})
	switch {
	case err == errFound:
		return found, nil
	case err != nil:
		return nil, fmt.Errorf("looking for %q: %w", key, err)
	}
	return nil, fmt.Errorf("no member %q", key)
}

// eachMember calls f with the quoted name and the JSON value of each of
// obj's members in turn, skipping over the values without decoding them,
// until f returns an error.
func eachMember(obj []byte, f func(name, value []byte) error) error {
	i := skipJSONSpace(obj, 0)
	if i == len(obj) || obj[i] != '{' {
		return errors.New("not an object")
	}
	for i++; ; {
		i = skipJSONSpace(obj, i)
		if i < len(obj) && obj[i] == ',' {
			i = skipJSONSpace(obj, i+1)
		}
		if i < len(obj) && obj[i] == '}' {
			return nil
		}
		if i == len(obj) || obj[i] != '"' {
			return errors.New("an object cut short")
		}
		keyEnd, err := jsonValueEnd(obj, i)
		if err != nil {
			return err
		}
		name := obj[i:keyEnd]
		i = skipJSONSpace(obj, keyEnd)
		if i == len(obj) || obj[i] != ':' {
			return fmt.Errorf("a member %s without a value", name)
		}
		i = skipJSONSpace(obj, i+1)
		end, err := jsonValueEnd(obj, i)
		if err != nil {
			return err
		}
		if err := f(name, obj[i:end]); err != nil {
			return err
		}
		i = end
	}
}

// jsonValueEnd is the index just past the JSON value that starts at i.
func jsonValueEnd(data []byte, i int) (int, error) {
	if i == len(data) {
		return 0, errors.New("a value cut short")
	}
	switch data[i] {
	case '"':
		for j := i + 1; j < len(data); j++ {
			switch data[j] {
			case '\\':
				j++
			case '"':
				return j + 1, nil
			}
		}
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, err := jsonValueEnd(data, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
	default:
		j := i
		for j < len(data) && !strings.ContainsRune(",}] \t\r\n", rune(data[j])) {
			j++
		}
		return j, nil
	}
	return 0, errors.New("a value cut short")
}

func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n') {
		i++
	}
	return i
}

// jsonStringIs reports whether the JSON string quoted is s.
func jsonStringIs(quoted []byte, s string) bool {
	if !bytes.ContainsRune(quoted, '\\') {
		return string(quoted[1:len(quoted)-1]) == s
	}
	var unquoted string
	return json.Unmarshal(quoted, &unquoted) == nil && unquoted == s
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
