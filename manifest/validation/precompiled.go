package validation

import (
	"bytes"
	"embed"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The fast paths of every embedded CRD, compiled ahead of time: a fresh
// process validating a valid object needs only these, a few kilobytes
// decoded in well under a millisecond, instead of parsing up to 1.35 MB of
// YAML and building the library's schemas. They are written by
// `go generate` (TestPrecompiledMatchesCRDs with -update), which compiles
// the verbatim CRDs in crds/ as apiextensions-apiserver reads them
// (compileCRD, in the tests); the same test fails when they differ.
//
//go:generate go test -run TestPrecompiledMatchesCRDs -update .
//go:embed precompiled/*.bin precompiled/*.json
var precompiledFS embed.FS

// precompiledName is the file of a CRD file's precompiled fast paths.
func precompiledName(crdFile string) string {
	return "precompiled/" + strings.TrimSuffix(strings.TrimPrefix(crdFile, "crds/"), ".yaml") + ".bin"
}

// The format: a header, then the schema-check nodes and the structural-plan
// nodes, each table in post-order (a node's children come before it), then
// the served versions. Identical subtrees — a pod template's schema
// appears many times in a CRD — are stored once. A reference is a node's
// index in its table plus one; 0 is none. Integers are varints, strings and
// lists are length-prefixed, and a list or an optional value is prefixed
// with 0 when absent (nil) and its length plus one when present, so that
// what is decoded is deeply equal to what was encoded.
const precompiledMagic = "gridweave-precompiled-crd-v1\n"

// encodePrecompiled writes the fast paths of a CRD file's versions in a
// stable order, so the same CRDs give the same bytes.
func encodePrecompiled(versions map[schema.GroupVersionKind]*crdValidator) ([]byte, error) {
	e := &precompiler{planRefs: map[*structuralPlan]uint64{}, checkRefs: map[*schemaCheck]uint64{}, planKeys: map[string]uint64{}, checkKeys: map[string]uint64{}}
	gvks := slices.SortedFunc(maps.Keys(versions), func(a, b schema.GroupVersionKind) int { return strings.Compare(a.String(), b.String()) })
	type kindRefs struct{ plan, check uint64 }
	refs := make([]kindRefs, len(gvks))
	for i, gvk := range gvks {
		c := versions[gvk]
		check, err := e.check(c.check)
		if err != nil {
			return nil, err
		}
		plan, err := e.plan(c.plan)
		if err != nil {
			return nil, err
		}
		refs[i] = kindRefs{plan: plan, check: check}
	}
	out := recordWriter{buf: []byte(precompiledMagic)}
	out.uint(e.checkCount)
	out.buf = append(out.buf, e.checks...)
	out.uint(e.planCount)
	out.buf = append(out.buf, e.plans...)
	out.uint(uint64(len(gvks)))
	for i, gvk := range gvks {
		c := versions[gvk]
		out.string(gvk.Group)
		out.string(gvk.Version)
		out.string(gvk.Kind)
		out.bool(c.namespaced)
		out.bool(c.statusSubresource)
		out.bool(c.embedded)
		out.bool(c.hasCELRules)
		out.uint(refs[i].plan)
		out.uint(refs[i].check)
	}
	return out.buf, nil
}

type precompiler struct {
	plans, checks         []byte // the tables' records
	planCount, checkCount uint64
	// A node's reference, by pointer (shared nodes) and by its record
	// (equal subtrees).
	planRefs            map[*structuralPlan]uint64
	checkRefs           map[*schemaCheck]uint64
	planKeys, checkKeys map[string]uint64
}

func (e *precompiler) plan(p *structuralPlan) (uint64, error) {
	if p == nil {
		return 0, nil
	}
	if ref, ok := e.planRefs[p]; ok {
		return ref, nil
	}
	names := slices.Sorted(maps.Keys(p.properties))
	children := make([]uint64, len(names))
	var err error
	for i, name := range names {
		if children[i], err = e.plan(p.properties[name]); err != nil {
			return 0, err
		}
	}
	additional, err := e.plan(p.additionalSchema)
	if err != nil {
		return 0, err
	}
	items, err := e.plan(p.items)
	if err != nil {
		return 0, err
	}
	var w recordWriter
	w.strings(names)
	w.refs(children)
	w.bool(p.additional)
	w.uint(additional)
	w.uint(items)
	w.bool(p.preserveUnknownFields)
	w.bool(p.embeddedResource)
	w.bool(p.nullable)
	w.bool(p.celRules)
	w.json(p.defaultValue)
	w.strings(p.defaulted)
	w.string(p.listType)
	w.strings(p.listMapKeys)
	if w.err != nil {
		return 0, w.err
	}
	ref, ok := e.planKeys[string(w.buf)]
	if !ok {
		e.plans = append(e.plans, w.buf...)
		e.planCount++
		ref = e.planCount
		e.planKeys[string(w.buf)] = ref
	}
	e.planRefs[p] = ref
	return ref, nil
}

func (e *precompiler) check(c *schemaCheck) (uint64, error) {
	if c == nil {
		return 0, nil
	}
	if ref, ok := e.checkRefs[c]; ok {
		return ref, nil
	}
	names := slices.Sorted(maps.Keys(c.properties))
	children := make([]uint64, len(names))
	var err error
	for i, name := range names {
		if children[i], err = e.check(c.properties[name]); err != nil {
			return 0, err
		}
	}
	items, err := e.check(c.items)
	if err != nil {
		return 0, err
	}
	additional, err := e.check(c.additionalProperties)
	if err != nil {
		return 0, err
	}
	var allOf, anyOf []uint64
	for _, sub := range c.allOf {
		ref, err := e.check(sub)
		if err != nil {
			return 0, err
		}
		allOf = append(allOf, ref)
	}
	for _, sub := range c.anyOf {
		ref, err := e.check(sub)
		if err != nil {
			return 0, err
		}
		anyOf = append(anyOf, ref)
	}
	var w recordWriter
	w.strings(c.types)
	w.bool(c.nullable)
	w.string(c.format)
	w.bool(c.formatChecked)
	if c.enum == nil {
		w.json(nil)
	} else {
		w.json(c.enum)
	}
	w.optionalInt(c.maxLength)
	w.optionalInt(c.minLength)
	if c.pattern == nil {
		w.uint(0)
	} else {
		w.uint(1)
		w.string(c.pattern.String())
	}
	w.optionalFloat(c.maximum)
	w.optionalFloat(c.minimum)
	w.bool(c.exclusiveMaximum)
	w.bool(c.exclusiveMinimum)
	w.uint(items)
	w.optionalInt(c.maxItems)
	w.optionalInt(c.minItems)
	w.strings(names)
	w.refs(children)
	w.strings(c.required)
	w.uint(additional)
	w.bool(c.noAdditionalProperties)
	w.optionalInt(c.maxProperties)
	w.optionalInt(c.minProperties)
	w.refs(allOf)
	w.refs(anyOf)
	w.bool(c.undecidable)
	if w.err != nil {
		return 0, w.err
	}
	ref, ok := e.checkKeys[string(w.buf)]
	if !ok {
		e.checks = append(e.checks, w.buf...)
		e.checkCount++
		ref = e.checkCount
		e.checkKeys[string(w.buf)] = ref
	}
	e.checkRefs[c] = ref
	return ref, nil
}

// decodePrecompiled rebuilds the fast paths of a CRD file's versions;
// each one's library side is built from its precompiled schema on first
// need.
func decodePrecompiled(data []byte, crdFile string) (map[schema.GroupVersionKind]*crdValidator, error) {
	if !bytes.HasPrefix(data, []byte(precompiledMagic)) {
		return nil, fmt.Errorf("%s: not a precompiled CRD", crdFile)
	}
	r := recordReader{buf: data[len(precompiledMagic):]}
	patterns := map[string]*regexp.Regexp{}
	checks := make([]*schemaCheck, r.count())
	for i := range checks {
		c := &schemaCheck{}
		c.types = spec.StringOrArray(r.strings())
		c.nullable = r.bool()
		c.format = r.string()
		c.formatChecked = r.bool()
		if enum := r.json(); enum != nil {
			c.enum, _ = enum.([]any)
		}
		c.maxLength = r.optionalInt()
		c.minLength = r.optionalInt()
		if r.uint() == 1 {
			pattern := r.string()
			re, ok := patterns[pattern]
			if !ok {
				var err error
				if re, err = regexp.Compile(pattern); err != nil {
					return nil, fmt.Errorf("%s: %w", crdFile, err)
				}
				patterns[pattern] = re
			}
			c.pattern = re
		}
		c.maximum = r.optionalFloat()
		c.minimum = r.optionalFloat()
		c.exclusiveMaximum = r.bool()
		c.exclusiveMinimum = r.bool()
		c.items = ref(&r, checks[:i])
		c.maxItems = r.optionalInt()
		c.minItems = r.optionalInt()
		names := r.strings()
		children := refsTo(&r, checks[:i])
		if len(names) != len(children) {
			r.fail("property names and schemas differ in number")
		} else if len(names) > 0 {
			c.properties = make(map[string]*schemaCheck, len(names))
			for j, name := range names {
				c.properties[name] = children[j]
			}
		}
		c.required = r.strings()
		c.additionalProperties = ref(&r, checks[:i])
		c.noAdditionalProperties = r.bool()
		c.maxProperties = r.optionalInt()
		c.minProperties = r.optionalInt()
		c.allOf = refsTo(&r, checks[:i])
		c.anyOf = refsTo(&r, checks[:i])
		c.undecidable = r.bool()
		checks[i] = c
	}
	plans := make([]*structuralPlan, r.count())
	for i := range plans {
		p := &structuralPlan{}
		names := r.strings()
		children := refsTo(&r, plans[:i])
		if len(names) != len(children) {
			r.fail("property names and plans differ in number")
		} else if len(names) > 0 {
			p.properties = make(map[string]*structuralPlan, len(names))
			for j, name := range names {
				p.properties[name] = children[j]
			}
		}
		p.additional = r.bool()
		p.additionalSchema = ref(&r, plans[:i])
		p.items = ref(&r, plans[:i])
		p.preserveUnknownFields = r.bool()
		p.embeddedResource = r.bool()
		p.nullable = r.bool()
		p.celRules = r.bool()
		p.defaultValue = r.json()
		p.defaulted = r.strings()
		p.listType = r.string()
		p.listMapKeys = r.strings()
		plans[i] = p
	}
	out := map[schema.GroupVersionKind]*crdValidator{}
	for range r.count() {
		gvk := schema.GroupVersionKind{Group: r.string(), Version: r.string(), Kind: r.string()}
		c := &crdValidator{gvk: gvk}
		c.namespaced = r.bool()
		c.statusSubresource = r.bool()
		c.embedded = r.bool()
		c.hasCELRules = r.bool()
		c.plan = ref(&r, plans)
		c.check = ref(&r, checks)
		if c.plan == nil || c.check == nil {
			r.fail("a version without its plan or check")
		}
		c.root = c.plan.rootPlan()
		c.lib = &crdLibrary{load: loadPrecompiledSchema(crdFile, gvk.Version), nodeAt: precompiledNodeAt(crdFile, gvk.Version), check: c.check}
		out[gvk] = c
	}
	if r.err == nil && len(r.buf) > 0 {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, fmt.Errorf("%s: precompiled form: %w", crdFile, r.err)
	}
	return out, nil
}
