package manifest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
)

// rayObjects are the ray.io objects of the golden files, each with the
// schema validator of its kind.
func rayObjects(t testing.TB) (objs []map[string]any, validators []createValidator) {
	t.Helper()
	v := NewValidator()
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := ReadDocuments(file, f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.Err != nil || d.Object.GroupVersionKind().Group != "ray.io" {
				continue
			}
			crd, err := v.crdFor(d.Object.GroupVersionKind())
			if err != nil || crd == nil {
				t.Fatalf("%s: %v", d.Source, err)
			}
			objs = append(objs, d.Object.Object)
			validators = append(validators, crd.schema)
		}
	}
	if len(objs) < 3 {
		t.Fatalf("only %d ray.io objects in the golden files", len(objs))
	}
	return objs, validators
}

// TestSchemaCheckConfirmsValidObjects: the compiled check says yes to the
// valid objects this project renders, so the steady state never needs
// kube-openapi's validator.
func TestSchemaCheckConfirmsValidObjects(t *testing.T) {
	objs, validators := rayObjects(t)
	for i, obj := range objs {
		if r := validators[i].full.Validate(obj); !r.IsValid() {
			t.Fatalf("%s: kube-openapi finds %v", obj["kind"], r.Errors)
		}
		if !validators[i].check.certainlyValid(obj, strfmt.Default) {
			t.Errorf("%s %v: the compiled check is not certain of a valid object", obj["kind"], obj["metadata"])
		}
	}
}

// mutationValues are the replacements tried at every place of an object:
// wrong types, empty and odd strings, numbers at the edges of the formats.
var mutationValues = []any{
	nil, "", "x", "Always", "IfNotPresent", "TCP", "1Gi", "1.5", "-1", "not a quantity", "Invalid_Name!",
	int64(0), int64(-1), int64(1), int64(65536), int64(1) << 40, float64(1.5), float64(3), float64(-2.5),
	true, false, map[string]any{}, map[string]any{"x": "y"}, []any{}, []any{"a"}, []any{int64(1)}, []any{map[string]any{}},
}

// agree fails the test when the compiled check is certain of an object
// kube-openapi rejects: the one thing the check must never do.
func agree(t *testing.T, v createValidator, obj any, what string) (certain bool) {
	t.Helper()
	certain = v.check.certainlyValid(obj, strfmt.Default)
	if certain {
		if r := v.full.Validate(obj); !r.IsValid() {
			t.Errorf("%s: the compiled check accepts what kube-openapi rejects: %v", what, r.Errors)
		}
	}
	return certain
}

// TestSchemaCheckNeverAcceptsWhatKubeOpenAPIRejects replaces, one at a
// time, every value of every golden ray.io object with each mutation
// value, and adds each schema property an object lacks with each value;
// whenever the compiled check is certain, kube-openapi must agree.
func TestSchemaCheckNeverAcceptsWhatKubeOpenAPIRejects(t *testing.T) {
	objs, validators := rayObjects(t)
	step := 1
	if testing.Short() {
		step = 17 // a sample
	}
	var cases, certain, rejected int
	for i, obj := range objs {
		v := validators[i]
		all := mutations(obj, schemaOf(v))
		for j := 0; j < len(all); j += step {
			m := all[j]
			mutated := m.apply(obj)
			cases++
			if agree(t, v, mutated, fmt.Sprintf("%s: %s = %#v", obj["kind"], m.path, m.value)) {
				certain++
			} else if !v.full.Validate(mutated).IsValid() {
				rejected++
			}
		}
	}
	t.Logf("%d mutations: %d confirmed by the compiled check, %d rejected by kube-openapi", cases, certain, rejected)
	if certain == 0 || rejected == 0 {
		t.Fatal("the mutations exercise only one side")
	}
}

