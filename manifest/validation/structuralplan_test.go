package validation

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	k8sjson "k8s.io/apimachinery/pkg/util/json"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	sigsyaml "sigs.k8s.io/yaml"
)

// ruleNodesSchema has a rule at the root (on metadata.name, which only a
// resource's root declares), on two properties of the same shape with
// different rules, on map values and on list items; and two rules the API
// server's CEL validator never evaluates: under a property with no type
// (x-kubernetes-preserve-unknown-fields alone), and on an embedded
// resource's metadata labels (its CEL type has only name and
// generateName).
const ruleNodesSchema = `
type: object
x-kubernetes-validations:
- rule: "self.metadata.name.startsWith('ok')"
  message: root
properties:
  apiVersion: {type: string}
  kind: {type: string}
  metadata: {type: object}
  spec:
    type: object
    properties:
      low:
        type: object
        properties: {size: {type: integer}}
        x-kubernetes-validations: [{rule: "self.size > 0", message: low}]
      high:
        type: object
        properties: {size: {type: integer}}
        x-kubernetes-validations: [{rule: "self.size < 10", message: high}]
      labels:
        type: object
        additionalProperties:
          type: string
          x-kubernetes-validations: [{rule: "self.size() < 5", message: label}]
      workers:
        type: array
        items:
          type: object
          properties: {role: {type: string}}
          x-kubernetes-validations: [{rule: "self.role != 'bad'", message: worker}]
      loose:
        x-kubernetes-preserve-unknown-fields: true
        properties:
          foo: {type: string, x-kubernetes-validations: [{rule: "self == 'a'", message: untyped}]}
      template:
        type: object
        x-kubernetes-embedded-resource: true
        properties:
          metadata:
            type: object
            properties:
              labels:
                type: object
                additionalProperties: {type: string}
                x-kubernetes-validations: [{rule: "self.size() < 2", message: embeddedLabels}]
`

// metadataRuleSchema has a rule on the root's metadata, whose CEL type is
// not the one its own schema gives; allOfRuleSchema a rule in allOf (which
// the API server refuses). Only the validator of every rule finds the
// same on them.
const (
	metadataRuleSchema = `
type: object
properties:
  metadata:
    type: object
    x-kubernetes-validations: [{rule: "self.name != 'x'", message: metadata}]
  spec: {type: object, properties: {size: {type: integer}}, x-kubernetes-validations: [{rule: "self.size > 0", message: size}]}
`
	allOfRuleSchema = `
type: object
properties:
  spec:
    type: object
    properties: {count: {type: integer}}
    x-kubernetes-validations: [{rule: "self.count >= 0", message: count}]
    allOf:
    - x-kubernetes-validations: [{rule: "self.count != 3", message: allOf}]
`
)

// TestValidateCELNodeByNode: validating each node reached on its own finds
// what the validator of every rule finds, paths included — a root rule on
// metadata, two nodes of one shape (which the precompiled plan stores
// once) with different rules, map values, list items — and leaves out the
// nodes it leaves out, without ever building it; where a node's CEL type
// differs, or a rule is in allOf, it uses it.
func TestValidateCELNodeByNode(t *testing.T) {
	for _, c := range []struct {
		schema    string
		everyRule bool                // the validator of every rule is used
		objects   map[string][]string // object: what its errors say
	}{
		{ruleNodesSchema, false, map[string][]string{
			`{metadata: {name: ok}, spec: {low: {size: 1}, high: {size: 1}, labels: {a: b}, workers: [{role: a}]}}`: nil,
			`{metadata: {name: no}, spec: {low: {size: 1}}}`:                                                        {"root"},
			`{metadata: {name: ok}, spec: {low: {size: 0}, high: {size: 12}}}`:                                      {"spec.low: Invalid value: low", "spec.high: Invalid value: high"},
			`{metadata: {name: ok}, spec: {labels: {a: b, c: toolong}}}`:                                            {"spec.labels[c]", "label"},
			`{metadata: {name: ok}, spec: {workers: [{role: a}, {role: bad}]}}`:                                     {"spec.workers[1]", "worker"},
			`{metadata: {name: ok}, spec: {loose: {foo: b}}}`:                                                       nil,
			`{metadata: {name: ok}, spec: {template: {apiVersion: v1, kind: X, metadata: {labels: {a: b, c: d}}}}}`: nil,
		}},
		{metadataRuleSchema, true, map[string][]string{
			`{metadata: {name: x}, spec: {size: 0}}`: {"metadata", "size"},
		}},
		{allOfRuleSchema, true, map[string][]string{
			`{spec: {count: 3}}`:  {"allOf"},
			`{spec: {count: -1}}`: {"count"},
		}},
	} {
		internal, structural := schemaFromYAML(t, c.schema)
		full := cel.NewValidator(structural, true, celconfig.PerCallLimit)
		plan := compileStructuralPlan(structural)
		if spec := plan.properties["spec"]; spec.properties["high"] != nil {
			spec.properties["high"] = spec.properties["low"] // as the precompiled plan shares equal nodes
		}
		// One library for all the objects: compiled nodes serve later ones.
		lib := &crdLibrary{load: func() (*apiextensions.JSONSchemaProps, error) { return internal, nil }}
		for text, messages := range c.objects {
			obj := objectFromYAML(t, text)
			obj["apiVersion"], obj["kind"] = "example.com/v1", "Example"
			got, err := lib.validateCEL(context.Background(), plan, obj)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := full.Validate(context.Background(), nil, structural, obj, nil, celconfig.RuntimeCELCostBudget)
			if sortedErrors(got) != sortedErrors(want) {
				t.Errorf("%s: node by node:\n%s\nevery rule:\n%s", text, sortedErrors(got), sortedErrors(want))
			}
			for _, m := range messages {
				if !strings.Contains(sortedErrors(got), m) {
					t.Errorf("%s: %q not in\n%s", text, m, sortedErrors(got))
				}
			}
			if len(messages) == 0 && len(got) > 0 {
				t.Errorf("%s: %v", text, got)
			}
		}
		if built := lib.cel != nil; built != c.everyRule {
			t.Errorf("the validator of every rule built: %v, want %v", built, c.everyRule)
		}
		if !c.everyRule && len(lib.celByNode) != 5 {
			t.Errorf("%d nodes compiled, want the 5 the CEL validator evaluates", len(lib.celByNode))
		}
	}
}

