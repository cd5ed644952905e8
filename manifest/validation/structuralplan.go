package validation

import (
	"reflect"
	"slices"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// structuralPlan is a structural schema compiled into a tree of pointers
// for the walks the API server makes over a custom resource on every
// create — pruning, the pruning of nulls, defaulting and the list-type
// (set/map) invariants.
// The apiextensions-apiserver versions copy a schema node per property
// visited; these walk the object, allocate only what they build, and
// mirror the library's decisions exactly (pruning, nulls, defaulting) or
// answer only "certainly fine" (list types), leaving every other case to
// the library. TestStructuralPlanMatchesLibrary holds each to it.
type structuralPlan struct {
	properties map[string]*structuralPlan
	// additional: the schema has additionalProperties; additionalSchema
	// may still be nil (additionalProperties: true).
	additional       bool
	additionalSchema *structuralPlan
	items            *structuralPlan

	preserveUnknownFields bool
	embeddedResource      bool
	nullable              bool
	// defaultValue is this node's default (nil: none).
	defaultValue any
	// defaulted are the properties that have a default.
	defaulted []string

	listType    string
	listMapKeys []string
	// celRules: the node has x-kubernetes-validations.
	celRules bool
}

func compileStructuralPlan(s *structuralschema.Structural) *structuralPlan {
	if s == nil {
		return nil
	}
	p := &structuralPlan{
		preserveUnknownFields: s.XPreserveUnknownFields,
		embeddedResource:      s.XEmbeddedResource,
		nullable:              s.Nullable,
		defaultValue:          s.Default.Object,
		listMapKeys:           s.XListMapKeys,
		celRules:              len(s.XValidations) > 0 || allOfHasRules(s.ValueValidation),
	}
	if s.XListType != nil {
		p.listType = *s.XListType
	}
	if len(s.Properties) > 0 {
		p.properties = make(map[string]*structuralPlan, len(s.Properties))
		for name, prop := range s.Properties {
			p.properties[name] = compileStructuralPlan(&prop)
			if prop.Default.Object != nil {
				p.defaulted = append(p.defaulted, name)
			}
		}
	}
	slices.Sort(p.defaulted)
	if s.AdditionalProperties != nil {
		p.additional = true
		p.additionalSchema = compileStructuralPlan(s.AdditionalProperties.Structural)
	}
	p.items = compileStructuralPlan(s.Items)
	return p
}

// rootPlan is the plan as pruning sees a resource root: an embedded
// resource, whose apiVersion, kind and metadata it leaves alone.
func (p *structuralPlan) rootPlan() *structuralPlan {
	if p == nil {
		p = &structuralPlan{}
	}
	root := *p
	root.embeddedResource = true
	return &root
}

var metaFields = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

// prunes reports whether pruning x (pruning.PruneWithOptions) would drop
// anything.
func (p *structuralPlan) prunes(x any) bool {
	if p != nil && p.preserveUnknownFields {
		return p.skipPrunes(x)
	}
	switch x := x.(type) {
	case map[string]any:
		return p == nil && len(x) > 0 || p != nil && p.prunesFields(x, false)
	case []any:
		var items *structuralPlan
		if p != nil {
			items = p.items
		}
		for _, v := range x {
			if items.prunes(v) {
				return true
			}
		}
	}
	return false
}

// skipPrunes mirrors pruning under x-kubernetes-preserve-unknown-fields:
// unknown keys stay, known ones are pruned below.
func (p *structuralPlan) skipPrunes(x any) bool {
	if p == nil {
		return false
	}
	switch x := x.(type) {
	case map[string]any:
		return p.prunesFields(x, true)
	case []any:
		for _, v := range x {
			if p.items.skipPrunes(v) {
				return true
			}
		}
	}
	return false
}

// prunesFields reports whether pruning drops anything from an object's
// fields: an unknown one (unless keepUnknown), or anything below a known
// one. An embedded resource's apiVersion, kind and metadata are left alone.
func (p *structuralPlan) prunesFields(m map[string]any, keepUnknown bool) bool {
	for k, v := range m {
		if p.embeddedResource && metaFields[k] {
			continue
		}
		if prop, ok := p.properties[k]; ok {
			if prop.prunes(v) {
				return true
			}
		} else if p.additional {
			if p.additionalSchema.prunes(v) {
				return true
			}
		} else if !keepUnknown {
			return true
		}
	}
	return false
}

// prune drops from x what pruning.PruneWithOptions drops (x is changed in
// place: give it a copy) and returns the paths of the unknown fields
// dropped, sorted and written as it writes them, without the library's
// structural schema: an object with a mistyped field needs only the plan.
// TestStructuralPlanMatchesLibrary holds the two together.
func (p *structuralPlan) prune(x any) []string {
	paths := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
	p.pruneAt(x, &paths)
	slices.Sort(paths.UnknownFieldPaths)
	return paths.UnknownFieldPaths
}

func (p *structuralPlan) pruneAt(x any, paths *structuralschema.UnknownFieldPathOptions) {
	if p != nil && p.preserveUnknownFields {
		p.skipPruneAt(x, paths)
		return
	}
	parent := len(paths.ParentPath)
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if p != nil && p.embeddedResource && metaFields[k] {
				continue
			}
			if prop, ok := p.property(k); ok {
				paths.AppendKey(k)
				prop.pruneAt(v, paths)
				paths.ParentPath = paths.ParentPath[:parent]
				continue
			}
			if !metaFields[k] || parent > 0 || p == nil {
				paths.RecordUnknownField(k)
			}
			delete(x, k)
		}
	case []any:
		var items *structuralPlan
		if p != nil {
			items = p.items
		}
		for i, v := range x {
			paths.AppendIndex(i)
			items.pruneAt(v, paths)
			paths.ParentPath = paths.ParentPath[:parent]
		}
	}
}