// FuzzSchemaCheck replaces one place of a golden object with fuzzed JSON.
func FuzzSchemaCheck(f *testing.F) {
	f.Add(0, 0, []byte(`"x"`))
	f.Add(1, 7, []byte(`{"a": [1, 2.5, null]}`))
	f.Add(2, 30, []byte(`-12345678901`))
	objs, validators := rayObjects(f)
	muts := make([][]mutation, len(objs))
	for i, obj := range objs {
		muts[i] = mutations(obj, schemaOf(validators[i]))
	}
	f.Fuzz(func(t *testing.T, which, where int, value []byte) {
		var x any
		if json.Unmarshal(value, &x) != nil {
			return
		}
		x = runtime.DeepCopyJSONValue(normaliseNumbers(x))
		i := abs(which) % len(objs)
		m := muts[i][abs(where)%len(muts[i])]
		m.value = x
		agree(t, validators[i], m.apply(objs[i]), fmt.Sprintf("%s = %s", m.path, value))
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// normaliseNumbers makes numbers int64 when integral, as the API server's
// JSON decoding does.
func normaliseNumbers(x any) any {
	switch x := x.(type) {
	case float64:
		if x == float64(int64(x)) {
			return int64(x)
		}
	case map[string]any:
		for k, v := range x {
			x[k] = normaliseNumbers(v)
		}
	case []any:
		for i, v := range x {
			x[i] = normaliseNumbers(v)
		}
	}
	return x
}

// mutation sets the value at path (replacing or adding).
type mutation struct {
	path  []any // string keys and int indexes
	value any
}

func (m mutation) apply(obj map[string]any) map[string]any {
	out := runtime.DeepCopyJSON(obj)
	var cur any = out
	for i, step := range m.path {
		last := i == len(m.path)-1
		switch s := step.(type) {
		case string:
			mm := cur.(map[string]any)
			if last {
				mm[s] = runtime.DeepCopyJSONValue(m.value)
				return out
			}
			cur = mm[s]
		case int:
			a := cur.([]any)
			if last {
				a[s] = runtime.DeepCopyJSONValue(m.value)
				return out
			}
			cur = a[s]
		}
	}
	return out
}

func schemaOf(v createValidator) *spec.Schema { return v.full.Schema }

// mutations lists every replacement of an existing value and every
// addition of a property the schema knows at an existing object.
func mutations(obj map[string]any, s *spec.Schema) []mutation {
	var out []mutation
	var walk func(v any, s *spec.Schema, path []any)
	add := func(path []any) {
		for _, x := range mutationValues {
			out = append(out, mutation{path: append([]any(nil), path...), value: x})
		}
	}
	walk = func(v any, s *spec.Schema, path []any) {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p := append(append([]any(nil), path...), k)
				add(p)
				walk(v[k], propertyOf(s, k), p)
			}
			if s != nil {
				var missing []string
				for k := range s.Properties {
					if _, ok := v[k]; !ok {
						missing = append(missing, k)
					}
				}
				sort.Strings(missing)
				for _, k := range missing {
					p := append(append([]any(nil), path...), k)
					add(p)
					for _, e := range s.Properties[k].Enum {
						out = append(out, mutation{path: p, value: e})
					}
				}
			}
		case []any:
			var items *spec.Schema
			if s != nil && s.Items != nil {
				items = s.Items.Schema
			}
			for i := range v {
				p := append(append([]any(nil), path...), i)
				add(p)
				walk(v[i], items, p)
			}
		}
	}
	walk(obj, s, nil)
	return out
}

func propertyOf(s *spec.Schema, k string) *spec.Schema {
	if s == nil {
		return nil
	}
	if p, ok := s.Properties[k]; ok {
		return &p
	}
	if s.AdditionalProperties != nil {
		return s.AdditionalProperties.Schema
	}
	return nil
}

// BenchmarkSchemaCheck compares the compiled check with kube-openapi's
// validator on the same valid RayCluster.
func BenchmarkSchemaCheck(b *testing.B) {
	objs, validators := rayObjects(b)
	i := 0
	for ; objs[i]["kind"] != "RayCluster"; i++ {
	}
	b.Run("compiled", func(b *testing.B) {
		for b.Loop() {
			if !validators[i].check.certainlyValid(objs[i], strfmt.Default) {
				b.Fatal("not certain")
			}
		}
	})
	b.Run("kube-openapi", func(b *testing.B) {
		for b.Loop() {
			if !validators[i].full.Validate(objs[i]).IsValid() {
				b.Fatal("invalid")
			}
		}
	})
}

// TestValidateCreateMatchesStrategy: validateCreate returns exactly what
// apiextensions-apiserver's custom-resource strategy returns, on the golden
// ray.io objects and a sample of their mutations (defaulted as the API
// server does before validating).
func TestValidateCreateMatchesStrategy(t *testing.T) {
	v := NewValidator()
	objs, _ := rayObjects(t)
	step := 7
	if testing.Short() {
		step = 61
	}
	compared, withErrors := 0, 0
	for _, obj := range objs {
		u := &unstructured.Unstructured{Object: obj}
		crd, err := v.crdFor(u.GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		strategy := customresource.NewStrategy(scheme.Scheme, crd.namespaced, crd.gvk, crd.schema, nil, crd.structural, nil, nil, nil)
		all := mutations(obj, schemaOf(crd.schema))
		for j := 0; j < len(all); j += step {
			m := &unstructured.Unstructured{Object: all[j].apply(obj)}
			structuraldefaulting.Default(m.Object, crd.structural)
			want := strategy.Validate(context.Background(), m)
			got := crd.validateCreate(context.Background(), m)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s = %#v:\n got %v\nwant %v", all[j].path, all[j].value, got, want)
			}
			compared++
			if len(want) > 0 {
				withErrors++
			}
		}
	}
	t.Logf("%d objects compared, %d of them with errors", compared, withErrors)
	if withErrors == 0 || withErrors == compared {
		t.Fatal("the sample exercises only one side")
	}
}