// schemaFromYAML reads an openAPIV3Schema in apiextensions' internal form
// and as a structural schema.
func schemaFromYAML(t *testing.T, text string) (*apiextensions.JSONSchemaProps, *structuralschema.Structural) {
	t.Helper()
	v1 := &apiextensionsv1.JSONSchemaProps{}
	if err := sigsyaml.Unmarshal([]byte(text), v1); err != nil {
		t.Fatal(err)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, internal, nil); err != nil {
		t.Fatal(err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	return internal, structural
}

// objectFromYAML reads an object with integers as int64, as the API
// server's decoding gives them.
func objectFromYAML(t *testing.T, text string) map[string]any {
	t.Helper()
	data, err := sigsyaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := k8sjson.Unmarshal(data, &obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// pruneSchema has what pruning treats apart: a nested field named
// metadata, x-kubernetes-preserve-unknown-fields over a list, an embedded
// resource, additionalProperties with a schema and without one.
const pruneSchema = `
type: object
properties:
  spec:
    type: object
    properties:
      metadata: {type: object, properties: {known: {type: string}}}
      loose:
        type: array
        x-kubernetes-preserve-unknown-fields: true
        items:
          type: object
          x-kubernetes-preserve-unknown-fields: true
          properties:
            fixed: {type: object, properties: {a: {type: string}}}
      looseList:
        type: array
        x-kubernetes-preserve-unknown-fields: true
        items: {type: object, properties: {fixed: {type: object, properties: {a: {type: string}}}}}
      template:
        type: object
        x-kubernetes-embedded-resource: true
        properties: {spec: {type: object, properties: {b: {type: string}}}}
      labels: {type: object, additionalProperties: {type: object, properties: {c: {type: string}}}}
      anything: {type: object, additionalProperties: true}
`

// TestPlanPruneMatchesLibrary: the plan drops what PruneWithOptions drops
// and names the same paths, on the cases the golden objects' mutations do
// not all reach.
func TestPlanPruneMatchesLibrary(t *testing.T) {
	_, structural := schemaFromYAML(t, pruneSchema)
	root := compileStructuralPlan(structural).rootPlan()
	for _, obj := range []string{
		`{apiVersion: v1, kind: X, metadata: {name: a, odd: 1}, extra: 1}`,
		`{spec: {metadata: {known: x, unknown: y, kind: z}}}`,
		`{spec: {loose: [{free: 1, fixed: {a: x, b: y}}, {fixed: {z: 1}}]}}`,
		`{spec: {looseList: [{free: 1, fixed: {a: x, b: y}}]}}`,
		`{spec: {template: {apiVersion: v1, kind: Pod, metadata: {name: x, odd: 1}, spec: {b: x, c: y}, status: {}}}}`,
		`{spec: {labels: {one: {c: x, d: y}}, anything: {k: {deep: [1]}}}}`,
	} {
		lib, mine := objectFromYAML(t, obj), objectFromYAML(t, obj)
		want := pruning.PruneWithOptions(lib, structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
		if !root.prunes(mine) && len(want) > 0 {
			t.Errorf("%s: prunes is false; the library drops %q", obj, want)
		}
		got := root.prune(mine)
		if !reflect.DeepEqual(mine, lib) || !slices.Equal(got, want) {
			t.Errorf("%s: the plan prunes to %v, dropping %q; the library to %v, dropping %q", obj, mine, got, lib, want)
		}
		if len(want) == 0 {
			t.Errorf("%s: nothing unknown: the case tests nothing", obj)
		}
	}
}
