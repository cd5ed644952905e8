package validation

import (
	"bytes"
	"embed"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	k8sjson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The fast paths of every embedded CRD, compiled ahead of time: a fresh
// process validating a valid object needs only these, a few kilobytes
// decoded in a millisecond or two, instead of parsing up to 1.35 MB of
// YAML and building the library's schemas. They are written by
// `go generate` (TestPrecompiledMatchesCRDs with -update), which compiles
// the verbatim CRDs in crds/ the way the library path does; the same test
// fails when they differ.
//
//go:generate go test -run TestPrecompiledMatchesCRDs -update .
//go:embed precompiled/*.gob
var precompiledFS embed.FS

// precompiledName is the file of a CRD file's precompiled fast paths.
func precompiledName(crdFile string) string {
	return "precompiled/" + strings.TrimSuffix(strings.TrimPrefix(crdFile, "crds/"), ".yaml") + ".gob"
}

// precompiledFile is the fast-path part of one embedded CRD file: its
// served versions, and the nodes of their structural plans and schema
// checks as flat tables. Identical subtrees — a pod template's schema
// appears many times in a CRD — are stored once. A reference is an index
// into its table plus one; 0 is none.
type precompiledFile struct {
	Kinds  []precompiledKind
	Plans  []planRecord
	Checks []checkRecord
}

type precompiledKind struct {
	Group, Version, Kind                    string
	Namespaced, StatusSubresource, Embedded bool
	HasCELRules                             bool
	Plan, Check                             int32
}

type planRecord struct {
	PropertyNames []string
	Properties    []int32
	Additional    bool
	AdditionalRef int32
	Items         int32

	PreserveUnknownFields, EmbeddedResource, Nullable, CELRules bool

	Default     []byte // JSON; nil: no default
	Defaulted   []string
	ListType    string
	ListMapKeys []string
}

type checkRecord struct {
	Types                  []string
	Nullable               bool
	Format                 string
	FormatChecked          bool
	Enum                   []byte // JSON; nil: no enum
	MaxLength, MinLength   optional[int64]
	Pattern                *string
	Maximum, Minimum       optional[float64]
	ExclusiveMaximum       bool
	ExclusiveMinimum       bool
	Items                  int32
	MaxItems, MinItems     optional[int64]
	PropertyNames          []string
	Properties             []int32
	Required               []string
	AdditionalProperties   int32
	NoAdditionalProperties bool
	MaxProperties          optional[int64]
	MinProperties          optional[int64]
	AllOf, AnyOf           []int32
	Undecidable            bool
}

// optional is a bound that may be absent. (gob sends a pointer to zero as
// no pointer at all, which would turn `minimum: 0` into no minimum.)
type optional[T int64 | float64] struct {
	Set   bool
	Value T
}

func optionalOf[T int64 | float64](p *T) optional[T] {
	if p == nil {
		return optional[T]{}
	}
	return optional[T]{Set: true, Value: *p}
}

func (o optional[T]) pointer() *T {
	if !o.Set {
		return nil
	}
	v := o.Value
	return &v
}

// encodePrecompiled writes the fast paths of a CRD file's versions,
// in a stable order, so the same CRDs give the same bytes.
func encodePrecompiled(versions map[schema.GroupVersionKind]*crdValidator) ([]byte, error) {
	e := &precompiler{plans: map[string]int32{}, checks: map[string]int32{}}
	gvks := make([]schema.GroupVersionKind, 0, len(versions))
	for gvk := range versions {
		gvks = append(gvks, gvk)
	}
	slices.SortFunc(gvks, func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	for _, gvk := range gvks {
		c := versions[gvk]
		plan, err := e.plan(c.plan)
		if err != nil {
			return nil, err
		}
		check, err := e.check(c.check)
		if err != nil {
			return nil, err
		}
		e.out.Kinds = append(e.out.Kinds, precompiledKind{
			Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind,
			Namespaced: c.namespaced, StatusSubresource: c.statusSubresource, Embedded: c.embedded,
			HasCELRules: c.hasCELRules, Plan: plan, Check: check,
		})
	}
	var buf bytes.Buffer
	if err := gob.NewEncoder(&buf).Encode(&e.out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type precompiler struct {
	out           precompiledFile
	plans, checks map[string]int32 // a record's JSON → its reference
}

func (e *precompiler) plan(p *structuralPlan) (int32, error) {
	if p == nil {
		return 0, nil
	}
	r := planRecord{
		Additional: p.additional, PreserveUnknownFields: p.preserveUnknownFields,
		EmbeddedResource: p.embeddedResource, Nullable: p.nullable, CELRules: p.celRules,
		Defaulted: p.defaulted, ListType: p.listType, ListMapKeys: p.listMapKeys,
	}
	var err error
	if p.defaultValue != nil {
		if r.Default, err = json.Marshal(p.defaultValue); err != nil {
			return 0, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.properties)) {
		ref, err := e.plan(p.properties[name])
		if err != nil {
			return 0, err
		}
		r.PropertyNames, r.Properties = append(r.PropertyNames, name), append(r.Properties, ref)
	}
	if r.AdditionalRef, err = e.plan(p.additionalSchema); err != nil {
		return 0, err
	}
	if r.Items, err = e.plan(p.items); err != nil {
		return 0, err
	}
	return intern(e.plans, &e.out.Plans, r)
}

func (e *precompiler) check(c *schemaCheck) (int32, error) {
	if c == nil {
		return 0, nil
	}
	r := checkRecord{
		Types: c.types, Nullable: c.nullable, Format: c.format, FormatChecked: c.formatChecked,
		MaxLength: optionalOf(c.maxLength), MinLength: optionalOf(c.minLength),
		Maximum: optionalOf(c.maximum), Minimum: optionalOf(c.minimum),
		ExclusiveMaximum: c.exclusiveMaximum, ExclusiveMinimum: c.exclusiveMinimum,
		MaxItems: optionalOf(c.maxItems), MinItems: optionalOf(c.minItems), Required: c.required,
		NoAdditionalProperties: c.noAdditionalProperties,
		MaxProperties:          optionalOf(c.maxProperties), MinProperties: optionalOf(c.minProperties),
		Undecidable: c.undecidable,
	}
	var err error
	if c.enum != nil {
		if r.Enum, err = json.Marshal(c.enum); err != nil {
			return 0, err
		}
	}
	if c.pattern != nil {
		pattern := c.pattern.String()
		r.Pattern = &pattern
	}
	for _, name := range slices.Sorted(maps.Keys(c.properties)) {
		ref, err := e.check(c.properties[name])
		if err != nil {
			return 0, err
		}
		r.PropertyNames, r.Properties = append(r.PropertyNames, name), append(r.Properties, ref)
	}
	if r.Items, err = e.check(c.items); err != nil {
		return 0, err
	}
	if r.AdditionalProperties, err = e.check(c.additionalProperties); err != nil {
		return 0, err
	}
	for _, sub := range c.allOf {
		ref, err := e.check(sub)
		if err != nil {
			return 0, err
		}
		r.AllOf = append(r.AllOf, ref)
	}
	for _, sub := range c.anyOf {
		ref, err := e.check(sub)
		if err != nil {
			return 0, err
		}
		r.AnyOf = append(r.AnyOf, ref)
	}
	return intern(e.checks, &e.out.Checks, r)
}

// intern returns the reference of r in table, adding it unless an equal
// record is there already.
func intern[R any](seen map[string]int32, table *[]R, r R) (int32, error) {
	key, err := json.Marshal(r)
	if err != nil {
		return 0, err
	}
	if ref, ok := seen[string(key)]; ok {
		return ref, nil
	}
	*table = append(*table, r)
	ref := int32(len(*table))
	seen[string(key)] = ref
	return ref, nil
}

// decodePrecompiled rebuilds the fast paths of a CRD file's versions;
// each one's library part is compiled from the verbatim CRD (crdFile) on
// first need.
func decodePrecompiled(data []byte, crdFile string) (map[schema.GroupVersionKind]*crdValidator, error) {
	var in precompiledFile
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&in); err != nil {
		return nil, err
	}
	d := planDecoder{in: &in, plans: make([]*structuralPlan, len(in.Plans)), checks: make([]*schemaCheck, len(in.Checks)), patterns: map[string]*regexp.Regexp{}}
	out := make(map[schema.GroupVersionKind]*crdValidator, len(in.Kinds))
	lib := &crdLibraryFile{name: crdFile}
	for _, k := range in.Kinds {
		plan, err := d.plan(k.Plan)
		if err != nil {
			return nil, err
		}
		check, err := d.check(k.Check)
		if err != nil {
			return nil, err
		}
		gvk := schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
		out[gvk] = &crdValidator{
			gvk: gvk, namespaced: k.Namespaced, statusSubresource: k.StatusSubresource, embedded: k.Embedded,
			hasCELRules: k.HasCELRules, plan: plan, root: plan.rootPlan(), check: check, file: lib,
		}
	}
	return out, nil
}

type planDecoder struct {
	in       *precompiledFile
	plans    []*structuralPlan
	checks   []*schemaCheck
	patterns map[string]*regexp.Regexp
}

func (d *planDecoder) plan(ref int32) (*structuralPlan, error) {
	if ref == 0 {
		return nil, nil
	}
	if ref < 0 || int(ref) > len(d.in.Plans) {
		return nil, fmt.Errorf("precompiled plan reference %d out of range", ref)
	}
	if p := d.plans[ref-1]; p != nil {
		return p, nil
	}
	r := &d.in.Plans[ref-1]
	p := &structuralPlan{
		additional: r.Additional, preserveUnknownFields: r.PreserveUnknownFields,
		embeddedResource: r.EmbeddedResource, nullable: r.Nullable, celRules: r.CELRules,
		defaulted: r.Defaulted, listType: r.ListType, listMapKeys: r.ListMapKeys,
	}
	if r.Default != nil {
		if err := k8sjson.Unmarshal(r.Default, &p.defaultValue); err != nil {
			return nil, err
		}
	}
	if len(r.PropertyNames) != len(r.Properties) {
		return nil, fmt.Errorf("precompiled plan %d: %d names for %d properties", ref, len(r.PropertyNames), len(r.Properties))
	}
	if len(r.Properties) > 0 {
		p.properties = make(map[string]*structuralPlan, len(r.Properties))
		for i, name := range r.PropertyNames {
			child, err := d.plan(r.Properties[i])
			if err != nil {
				return nil, err
			}
			p.properties[name] = child
		}
	}
	var err error
	if p.additionalSchema, err = d.plan(r.AdditionalRef); err != nil {
		return nil, err
	}
	if p.items, err = d.plan(r.Items); err != nil {
		return nil, err
	}
	d.plans[ref-1] = p
	return p, nil
}

func (d *planDecoder) check(ref int32) (*schemaCheck, error) {
	if ref == 0 {
		return nil, nil
	}
	if ref < 0 || int(ref) > len(d.in.Checks) {
		return nil, fmt.Errorf("precompiled check reference %d out of range", ref)
	}
	if c := d.checks[ref-1]; c != nil {
		return c, nil
	}
	r := &d.in.Checks[ref-1]
	c := &schemaCheck{
		types: spec.StringOrArray(r.Types), nullable: r.Nullable, format: r.Format, formatChecked: r.FormatChecked,
		maxLength: r.MaxLength.pointer(), minLength: r.MinLength.pointer(),
		maximum: r.Maximum.pointer(), minimum: r.Minimum.pointer(),
		exclusiveMaximum: r.ExclusiveMaximum, exclusiveMinimum: r.ExclusiveMinimum,
		maxItems: r.MaxItems.pointer(), minItems: r.MinItems.pointer(), required: r.Required,
		noAdditionalProperties: r.NoAdditionalProperties,
		maxProperties:          r.MaxProperties.pointer(), minProperties: r.MinProperties.pointer(),
		undecidable: r.Undecidable,
	}
	if r.Enum != nil {
		if err := k8sjson.Unmarshal(r.Enum, &c.enum); err != nil {
			return nil, err
		}
	}
	if r.Pattern != nil {
		re, ok := d.patterns[*r.Pattern]
		if !ok {
			var err error
			if re, err = regexp.Compile(*r.Pattern); err != nil {
				return nil, err
			}
			d.patterns[*r.Pattern] = re
		}
		c.pattern = re
	}
	if len(r.PropertyNames) != len(r.Properties) {
		return nil, fmt.Errorf("precompiled check %d: %d names for %d properties", ref, len(r.PropertyNames), len(r.Properties))
	}
	if len(r.Properties) > 0 {
		c.properties = make(map[string]*schemaCheck, len(r.Properties))
		for i, name := range r.PropertyNames {
			child, err := d.check(r.Properties[i])
			if err != nil {
				return nil, err
			}
			c.properties[name] = child
		}
	}
	var err error
	if c.items, err = d.check(r.Items); err != nil {
		return nil, err
	}
	if c.additionalProperties, err = d.check(r.AdditionalProperties); err != nil {
		return nil, err
	}
	for _, ref := range r.AllOf {
		sub, err := d.check(ref)
		if err != nil {
			return nil, err
		}
		c.allOf = append(c.allOf, sub)
	}
	for _, ref := range r.AnyOf {
		sub, err := d.check(ref)
		if err != nil {
			return nil, err
		}
		c.anyOf = append(c.anyOf, sub)
	}
	d.checks[ref-1] = c
	return c, nil
}
