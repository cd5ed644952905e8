package validation

import (
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"unicode/utf8"

	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
)

// schemaCheck is an OpenAPI schema compiled for one question: does a
// value certainly satisfy it? It answers the way kube-openapi's
// SchemaValidator (the API server's) would, but walks the value instead of
// the schema and allocates nothing, so a valid object — the steady state —
// is confirmed in a fraction of the time.
//
// It is conservative by construction: every check it does not mirror
// exactly (oneOf, not, multipleOf, uniqueItems, tuples, patternProperties,
// $ref, unusual number formats, unusual Go types) answers "not certain",
// and so does every failed check. The caller then runs kube-openapi's
// validator, which decides and words the errors. A "yes" from here is
// therefore only ever given where kube-openapi would find no error; the
// differential tests hold it to that.
type schemaCheck struct {
	types    spec.StringOrArray
	nullable bool
	format   string
	// formatChecked: the format is one the registry knows, so strings are
	// checked against it (kube-openapi skips unknown formats).
	formatChecked bool
	enum          []any

	maxLength, minLength *int64
	pattern              *regexp.Regexp

	maximum, minimum                   *float64
	exclusiveMaximum, exclusiveMinimum bool

	items              *schemaCheck
	maxItems, minItems *int64

	properties             map[string]*schemaCheck
	required               []string
	additionalProperties   *schemaCheck
	noAdditionalProperties bool
	maxProperties          *int64
	minProperties          *int64

	allOf, anyOf []*schemaCheck

	// undecidable: the schema uses a feature this check does not mirror.
	undecidable bool
}

// compileSchemaCheck compiles s (nil: anything goes).
func compileSchemaCheck(s *spec.Schema, formats strfmt.Registry) *schemaCheck {
	if s == nil {
		return nil
	}
	c := &schemaCheck{
		types: s.Type, nullable: s.Nullable, format: s.Format,
		formatChecked: s.Format != "" && formats.ContainsName(s.Format),
		enum:          s.Enum,
		maxLength:     s.MaxLength, minLength: s.MinLength,
		maximum: s.Maximum, minimum: s.Minimum,
		exclusiveMaximum: s.ExclusiveMaximum, exclusiveMinimum: s.ExclusiveMinimum,
		maxItems: s.MaxItems, minItems: s.MinItems,
		required:      s.Required,
		maxProperties: s.MaxProperties, minProperties: s.MinProperties,
	}
	if s.Pattern != "" {
		re, err := regexp.Compile(s.Pattern)
		if err != nil {
			c.undecidable = true // kube-openapi reports the bad pattern
		}
		c.pattern = re
	}
	if s.Ref.String() != "" || s.MultipleOf != nil || s.UniqueItems || len(s.OneOf) > 0 || s.Not != nil ||
		len(s.PatternProperties) > 0 || len(s.Dependencies) > 0 || s.AdditionalItems != nil {
		c.undecidable = true
	}
	if s.Items != nil {
		if s.Items.Schema != nil {
			c.items = compileSchemaCheck(s.Items.Schema, formats)
		}
		if len(s.Items.Schemas) > 0 {
			c.undecidable = true
		}
	}
	if len(s.Properties) > 0 {
		c.properties = make(map[string]*schemaCheck, len(s.Properties))
		for name, p := range s.Properties {
			c.properties[name] = compileSchemaCheck(&p, formats)
		}
	}
	if ap := s.AdditionalProperties; ap != nil {
		if ap.Schema != nil {
			c.additionalProperties = compileSchemaCheck(ap.Schema, formats)
		} else if !ap.Allows {
			c.noAdditionalProperties = true
		}
	}
	for i := range s.AllOf {
		c.allOf = append(c.allOf, compileSchemaCheck(&s.AllOf[i], formats))
	}
	for i := range s.AnyOf {
		c.anyOf = append(c.anyOf, compileSchemaCheck(&s.AnyOf[i], formats))
	}
	return c
}

// certainlyValid reports whether v satisfies the schema with certainty;
// false means "maybe not": ask the full validator.
func (c *schemaCheck) certainlyValid(v any, formats strfmt.Registry) bool {
	if c == nil {
		return true
	}
	if !c.locallyValid(v, formats) {
		return false
	}
	switch x := v.(type) {
	case []any:
		if c.items != nil {
			for _, e := range x {
				if !c.items.certainlyValid(e, formats) {
					return false
				}
			}
		}
	case map[string]any:
		for k, v := range x {
			if !c.child(k).certainlyValid(v, formats) {
				return false
			}
		}
	}
	return true
}

