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

// ruleNodesSchema has a rule at the root (on metadata, which only a
// resource's root declares), on two properties of the same shape with
// different rules, on map values, on list items and in an allOf.
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
      guarded:
        type: object
        properties: {count: {type: integer}}
        allOf:
        - x-kubernetes-validations: [{rule: "self.count != 3", message: allOf}]
`

// TestValidateCELNodeByNode: validating each node reached on its own finds
// what the validator of every rule finds, paths included — a root rule on
// metadata, two nodes of one shape (which the precompiled plan stores
// once) with different rules, map values, list items, a rule in allOf.
func TestValidateCELNodeByNode(t *testing.T) {
	v1 := &apiextensionsv1.JSONSchemaProps{}
	if err := sigsyaml.Unmarshal([]byte(ruleNodesSchema), v1); err != nil {
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
	full := cel.NewValidator(structural, true, celconfig.PerCallLimit)
	plan := compileStructuralPlan(structural)
	spec := plan.properties["spec"]
	spec.properties["high"] = spec.properties["low"] // as the precompiled plan shares equal nodes
	for _, c := range []struct {
		name string
		obj  string
		want []string // in the errors, the messages found
	}{
		{"valid", `{metadata: {name: ok}, spec: {low: {size: 1}, high: {size: 1}, labels: {a: b}, workers: [{role: a}], guarded: {count: 1}}}`, nil},
		{"root", `{metadata: {name: no}, spec: {low: {size: 1}}}`, []string{"root"}},
		{"same shape, other rules", `{metadata: {name: ok}, spec: {low: {size: 0}, high: {size: 12}}}`, []string{"spec.low: Invalid value: low", "spec.high: Invalid value: high"}},
		{"map values", `{metadata: {name: ok}, spec: {labels: {a: b, c: toolong}}}`, []string{"spec.labels[c]", "label"}},
		{"list items", `{metadata: {name: ok}, spec: {workers: [{role: a}, {role: bad}]}}`, []string{"spec.workers[1]", "worker"}},
		{"allOf", `{metadata: {name: ok}, spec: {guarded: {count: 3}, low: {size: 0}}}`, []string{"allOf", "low"}},
	} {
		data, err := sigsyaml.YAMLToJSON([]byte(c.obj))
		if err != nil {
			t.Fatal(err)
		}
		obj := map[string]any{}
		if err := k8sjson.Unmarshal(data, &obj); err != nil { // integers as int64
			t.Fatal(err)
		}
		obj["apiVersion"], obj["kind"] = "example.com/v1", "Example"
		lib := &crdLibrary{load: func() (*apiextensions.JSONSchemaProps, error) { return internal, nil }}
		got, err := lib.validateCEL(context.Background(), plan, obj)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := full.Validate(context.Background(), nil, structural, obj, nil, celconfig.RuntimeCELCostBudget)
		if sortedErrors(got) != sortedErrors(want) {
			t.Errorf("%s: node by node:\n%s\nevery rule:\n%s", c.name, sortedErrors(got), sortedErrors(want))
		}
		for _, w := range c.want {
			if !strings.Contains(sortedErrors(got), w) {
				t.Errorf("%s: %q not in\n%s", c.name, w, sortedErrors(got))
			}
		}
		if len(c.want) == 0 && len(got) > 0 {
			t.Errorf("%s: %v", c.name, got)
		}
	}
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
	v1 := &apiextensionsv1.JSONSchemaProps{}
	if err := sigsyaml.Unmarshal([]byte(pruneSchema), v1); err != nil {
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
	root := compileStructuralPlan(structural).rootPlan()
	for _, obj := range []string{
		`{apiVersion: v1, kind: X, metadata: {name: a, odd: 1}, extra: 1}`,
		`{spec: {metadata: {known: x, unknown: y, kind: z}}}`,
		`{spec: {loose: [{free: 1, fixed: {a: x, b: y}}, {fixed: {z: 1}}]}}`,
		`{spec: {looseList: [{free: 1, fixed: {a: x, b: y}}]}}`,
		`{spec: {template: {apiVersion: v1, kind: Pod, metadata: {name: x, odd: 1}, spec: {b: x, c: y}, status: {}}}}`,
		`{spec: {labels: {one: {c: x, d: y}}, anything: {k: {deep: [1]}}}}`,
	} {
		data, err := sigsyaml.YAMLToJSON([]byte(obj))
		if err != nil {
			t.Fatal(err)
		}
		lib, mine := map[string]any{}, map[string]any{}
		if err := k8sjson.Unmarshal(data, &lib); err != nil {
			t.Fatal(err)
		}
		if err := k8sjson.Unmarshal(data, &mine); err != nil {
			t.Fatal(err)
		}
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
