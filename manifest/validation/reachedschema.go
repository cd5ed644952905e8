package validation

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	k8sjson "k8s.io/apimachinery/pkg/util/json"
)

// decodeReached decodes node, the JSON of a schema node as the
// precompiled form holds it, as k8sjson.Unmarshal would, but leaves out
// of Properties, here and below, every property that none of values has.
// The kube-openapi validator of a value reads only the properties the
// value has (required and the property counts read the value's keys, and
// additionalProperties: false looks up only the value's keys in the
// properties), so it finds the same in each of values with the schema
// decoded here as with the whole node, and a node such as a pod template
// is converted in the size of the value, not of the schema. Where telling
// what a value reaches would take more than this (tuples,
// patternProperties, additionalItems, dependencies, definitions), the
// member is decoded whole: keeping more of the schema never changes what
// is found.
func decodeReached(node []byte, values []any) (*apiextensions.JSONSchemaProps, error) {
	props := &apiextensions.JSONSchemaProps{}
	rest := []byte{'{'} // the members decoded whole, as an object
	err := eachMember(node, func(name, value []byte) error {
		if isJSONNull(value) {
			return nil // the zero value, as k8sjson leaves it
		}
		var err error
		switch {
		case jsonStringIs(name, "Properties"):
			props.Properties, err = decodeReachedProperties(value, values)
		case jsonStringIs(name, "Items"):
			props.Items, err = decodeReachedItems(value, values)
		case jsonStringIs(name, "AdditionalProperties"):
			props.AdditionalProperties, err = decodeReachedOrBool(value, memberValues(values))
		case jsonStringIs(name, "AllOf"):
			props.AllOf, err = decodeReachedList(value, values)
		case jsonStringIs(name, "AnyOf"):
			props.AnyOf, err = decodeReachedList(value, values)
		case jsonStringIs(name, "OneOf"):
			props.OneOf, err = decodeReachedList(value, values)
		case jsonStringIs(name, "Not"):
			props.Not, err = decodeReached(value, values)
		default:
			if len(rest) > 1 {
				rest = append(rest, ',')
			}
			rest = append(append(append(rest, name...), ':'), value...)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := k8sjson.Unmarshal(append(rest, '}'), props); err != nil {
		return nil, err
	}
	return props, nil
}

// decodeReachedProperties decodes the properties some value of values has.
func decodeReachedProperties(obj []byte, values []any) (map[string]apiextensions.JSONSchemaProps, error) {
	properties := map[string]apiextensions.JSONSchemaProps{}
	err := eachMember(obj, func(quoted, node []byte) error {
		name := string(quoted[1 : len(quoted)-1])
		if strings.ContainsRune(name, '\\') {
			if err := k8sjson.Unmarshal(quoted, &name); err != nil {
				return err
			}
		}
		var reached []any
		for _, v := range values {
			if m, ok := v.(map[string]any); ok {
				if child, ok := m[name]; ok {
					reached = append(reached, child)
				}
			}
		}
		if len(reached) == 0 {
			return nil
		}
		p, err := decodeReached(node, reached)
		if err != nil {
			return fmt.Errorf("%s: %w", quoted, err)
		}
		properties[name] = *p
		return nil
	})
	return properties, err
}

// decodeReachedItems decodes a list's items for the elements of values;
// tuples (JSONSchemas) are decoded whole.
func decodeReachedItems(obj []byte, values []any) (*apiextensions.JSONSchemaPropsOrArray, error) {
	items := &apiextensions.JSONSchemaPropsOrArray{}
	if tuple, err := memberValue(obj, "JSONSchemas"); err == nil && !isJSONNull(tuple) {
		return items, k8sjson.Unmarshal(obj, items)
	}
	schema, err := memberValue(obj, "Schema")
	if err != nil || isJSONNull(schema) {
		return items, k8sjson.Unmarshal(obj, items)
	}
	var elements []any
	for _, v := range values {
		if list, ok := v.([]any); ok {
			elements = append(elements, list...)
		}
	}
	items.Schema, err = decodeReached(schema, elements)
	return items, err
}

// decodeReachedOrBool decodes additionalProperties for values, the
// values of every member of the objects (more than the additional ones,
// which is safe).
func decodeReachedOrBool(obj []byte, values []any) (*apiextensions.JSONSchemaPropsOrBool, error) {
	orBool := &apiextensions.JSONSchemaPropsOrBool{}
	schema, err := memberValue(obj, "Schema")
	if err != nil || isJSONNull(schema) {
		return orBool, k8sjson.Unmarshal(obj, orBool)
	}
	if allows, err := memberValue(obj, "Allows"); err == nil {
		if err := k8sjson.Unmarshal(allows, &orBool.Allows); err != nil {
			return nil, err
		}
	} // else false, as decoding the whole would leave it
	orBool.Schema, err = decodeReached(schema, values)
	return orBool, err
}

// decodeReachedList decodes each schema of list for values.
func decodeReachedList(list []byte, values []any) ([]apiextensions.JSONSchemaProps, error) {
	var raw []json.RawMessage
	if err := json.Unmarshal(list, &raw); err != nil {
		return nil, err
	}
	out := make([]apiextensions.JSONSchemaProps, len(raw))
	for i, node := range raw {
		p, err := decodeReached(node, values)
		if err != nil {
			return nil, fmt.Errorf("[%d]: %w", i, err)
		}
		out[i] = *p
	}
	return out, nil
}

// memberValues are the values of the members of the objects of values.
func memberValues(values []any) []any {
	var out []any
	for _, v := range values {
		if m, ok := v.(map[string]any); ok {
			for _, child := range m {
				out = append(out, child)
			}
		}
	}
	return out
}

func isJSONNull(value []byte) bool { return string(value) == "null" }

// reachedShape is what of v decodeReached depends on, as a key: the
// names of objects' members, sorted, with their values' shapes, and the
// shapes of lists' elements. Values of the same shape reach the same
// schema.
func reachedShape(v any) string {
	var b strings.Builder
	writeReachedShape(&b, v)
	return b.String()
}

func writeReachedShape(b *strings.Builder, v any) {
	switch t := v.(type) {
	case map[string]any:
		b.WriteByte('{')
		for _, name := range slices.Sorted(maps.Keys(t)) {
			b.WriteString(strconv.Quote(name))
			writeReachedShape(b, t[name])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for _, e := range t {
			writeReachedShape(b, e)
		}
		b.WriteByte(']')
	default:
		b.WriteByte('.')
	}
}