// child is the check of an object's property k: its own, the additional
// properties', or nil (anything goes; a key no schema allows fails the
// object's locallyValid).
func (c *schemaCheck) child(k string) *schemaCheck {
	if p, known := c.properties[k]; known {
		return p
	}
	return c.additionalProperties
}

// locallyValid reports whether v certainly satisfies what the schema says
// of v itself — everything but the schemas of its items and properties,
// which apply to those values on their own (allOf and anyOf are checked
// whole).
func (c *schemaCheck) locallyValid(v any, formats strfmt.Registry) bool {
	if c.undecidable {
		return false
	}
	if v == nil {
		// kube-openapi runs only the type and enum checks on null.
		return (len(c.types) == 0 || c.types.Contains("null") || c.nullable) && len(c.enum) == 0
	}
	var jsonType string
	switch v.(type) {
	case map[string]any:
		jsonType = "object"
	case []any:
		jsonType = "array"
	case string:
		jsonType = "string"
	case bool:
		jsonType = "boolean"
	case int64:
		jsonType = "integer"
	case float64:
		jsonType = "number"
	default:
		return false // a Go type JSON decoding does not make
	}
	if !c.typeAccepts(jsonType) {
		return false
	}
	if len(c.enum) > 0 && !slices.ContainsFunc(c.enum, func(e any) bool { return enumEqual(e, v) }) {
		return false
	}
	for _, sub := range c.allOf {
		if !sub.certainlyValid(v, formats) {
			return false
		}
	}
	if len(c.anyOf) > 0 && !slices.ContainsFunc(c.anyOf, func(sub *schemaCheck) bool { return sub.certainlyValid(v, formats) }) {
		return false
	}
	switch x := v.(type) {
	case string:
		return c.stringValid(x, formats)
	case int64:
		return c.integerValid(x)
	case float64:
		return c.numberValid(x)
	case []any:
		return c.arrayValid(x)
	case map[string]any:
		return c.objectValid(x)
	}
	return true
}

// schemaStep is one step down a schema to a child value's: into a
// property (by name), the items, or the additional properties.
type schemaStep struct {
	property   string
	items      bool
	additional bool
}

// uncertainValue is a value the compiled check is not certain of, as
// kube-openapi's validator of the whole object reaches it: by the path it
// names it with there ("spec.workerGroupSpecs[0].replicas"), at the end
// of steps from the root schema.
type uncertainValue struct {
	path  string
	steps []schemaStep
	value any
}

// uncertainValues appends to out the outermost values at or under v
// (whose path and schema steps are given) the check is not certain of.
// Everything else is certainly valid, and kube-openapi validates each
// item and property value on its own, with a validator of the value's
// schema and path alone: the errors of the whole object are those of
// these values, each validated that way.
func (c *schemaCheck) uncertainValues(v any, formats strfmt.Registry, path string, steps []schemaStep, out []uncertainValue) []uncertainValue {
	if c == nil {
		return out
	}
	if !c.locallyValid(v, formats) {
		return append(out, uncertainValue{path: path, steps: slices.Clone(steps), value: v})
	}
	switch x := v.(type) {
	case []any:
		if c.items != nil {
			for i, e := range x {
				out = c.items.uncertainValues(e, formats, path+"["+strconv.Itoa(i)+"]", append(steps, schemaStep{items: true}), out)
			}
		}
	case map[string]any:
		for k, e := range x {
			// kube-openapi's names: a property's without a leading dot at
			// the root, an additional property's with one.
			if p, known := c.properties[k]; known {
				name := k
				if path != "" {
					name = path + "." + k
				}
				out = p.uncertainValues(e, formats, name, append(steps, schemaStep{property: k}), out)
			} else if c.additionalProperties != nil {
				out = c.additionalProperties.uncertainValues(e, formats, path+"."+k, append(steps, schemaStep{additional: true}), out)
			}
		}
	}
	return out
}