// skipPruneAt mirrors pruning under x-kubernetes-preserve-unknown-fields:
// unknown keys stay, known ones are pruned below.
func (p *structuralPlan) skipPruneAt(x any, paths *structuralschema.UnknownFieldPathOptions) {
	if p == nil {
		return
	}
	parent := len(paths.ParentPath)
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if p.embeddedResource && metaFields[k] {
				continue
			}
			if prop, ok := p.property(k); ok {
				paths.AppendKey(k)
				prop.pruneAt(v, paths)
				paths.ParentPath = paths.ParentPath[:parent]
			}
		}
	case []any:
		for i, v := range x {
			paths.AppendIndex(i)
			p.items.skipPruneAt(v, paths)
			paths.ParentPath = paths.ParentPath[:parent]
		}
	}
}

// property is the plan of an object's field k, a property or an
// additional property (nil: additionalProperties: true); ok is false for
// a field the schema does not know. A nil plan knows none.
func (p *structuralPlan) property(k string) (plan *structuralPlan, ok bool) {
	if p == nil {
		return nil, false
	}
	if prop, ok := p.properties[k]; ok {
		return prop, true
	}
	if p.additional {
		return p.additionalSchema, true
	}
	return nil, false
}

// nullsPrunedAndDefaulted returns x as the API server's create path makes
// it after pruning — defaulting.PruneNonNullableNullsWithoutDefaults (a
// null where the schema allows none and has no default is dropped: the
// key written with no value, `env:`), then defaulting.Default — equal to
// what those make of a deep copy, without changing x: nodes on the way to
// a change are new, every other subtree is x's own. The result must
// therefore be read, not written.
func (p *structuralPlan) nullsPrunedAndDefaulted(x any) any {
	if p == nil {
		return x
	}
	switch x := x.(type) {
	case map[string]any:
		var out map[string]any // made at the first change
		own := func() {
			if out == nil {
				out = make(map[string]any, len(x)+len(p.defaulted))
				for k, v := range x {
					out[k] = v
				}
			}
		}
		for k, v := range x {
			var child *structuralPlan
			if prop, ok := p.properties[k]; ok {
				child = prop
			} else if p.additional {
				child = p.additionalSchema
			} else {
				continue // not the schema's: left as it is
			}
			if v == nil && child != nil && !child.nullable {
				own()
				if child.defaultValue == nil {
					delete(out, k)
				} else {
					out[k] = child.nullsPrunedAndDefaulted(runtime.DeepCopyJSONValue(child.defaultValue))
				}
				continue
			}
			if d := child.nullsPrunedAndDefaulted(v); !sameValue(d, v) {
				own()
				out[k] = d
			}
		}
		for _, k := range p.defaulted {
			if _, found := x[k]; !found {
				prop := p.properties[k]
				own()
				out[k] = prop.nullsPrunedAndDefaulted(runtime.DeepCopyJSONValue(prop.defaultValue))
			}
		}
		if out == nil {
			return x
		}
		return out
	case []any:
		// PruneNonNullableNullsWithoutDefaults leaves list items alone;
		// Default replaces a null item by the items' default (or null).
		var out []any
		for i, v := range x {
			var d any
			if v == nil && p.items != nil && !p.items.nullable {
				d = p.items.nullsPrunedAndDefaulted(runtime.DeepCopyJSONValue(p.items.defaultValue))
			} else {
				d = p.items.nullsPrunedAndDefaulted(v)
			}
			if out == nil && !sameValue(d, v) {
				out = make([]any, len(x))
				copy(out, x[:i])
			}
			if out != nil {
				out[i] = d
			}
		}
		if out == nil {
			return x
		}
		return out
	}
	return x // strings, numbers, booleans and null are values
}

// sameValue reports whether nullsPrunedAndDefaulted returned its input
// unchanged.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		bm, ok := b.(map[string]any)
		return ok && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(bm).UnsafePointer()
	case []any:
		bl, ok := b.([]any)
		return ok && len(a) == len(bl) && (len(a) == 0 || &a[0] == &bl[0])
	case nil:
		return b == nil
	}
	return true // scalars come back as they went in
}