// typeAccepts mirrors kube-openapi's type validator for the JSON types a
// decoded object holds (string, int64, float64, bool, map, slice).
func (c *schemaCheck) typeAccepts(jsonType string) bool {
	if len(c.types) == 0 {
		// With only a format, a number must match the format exactly:
		// leave that to kube-openapi.
		return c.format == "" || jsonType == "string" || jsonType == "array"
	}
	numeric := c.types.Contains("number") || c.types.Contains("integer")
	if !numeric && c.format != "" && (jsonType == "string" || jsonType == "array") {
		return true
	}
	// An integral float64 may pass as an integer in kube-openapi; that
	// rare case is left to it.
	return c.types.Contains(jsonType) || (jsonType == "integer" && c.types.Contains("number"))
}

func (c *schemaCheck) stringValid(s string, formats strfmt.Registry) bool {
	if c.formatChecked && !formats.Validates(c.format, s) {
		return false
	}
	if c.maxLength != nil || c.minLength != nil {
		n := int64(utf8.RuneCountInString(s))
		if (c.maxLength != nil && n > *c.maxLength) || (c.minLength != nil && n < *c.minLength) {
			return false
		}
	}
	return c.pattern == nil || c.pattern.MatchString(s)
}

func (c *schemaCheck) integerValid(n int64) bool {
	switch c.format {
	case "", "int64":
	case "int32":
		if n < math.MinInt32 || n > math.MaxInt32 {
			return false
		}
	default:
		return false // uint, float formats: kube-openapi decides
	}
	return c.integerBoundsAccept(n)
}

func (c *schemaCheck) numberValid(f float64) bool {
	if c.types.Contains("integer") || (c.format != "" && c.format != "double" && c.format != "float64") {
		return false
	}
	return c.boundsAccept(f)
}

// integerBoundsAccept mirrors kube-openapi's MaximumNativeType and
// MinimumNativeType for an integer value: the bound is truncated to an
// int64 and compared as one, not as a float64 (a bound of 10.5 is 10; past
// 2^53 a float64 comparison would lose the difference). A bound int64
// cannot hold answers "not certain": Go leaves that conversion to the
// platform.
func (c *schemaCheck) integerBoundsAccept(n int64) bool {
	if c.maximum != nil {
		maximum, ok := truncatedBound(*c.maximum)
		if !ok || n > maximum || (c.exclusiveMaximum && n == maximum) {
			return false
		}
	}
	if c.minimum != nil {
		minimum, ok := truncatedBound(*c.minimum)
		if !ok || n < minimum || (c.exclusiveMinimum && n == minimum) {
			return false
		}
	}
	return true
}

// truncatedBound is int64(bound) as kube-openapi converts it, and whether
// bound is in the range where Go defines that conversion.
func truncatedBound(bound float64) (int64, bool) {
	if !(bound >= math.MinInt64 && bound < math.MaxInt64) { // false for NaN too
		return 0, false
	}
	return int64(bound), true
}

// boundsAccept compares a number value with the bounds as kube-openapi
// does for a float64: as float64s.
func (c *schemaCheck) boundsAccept(f float64) bool {
	if c.maximum != nil && (f > *c.maximum || (c.exclusiveMaximum && f == *c.maximum)) {
		return false
	}
	if c.minimum != nil && (f < *c.minimum || (c.exclusiveMinimum && f == *c.minimum)) {
		return false
	}
	return true
}

func (c *schemaCheck) arrayValid(a []any) bool {
	n := int64(len(a))
	return (c.maxItems == nil || n <= *c.maxItems) && (c.minItems == nil || n >= *c.minItems)
}

func (c *schemaCheck) objectValid(m map[string]any) bool {
	n := int64(len(m))
	if (c.maxProperties != nil && n > *c.maxProperties) || (c.minProperties != nil && n < *c.minProperties) {
		return false
	}
	for _, name := range c.required {
		if _, ok := m[name]; !ok {
			return false
		}
	}
	if c.noAdditionalProperties {
		for k := range m {
			if _, known := c.properties[k]; !known {
				return false
			}
		}
	}
	return true
}

// enumEqual is true only when e and v are plainly the same JSON value;
// conversions kube-openapi might allow are left to it.
func enumEqual(e, v any) bool {
	switch e := e.(type) {
	case string, bool, int64, float64:
		return e == v
	}
	return reflect.DeepEqual(e, v)
}