// listTypesCertainlyValid reports whether x certainly keeps the
// x-kubernetes-list-type invariants (set items unique, map keys unique);
// false means "maybe not": ask listtype.ValidateListSetsAndMaps.
func (p *structuralPlan) listTypesCertainlyValid(x any) bool {
	if p == nil {
		return true
	}
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if p.additional && p.additionalSchema != nil && !p.additionalSchema.listTypesCertainlyValid(v) {
				return false
			}
			if prop, ok := p.properties[k]; ok && !prop.listTypesCertainlyValid(v) {
				return false
			}
		}
	case []any:
		switch p.listType {
		case "set":
			for i := range x {
				if !comparableScalar(x[i]) {
					return false // compound items: the library compares their JSON
				}
				for j := 0; j < i; j++ {
					if x[i] == x[j] {
						return false
					}
				}
			}
		case "map":
			if len(x) <= 1 {
				if len(x) == 1 {
					if _, isMap := x[0].(map[string]any); !isMap {
						return false
					}
				}
				break // one item: nothing to be unique against
			}
			for i := range x {
				item, ok := x[i].(map[string]any)
				if !ok {
					return false
				}
				for _, key := range p.listMapKeys {
					if v, present := item[key]; !present || !comparableScalar(v) {
						return false // unspecified or compound keys: the library decides
					}
				}
				for j := 0; j < i; j++ {
					other := x[j].(map[string]any)
					same := true
					for _, key := range p.listMapKeys {
						if item[key] != other[key] {
							same = false
							break
						}
					}
					if same {
						return false
					}
				}
			}
		}
		if p.items != nil {
			for _, v := range x {
				if !p.items.listTypesCertainlyValid(v) {
					return false
				}
			}
		}
	}
	return true
}

func comparableScalar(v any) bool {
	switch v.(type) {
	case string, int64, float64, bool:
		return true
	}
	return false
}

// reachesCELRule reports whether validating x reaches a node with
// x-kubernetes-validations: the CEL validator evaluates a node's rules
// only on a value that is there and not null, and walks only the values
// there. When none is reached it can find nothing, so its rules need not
// be compiled.
func (p *structuralPlan) reachesCELRule(x any) bool {
	if p == nil || x == nil {
		return false
	}
	if p.celRules {
		return true
	}
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if p.properties[k].reachesCELRule(v) || p.additionalSchema.reachesCELRule(v) {
				return true
			}
		}
	case []any:
		for _, v := range x {
			if p.items.reachesCELRule(v) {
				return true
			}
		}
	}
	return false
}

// ruleSite is a node with x-kubernetes-validations that validating an
// object reaches: its plan and schema, the value there and its path.
type ruleSite struct {
	plan   *structuralPlan
	schema *structuralschema.Structural
	value  any
	path   *field.Path
}

// ruleSites appends to into the sites validating x (at path, with schema
// s) reaches, walking the plan and the schema together as the CEL
// validator walks them: a node before those under it, properties by name,
// additionalProperties by key, items by index, null values never. below:
// the nodes with rules at or under them (markRulesBelow), the only ones
// walked.
func (p *structuralPlan) ruleSites(s *structuralschema.Structural, x any, path *field.Path, below map[*structuralPlan]bool, into []ruleSite) []ruleSite {
	if p == nil || s == nil || x == nil || !below[p] {
		return into
	}
	if p.celRules {
		into = append(into, ruleSite{plan: p, schema: s, value: x, path: path})
	}
	switch x := x.(type) {
	case map[string]any:
		var additional *structuralschema.Structural
		if a := s.AdditionalProperties; a != nil && below[p.additionalSchema] {
			additional = a.Structural
		}
		for k, v := range x {
			if child := p.properties[k]; below[child] {
				if prop, ok := s.Properties[k]; ok {
					into = child.ruleSites(&prop, v, path.Child(k), below, into)
				}
			}
			if additional != nil {
				into = p.additionalSchema.ruleSites(additional, v, path.Key(k), below, into)
			}
		}
	case []any:
		if below[p.items] {
			for i, v := range x {
				into = p.items.ruleSites(s.Items, v, path.Index(i), below, into)
			}
		}
	}
	return into
}

// allOfHasRules reports whether an allOf entry of v carries
// x-kubernetes-validations (the CEL validator evaluates those at the node
// too).
func allOfHasRules(v *structuralschema.ValueValidation) bool {
	if v == nil {
		return false
	}
	for i := range v.AllOf {
		if nestedHasRules(&v.AllOf[i]) {
			return true
		}
	}
	return false
}

func nestedHasRules(v *structuralschema.NestedValueValidation) bool {
	if v == nil {
		return false
	}
	if len(v.XValidations) > 0 || allOfHasRules(&v.ValueValidation) || nestedHasRules(v.Items) || nestedHasRules(v.AdditionalProperties) {
		return true
	}
	for _, p := range v.Properties {
		if nestedHasRules(&p) {
			return true
		}
	}
	return false
}
