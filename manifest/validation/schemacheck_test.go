package validation

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	structuralobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"
)

// crdObjects are the custom resources the differential tests hold the
// fast paths to their libraries on, each with the schema validator of its
// kind: the ray.io objects of the golden files, and the Gateway API
// objects of the users' corpus (gateway.yaml) lint finds no error in (their schemas
// use what the ray.io ones do not: the ipv4 and ipv6 formats, oneOf,
// maxItems and CEL rules).
func crdObjects(t testing.TB) (objs []map[string]any, validators []createValidator) {
	t.Helper()
	v := NewValidator()
	add := func(d Document) {
		crd, err := v.crdFor(d.Object.GroupVersionKind())
		if err != nil || crd == nil {
			t.Fatalf("%s: %v", d.Source, err)
		}
		objs = append(objs, d.Object.Object)
		validators = append(validators, mustLib(t, crd).schema)
	}
	golden, _ := filepath.Glob("../testdata/*.yaml")
	var ray, gateway int
	for _, file := range append(golden, "testdata/users/gateway.yaml") {
		docs, err := LoadDocuments(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.Err != nil {
				continue
			}
			switch group := d.Object.GroupVersionKind().Group; {
			case group == "ray.io" && filepath.Dir(file) == "../testdata":
				add(d)
				ray++
			case group == "gateway.networking.k8s.io" && !hasError(v.Validate(d.Object)):
				add(d)
				gateway++
			}
		}
	}
	if ray < 3 || gateway < 5 {
		t.Fatalf("only %d ray.io objects in the golden files and %d valid Gateway API objects in the users' corpus", ray, gateway)
	}
	return objs, validators
}

func hasError(findings []Finding) bool {
	for _, f := range findings {
		if f.Severity == SeverityError {
			return true
		}
	}
	return false
}

// TestSchemaCheckConfirmsValidObjects: the compiled check says yes to the
// valid ray.io objects this project renders, so the steady state never
// needs kube-openapi's validator. (The Gateway API schemas use oneOf,
// which the check leaves to kube-openapi.)
func TestSchemaCheckConfirmsValidObjects(t *testing.T) {
	objs, validators := crdObjects(t)
	for i, obj := range objs {
		if r := validators[i].full.Validate(obj); !r.IsValid() {
			t.Fatalf("%s: kube-openapi finds %v", obj["kind"], r.Errors)
		}
		if rayTypes[obj["kind"].(string)] != nil && !validators[i].check.certainlyValid(obj, strfmt.Default) {
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
// time, every value of every object of crdObjects with each mutation
// value, and adds each schema property an object lacks with each value;
// whenever the compiled check is certain, kube-openapi must agree.
func TestSchemaCheckNeverAcceptsWhatKubeOpenAPIRejects(t *testing.T) {
	objs, validators := crdObjects(t)
	step := 1
	if testing.Short() {
		step = 37 // a sample
	}
	var cases, certain, rejected int
	for i, obj := range objs {
		v := validators[i]
		all := mutations(obj, schemaOf(v))
		printed := objectPrint(obj)
		for j := 0; j < len(all); j += step {
			m := all[j]
			mutated := m.apply(obj)
			cases++
			errs := rememberedWholeErrors(kubeOpenAPIOnly{v.full}, printed, m, mutated)
			switch {
			case v.check.certainlyValid(mutated, strfmt.Default):
				certain++
				if errs != "" {
					t.Errorf("%s: %s = %#v: the compiled check accepts what kube-openapi rejects: %s", obj["kind"], m.path, m.value, errs)
				}
			case errs != "":
				rejected++
			}
		}
	}
	t.Logf("%d mutations: %d confirmed by the compiled check, %d rejected by kube-openapi", cases, certain, rejected)
	if certain == 0 || rejected == 0 {
		t.Fatal("the mutations exercise only one side")
	}
}

// TestValueValidatorsMatchWhole: validating only the values the compiled
// check is not certain of, each with a validator of its own schema node
// (validateUncertain), finds word for word what kube-openapi's validator
// of the whole schema finds, on every object of crdObjects and every
// mutation of them — with the node schemas read from the precompiled
// form (the way a fresh process does) and cut from the whole schema in
// memory.
func TestValueValidatorsMatchWhole(t *testing.T) {
	v := NewValidator()
	objs, _ := crdObjects(t)
	step := 1
	if testing.Short() {
		step = 37
	}
	var compared, withErrors, partial int
	for _, obj := range objs {
		crd, err := v.crdFor((&unstructured.Unstructured{Object: obj}).GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		whole := kubeOpenAPIOnly{mustLib(t, crd).schema.full}
		precompiled := &crdLibrary{load: crd.lib.load, nodeAt: crd.lib.nodeAt, check: crd.check}
		inMemory := &crdLibrary{load: crd.lib.load, check: crd.check}
		if precompiled.nodeAt == nil {
			t.Fatalf("%s: the precompiled library reads whole schemas only", crd.gvk)
		}
		all := mutations(obj, whole.full.Schema)
		printed := objectPrint(obj)
		for j := 0; j < len(all); j += step {
			m := all[j]
			mutated := m.apply(obj)
			what := fmt.Sprintf("%s: %v = %#v", obj["kind"], m.path, m.value)
			errs := rememberedWholeErrors(whole, printed, m, mutated)
			uncertainMatches(t, inMemory, errs, mutated, what)
			belowRoot := uncertainMatches(t, precompiled, errs, mutated, what)
			compared++
			if errs != "" {
				withErrors++
				if belowRoot {
					partial++
				}
			}
		}
	}
	t.Logf("%d objects compared, %d with errors, %d of those validated below the root only", compared, withErrors, partial)
	if withErrors == 0 || withErrors == compared || partial == 0 {
		t.Fatal("the mutations exercise only one side")
	}
}

// uncertainMatchesWhole fails the test unless lib.validateUncertain finds
// on obj, word for word, what whole finds. It returns whole's errors and
// whether every value validated lies below the root.
func uncertainMatchesWhole(t *testing.T, lib *crdLibrary, whole kubeOpenAPIOnly, obj map[string]any, what string) (errs string, belowRoot bool) {
	t.Helper()
	errs = wholeErrors(whole, obj)
	return errs, uncertainMatches(t, lib, errs, obj, what)
}

// wholeErrors are the errors whole finds on obj, sorted.
func wholeErrors(whole kubeOpenAPIOnly, obj map[string]any) string {
	return sortedErrors(apiservervalidation.ValidateCustomResource(nil, obj, whole))
}

// wholeVerdicts holds wholeErrors' answers by mutation
// (rememberedWholeErrors).
var wholeVerdicts sync.Map // wholeVerdict → string

// wholeVerdict names a mutation of an object: the object by the SHA-256
// of its typedText, the mutation by the typedText of its path and value.
type wholeVerdict struct {
	object   [sha256.Size]byte
	mutation string
}

// objectPrint is what a wholeVerdict names obj by.
func objectPrint(obj map[string]any) [sha256.Size]byte {
	var b strings.Builder
	typedText(&b, obj)
	return sha256.Sum256([]byte(b.String()))
}

// rememberedWholeErrors is wholeErrors on mutated, m applied to the
// object printed as object (objectPrint), remembered:
// TestSchemaCheckNeverAcceptsWhatKubeOpenAPIRejects and
// TestValueValidatorsMatchWhole validate the same mutations of the same
// objects with the same whole schemas (each its own copy, from its own
// Validator; the object's apiVersion and kind pick the schema), and
// kube-openapi's validation is most of what either costs.
func rememberedWholeErrors(whole kubeOpenAPIOnly, object [sha256.Size]byte, m mutation, mutated map[string]any) string {
	var b strings.Builder
	typedText(&b, m.path)
	b.WriteString("=")
	typedText(&b, m.value)
	key := wholeVerdict{object, b.String()}
	if errs, ok := wholeVerdicts.Load(key); ok {
		return errs.(string)
	}
	errs := wholeErrors(whole, mutated)
	wholeVerdicts.Store(key, errs)
	return errs
}

// typedText writes v with the type of every value in it and its map keys
// sorted: two values written alike are equal, type for type (JSON would
// write int64(3) and float64(3) alike).
func typedText(b *strings.Builder, v any) {
	switch v := v.(type) {
	case map[string]any:
		b.WriteString("{")
		for _, k := range slices.Sorted(maps.Keys(v)) {
			b.WriteString(strconv.Quote(k) + ":")
			typedText(b, v[k])
			b.WriteString(",")
		}
		b.WriteString("}")
	case []any:
		b.WriteString("[")
		for _, x := range v {
			typedText(b, x)
			b.WriteString(",")
		}
		b.WriteString("]")
	case string:
		b.WriteString(strconv.Quote(v))
	default:
		fmt.Fprintf(b, "%T(%#v)", v, v)
	}
}

// uncertainMatches fails the test unless lib.validateUncertain finds on
// obj, word for word, want (the whole schema's errors). It returns whether
// every value validated lies below the root.
func uncertainMatches(t *testing.T, lib *crdLibrary, want string, obj map[string]any, what string) (belowRoot bool) {
	t.Helper()
	result, err := lib.validateUncertain(obj)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got := sortedErrors(apiservervalidation.ValidateCustomResource(nil, obj, validated{result})); got != want {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
	values := lib.check.uncertainValues(obj, strfmt.Default, "", nil, nil)
	return len(values) > 0 && !slices.ContainsFunc(values, func(u uncertainValue) bool { return len(u.steps) == 0 })
}

// A value of the wrong type in a fresh Validator is validated without
// reading the whole schema: only the node of the value is converted, and
// the version's schema is never decoded whole.
func TestWrongTypeReadsOnlyItsNode(t *testing.T) {
	v := NewValidator()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: small}
spec:
  headGroupSpec:
    rayStartParams: {}
    template: {spec: {containers: [{name: ray-head, image: rayproject/ray:2.46.0}]}}
  workerGroupSpecs:
  - {groupName: cpu, replicas: "1", rayStartParams: {}, template: {spec: {containers: [{name: w, image: rayproject/ray:2.46.0}]}}}
`), &u.Object); err != nil {
		t.Fatal(err)
	}
	findings := v.Validate(u)
	if len(findings) != 1 || findings[0].Path != "spec.workerGroupSpecs[0].replicas" || !strings.Contains(findings[0].Message, "must be of type integer") {
		t.Fatalf("findings %v", findings)
	}
	crd, _ := v.crdFor(u.GroupVersionKind())
	if crd.lib.propsLoaded.Load() {
		t.Error("the version's whole schema was decoded")
	}
	if keys := slices.Collect(maps.Keys(crd.lib.reachedSchemas)); len(keys) != 1 || keys[0] != "\"spec\"\"workerGroupSpecs\"[]\"replicas\"\x00." {
		t.Errorf("node schemas converted: %q", keys)
	}
}

// Values of ever new shapes at one node are each validated against what
// they reach, and the library keeps at most maxReachedSchemas of them.
func TestValueSchemasBounded(t *testing.T) {
	v := NewValidator()
	crd, err := v.crdFor(rayv1.GroupVersion.WithKind("RayCluster"))
	if err != nil {
		t.Fatal(err)
	}
	steps := []schemaStep{{property: "spec"}, {property: "headGroupSpec"}, {property: "rayStartParams"}}
	for i := range maxReachedSchemas + 100 {
		value := map[string]any{fmt.Sprintf("param-%d", i): int64(i)} // rayStartParams are strings
		s, err := crd.lib.valueSchema(steps, value)
		if err != nil {
			t.Fatal(err)
		}
		if r := validate.NewSchemaValidator(s, nil, "spec.headGroupSpec.rayStartParams", strfmt.Default).Validate(value); r.IsValid() {
			t.Fatalf("%v: valid", value)
		}
	}
	if n := len(crd.lib.reachedSchemas); n != maxReachedSchemas {
		t.Errorf("%d schemas kept, want %d", n, maxReachedSchemas)
	}
}

// FuzzSchemaCheck replaces one place of a golden object with fuzzed JSON.
func FuzzSchemaCheck(f *testing.F) {
	f.Add(0, 0, []byte(`"x"`))
	f.Add(1, 7, []byte(`{"a": [1, 2.5, null]}`))
	f.Add(2, 30, []byte(`-12345678901`))
	objs, validators := crdObjects(f)
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
	value any   // removedKey: the key at the end of path is deleted
}

// removedKey as a mutation's value deletes the key.
var removedKey = &struct{ removed bool }{}

func (m mutation) apply(obj map[string]any) map[string]any {
	out := runtime.DeepCopyJSON(obj)
	var cur any = out
	for i, step := range m.path {
		last := i == len(m.path)-1
		switch s := step.(type) {
		case string:
			mm := cur.(map[string]any)
			if last && m.value == any(removedKey) {
				delete(mm, s)
				return out
			}
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
			for _, k := range slices.Sorted(maps.Keys(v)) {
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
			if len(v) > 0 && len(path) > 0 { // the first item twice: list-type sets and maps refuse it
				out = append(out, mutation{path: append([]any(nil), path...), value: append(append([]any(nil), v...), v[0])})
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
	objs, validators := crdObjects(b)
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
// apiextensions-apiserver's custom-resource strategy returns, on the
// objects of crdObjects and a sample of their mutations (their nulls
// pruned and defaulted as the API server does before validating).
func TestValidateCreateMatchesStrategy(t *testing.T) {
	v := NewValidator()
	objs, _ := crdObjects(t)
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
		// The reference validates with kube-openapi alone: no fast path.
		strategy := customresource.NewStrategy(scheme.Scheme, crd.namespaced, crd.gvk, kubeOpenAPIOnly{mustLib(t, crd).schema.full}, nil, mustLib(t, crd).structural, nil, nil, nil)
		all := mutations(obj, schemaOf(mustLib(t, crd).schema))
		for j := 0; j < len(all); j += step {
			m := &unstructured.Unstructured{Object: all[j].apply(obj)}
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(m.Object, mustLib(t, crd).structural)
			structuraldefaulting.Default(m.Object, mustLib(t, crd).structural)
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

// TestStructuralPlanMatchesLibrary: on the objects of crdObjects and every
// mutation of them (plus, for pruning, an unknown field at each place),
// the compiled plan agrees with apiextensions-apiserver — prunes is true
// exactly when PruneWithOptions drops something, nullsPrunedAndDefaulted
// equals PruneNonNullableNullsWithoutDefaults then Default on a copy (and
// leaves its input alone),
// listTypesCertainlyValid is never true where ValidateListSetsAndMaps
// finds an error, and where reachesCELRule is false the CEL validator
// finds nothing.
func TestStructuralPlanMatchesLibrary(t *testing.T) {
	v := NewValidator()
	objs, _ := crdObjects(t)
	step := 1
	if testing.Short() {
		step = 29
	}
	var pruned, nullsPruned, listErrors, listCertain, celSkipped, celErrors, celReachedOnly, cases int
	for _, obj := range objs {
		u := &unstructured.Unstructured{Object: obj}
		crd, err := v.crdFor(u.GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		all := mutations(obj, schemaOf(mustLib(t, crd).schema))
		for _, m := range all[:len(all)/4] { // an unknown field beside the first keys
			if _, key := m.path[len(m.path)-1].(string); key {
				all = append(all, mutation{path: append(append([]any(nil), m.path[:len(m.path)-1]...), "unknownFieldX"), value: "x"})
			}
		}
		for j := 0; j < len(all); j += step {
			in := all[j].apply(obj)
			what := fmt.Sprintf("%s %v = %#v", obj["kind"], all[j].path, all[j].value)
			cases++

			lib := runtime.DeepCopyJSON(in)
			dropped := pruning.PruneWithOptions(lib, mustLib(t, crd).structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
			if got, want := crd.root.prunes(in), !equality.Semantic.DeepEqual(lib, in); got != want {
				t.Fatalf("%s: prunes = %v, library changed the object: %v (%v)", what, got, want, dropped)
			}
			mine := runtime.DeepCopyJSON(in)
			if paths := crd.root.prune(mine); !reflect.DeepEqual(mine, lib) || !slices.Equal(paths, dropped) {
				t.Fatalf("%s: the plan prunes to\n%v, dropping %q;\nthe library to\n%v, dropping %q", what, mine, paths, lib, dropped)
			}
			if len(dropped) > 0 {
				pruned++
			}

			before := runtime.DeepCopyJSON(in)
			want := runtime.DeepCopyJSON(in)
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(want, mustLib(t, crd).structural)
			if !reflect.DeepEqual(want, before) {
				nullsPruned++
			}
			structuraldefaulting.Default(want, mustLib(t, crd).structural)
			got := crd.plan.nullsPrunedAndDefaulted(in)
			if !reflect.DeepEqual(got, any(want)) {
				t.Fatalf("%s: nullsPrunedAndDefaulted differs from the library:\n got %v\nwant %v", what, got, want)
			}
			if !reflect.DeepEqual(in, before) {
				t.Fatalf("%s: nullsPrunedAndDefaulted changed its input", what)
			}

			errs := structurallisttype.ValidateListSetsAndMaps(nil, mustLib(t, crd).structural, want)
			certain := crd.plan.listTypesCertainlyValid(want)
			if certain && len(errs) > 0 {
				t.Fatalf("%s: list types certainly valid, the library finds %v", what, errs)
			}
			if certain {
				listCertain++
			}
			if len(errs) > 0 {
				listErrors++
			}

			if celValidator := mustLib(t, crd).cel; celValidator != nil {
				celErrs, _ := celValidator.Validate(context.Background(), nil, mustLib(t, crd).structural, want, nil, celconfig.RuntimeCELCostBudget)
				if crd.plan.reachesCELRule(want) {
					ownErrs, err := crd.lib.validateCEL(context.Background(), crd.plan, want)
					if err != nil {
						t.Fatal(err)
					}
					if got, want := sortedErrors(ownErrs), sortedErrors(celErrs); got != want {
						t.Fatalf("%s: the rules reached, node by node, find %s, every rule %s", what, got, want)
					}
					celReachedOnly++
				}
				if !crd.plan.reachesCELRule(want) {
					celSkipped++
					if len(celErrs) > 0 {
						t.Fatalf("%s: no CEL rule reached, yet the CEL validator finds %v", what, celErrs)
					}
				} else if len(celErrs) > 0 {
					celErrors++
				}
			}
		}
	}
	t.Logf("%d objects: %d pruned, %d with nulls pruned, %d with list-type errors, %d confirmed by the plan, %d reach no CEL rule, %d with CEL errors, %d validated by the rules they reach",
		cases, pruned, nullsPruned, listErrors, listCertain, celSkipped, celErrors, celReachedOnly)
	if pruned == 0 || nullsPruned == 0 || listErrors == 0 || listCertain == 0 || celSkipped == 0 || celErrors == 0 || celReachedOnly == 0 {
		t.Fatal("the mutations exercise only one side")
	}
}

// TestStructuralPlanListSets covers list-type sets, which the golden
// objects do not use: the plan is never certain where the library finds a
// duplicate.
func TestStructuralPlanListSets(t *testing.T) {
	set := "set"
	s := &structuralschema.Structural{
		Generic: structuralschema.Generic{Type: "object"},
		Properties: map[string]structuralschema.Structural{
			"values": {Generic: structuralschema.Generic{Type: "array"}, Extensions: structuralschema.Extensions{XListType: &set},
				Items: &structuralschema.Structural{Generic: structuralschema.Generic{Type: "integer"}}},
		},
	}
	plan := compileStructuralPlan(s)
	for _, values := range [][]any{
		{}, {int64(1)}, {int64(1), int64(2)}, {int64(1), int64(1)}, {"a", "b", "a"}, {int64(1), float64(1)},
		{map[string]any{}, map[string]any{}}, {nil, nil}, {true, false, true}, {[]any{int64(1)}, []any{int64(2)}},
	} {
		obj := map[string]any{"values": values}
		errs := structurallisttype.ValidateListSetsAndMaps(nil, s, obj)
		if plan.listTypesCertainlyValid(obj) && len(errs) > 0 {
			t.Errorf("%v: certain, the library finds %v", values, errs)
		}
		if len(errs) == 0 && !plan.listTypesCertainlyValid(obj) && comparableScalars(values) {
			t.Errorf("%v: distinct scalars, yet not certain", values)
		}
	}
}

func comparableScalars(values []any) bool {
	for _, v := range values {
		if !comparableScalar(v) {
			return false
		}
	}
	return true
}

// TestFromUnstructuredMatchesLibrary: on the golden ray.io objects and
// every mutation of them, raw and as admitted (nulls pruned, defaulted),
// fromUnstructured gives what
// runtime.DefaultUnstructuredConverter gives — the same typed object, or
// an error when it errs.
func TestFromUnstructuredMatchesLibrary(t *testing.T) {
	v := NewValidator()
	objs, _ := crdObjects(t)
	step := 1
	if testing.Short() {
		step = 29
	}
	var cases, failed, fast, refused int
	for _, obj := range objs {
		u := &unstructured.Unstructured{Object: obj}
		crd, err := v.crdFor(u.GroupVersionKind())
		if err != nil {
			t.Fatal(err)
		}
		if rayTypes[u.GetKind()] == nil {
			continue // decoded into Go types only for KubeRay's rules
		}
		typ := reflect.TypeOf(rayTypes[u.GetKind()]).Elem()
		for _, in := range []map[string]any{obj, crd.plan.nullsPrunedAndDefaulted(obj).(map[string]any)} {
			if err := decodeValue(in, reflect.New(typ).Elem()); err != nil {
				t.Errorf("%s: the golden object takes the library's path: %v", obj["kind"], err)
			}
		}
		all := mutations(obj, schemaOf(mustLib(t, crd).schema))
		for j := 0; j < len(all); j += step {
			raw := all[j].apply(obj)
			for _, in := range []map[string]any{raw, crd.plan.nullsPrunedAndDefaulted(raw).(map[string]any)} {
				cases++
				switch err := decodeValue(in, reflect.New(typ).Elem()); {
				case err == nil:
					fast++
				case errors.Is(err, errRefused):
					refused++
				}
				got, want := reflect.New(typ).Interface(), reflect.New(typ).Interface()
				gotErr := fromUnstructured(in, got)
				wantErr := runtime.DefaultUnstructuredConverter.FromUnstructured(in, want)
				if (gotErr == nil) != (wantErr == nil) {
					t.Fatalf("%s %v = %#v: error %v, library %v", obj["kind"], all[j].path, all[j].value, gotErr, wantErr)
				}
				if wantErr != nil {
					failed++
					continue
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s %v = %#v: decoded differently:\n got %+v\nwant %+v", obj["kind"], all[j].path, all[j].value, got, want)
				}
			}
		}
	}
	t.Logf("%d objects decoded the same (%d without the library), %d refused by both (%d without asking the library)", cases-failed, fast, failed, refused)
	if failed == 0 || refused == 0 || refused == failed {
		t.Fatal("the mutations do not exercise every path")
	}
}

var rayTypes = map[string]any{"RayCluster": &rayv1.RayCluster{}, "RayJob": &rayv1.RayJob{}, "RayService": &rayv1.RayService{}}

// TestMetadataDecodesMatchesGetObjectMeta: metadataDecodes is never true
// where the API server's metadata decoding fails.
func TestMetadataDecodesMatchesGetObjectMeta(t *testing.T) {
	objs, _ := crdObjects(t)
	var certain, failing int
	for _, obj := range objs {
		meta := map[string]any{"metadata": obj["metadata"]}
		for _, m := range mutations(meta, nil) {
			in := m.apply(meta)
			_, _, err := structuralobjectmeta.GetObjectMeta(in, false)
			if err != nil {
				failing++
			}
			if metadataDecodes(in) {
				certain++
				if err != nil {
					t.Errorf("%v = %#v: decodes, yet GetObjectMeta fails: %v", m.path, m.value, err)
				}
			}
		}
		for _, key := range []string{"Labels", "NAME", "labels"} {
			in := map[string]any{"metadata": map[string]any{"name": "x", key: "not a map"}}
			if _, _, err := structuralobjectmeta.GetObjectMeta(in, false); err != nil && metadataDecodes(in) {
				t.Errorf("%s: decodes, yet GetObjectMeta fails: %v", key, err)
			}
		}
	}
	t.Logf("%d metadata confirmed, %d refused by GetObjectMeta", certain, failing)
	if certain == 0 || failing == 0 {
		t.Fatal("the mutations exercise only one side")
	}
}

// FuzzFastPaths puts fuzzed JSON at one place of a golden object and holds
// every fast path to its library: pruning, defaulting, list types, the
// typed decode, and the schema check.
func FuzzFastPaths(f *testing.F) {
	f.Add(0, 3, []byte(`[{"name": "a"}, {"name": "a"}]`))
	f.Add(1, 40, []byte(`{"unknown": 1, "name": null}`))
	f.Add(2, 90, []byte(`"1.5Gi"`))
	v := NewValidator()
	objs, _ := crdObjects(f)
	muts := make([][]mutation, len(objs))
	crds := make([]*crdValidator, len(objs))
	for i, obj := range objs {
		crd, err := v.crdFor((&unstructured.Unstructured{Object: obj}).GroupVersionKind())
		if err != nil {
			f.Fatal(err)
		}
		crds[i] = crd
		muts[i] = mutations(obj, schemaOf(mustLib(f, crd).schema))
	}
	f.Fuzz(func(t *testing.T, which, where int, value []byte) {
		var x any
		if json.Unmarshal(value, &x) != nil {
			return
		}
		i := abs(which) % len(objs)
		m := muts[i][abs(where)%len(muts[i])]
		m.value = runtime.DeepCopyJSONValue(normaliseNumbers(x))
		in, crd := m.apply(objs[i]), crds[i]

		lib := runtime.DeepCopyJSON(in)
		pruning.PruneWithOptions(lib, mustLib(t, crd).structural, true, structuralschema.UnknownFieldPathOptions{})
		if crd.root.prunes(in) == equality.Semantic.DeepEqual(lib, in) {
			t.Fatalf("%v = %s: prunes disagrees with the library", m.path, value)
		}
		want := runtime.DeepCopyJSON(in)
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(want, mustLib(t, crd).structural)
		structuraldefaulting.Default(want, mustLib(t, crd).structural)
		if got := crd.plan.nullsPrunedAndDefaulted(in); !reflect.DeepEqual(got, any(want)) {
			t.Fatalf("%v = %s: nullsPrunedAndDefaulted differs from the library", m.path, value)
		}
		if crd.plan.listTypesCertainlyValid(want) && len(structurallisttype.ValidateListSetsAndMaps(nil, mustLib(t, crd).structural, want)) > 0 {
			t.Fatalf("%v = %s: list types certain, the library disagrees", m.path, value)
		}
		if typed := rayTypes[objs[i]["kind"].(string)]; typed != nil {
			typ := reflect.TypeOf(typed).Elem()
			got, exp := reflect.New(typ).Interface(), reflect.New(typ).Interface()
			gotErr, expErr := fromUnstructured(want, got), runtime.DefaultUnstructuredConverter.FromUnstructured(want, exp)
			if (gotErr == nil) != (expErr == nil) || (expErr == nil && !reflect.DeepEqual(got, exp)) {
				t.Fatalf("%v = %s: fromUnstructured differs from the library (%v, %v)", m.path, value, gotErr, expErr)
			}
		}
		agree(t, mustLib(t, crd).schema, want, fmt.Sprintf("%v = %s", m.path, value))
	})
}

// TestSchemaCheckBoundsMatchKubeOpenAPI: kube-openapi compares an integer
// value with a bound truncated to an integer (MaximumNativeType), so a
// fractional bound, or one past 2^53 where float64 loses integers, must
// not be compared as a float: the check is never certain where
// kube-openapi rejects, and still certain of plainly valid values.
func TestSchemaCheckBoundsMatchKubeOpenAPI(t *testing.T) {
	const big = 1 << 53
	bounds := []float64{10.5, -0.5, 0.5, 10, big, big + 2, -big, 1e19, -1e19, 1 << 63}
	values := []any{int64(0), int64(9), int64(10), int64(11), int64(-1), int64(big - 1), int64(big), int64(big + 1), int64(big + 3),
		int64(-big - 1), float64(10), float64(10.5), float64(0.25)}
	var certain int
	for _, typ := range []string{"integer", "number"} {
		for _, bound := range bounds {
			for _, exclusive := range []bool{false, true} {
				for _, which := range []string{"maximum", "minimum"} {
					s := &spec.Schema{}
					s.Type = spec.StringOrArray{typ}
					if which == "maximum" {
						s.Maximum, s.ExclusiveMaximum = &bound, exclusive
					} else {
						s.Minimum, s.ExclusiveMinimum = &bound, exclusive
					}
					v := createValidator{check: compileSchemaCheck(s, strfmt.Default), full: validate.NewSchemaValidator(s, nil, "", strfmt.Default)}
					for _, value := range values {
						if agree(t, v, value, fmt.Sprintf("type %s, %s %v (exclusive %v), value %v", typ, which, bound, exclusive, value)) {
							certain++
						}
					}
				}
			}
		}
	}
	// Plainly inside a bound is still confirmed.
	ten := float64(10)
	s := &spec.Schema{}
	s.Type, s.Maximum = spec.StringOrArray{"integer"}, &ten
	if !compileSchemaCheck(s, strfmt.Default).certainlyValid(int64(9), strfmt.Default) {
		t.Error("9 under a maximum of 10 is not certain")
	}
	if certain == 0 {
		t.Fatal("the check is never certain")
	}
}

// libraryParts are a CRD version's library side, every part compiled.
type libraryParts struct {
	structural *structuralschema.Structural
	schema     createValidator
	cel        *cel.Validator
}

// createValidator is a version's compiled check beside kube-openapi's
// validator of its whole schema, as apiextensions' NewSchemaValidator
// builds it: the reference the fast paths are held to.
type createValidator struct {
	check *schemaCheck
	full  *validate.SchemaValidator
}

// wholeValidators: each library's createValidator, built once.
var wholeValidators sync.Map // *crdLibrary → createValidator

// mustLib is a CRD version's library side.
func mustLib(t testing.TB, c *crdValidator) libraryParts {
	t.Helper()
	whole, ok := wholeValidators.Load(c.lib)
	if !ok {
		props, err := c.lib.schemaProps()
		if err != nil {
			t.Fatal(err)
		}
		_, openapiSchema, err := apiservervalidation.NewSchemaValidator(props)
		if err != nil {
			t.Fatal(err)
		}
		whole, _ = wholeValidators.LoadOrStore(c.lib, createValidator{check: c.check, full: validate.NewSchemaValidator(openapiSchema, nil, "", strfmt.Default)})
	}
	celValidator, structural, err := c.lib.celValidator()
	if err != nil {
		t.Fatal(err)
	}
	return libraryParts{structural: structural, schema: whole.(createValidator), cel: celValidator}
}

// kubeOpenAPIOnly validates with kube-openapi's validator alone.
type kubeOpenAPIOnly struct{ full *validate.SchemaValidator }

func (k kubeOpenAPIOnly) Validate(obj any, _ ...apiservervalidation.ValidationOption) *validate.Result {
	return k.full.Validate(obj)
}

func (k kubeOpenAPIOnly) ValidateUpdate(obj, _ any, _ ...apiservervalidation.ValidationOption) *validate.Result {
	return k.full.Validate(obj)
}

// sortedErrors lists errors in an order that does not depend on map
// iteration.
func sortedErrors(errs field.ErrorList) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Error()
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestValueValidatorsMatchWholeOnEveryFeature holds validateUncertain to
// a validator of the whole schema on what the embedded CRDs do not use —
// additional properties at the root and forbidden ones, allOf, anyOf,
// oneOf, not, patternProperties, tuples, uniqueItems, int-or-string,
// nullable enums, property counts — with every mutation of an object and
// an unknown key added at each of its objects.
func TestValueValidatorsMatchWholeOnEveryFeature(t *testing.T) {
	v1 := &apiextensionsv1.JSONSchemaProps{}
	if err := yaml.Unmarshal([]byte(`
type: object
required: [closed]
additionalProperties:
  type: object
  additionalProperties: false
  properties:
    n: {type: integer, minimum: 0}
properties:
  closed:
    type: object
    additionalProperties: false
    properties:
      a: {type: string, maxLength: 3}
      b: {type: integer, nullable: true}
  all:
    allOf:
    - {type: object, required: [x]}
    - {type: object, properties: {x: {type: string, enum: [p, q]}}}
    properties:
      x: {type: string}
      y: {type: integer}
  any:
    anyOf: [{type: string}, {type: integer, minimum: 5}]
  one:
    oneOf: [{type: string}, {type: integer}]
  neg:
    not: {type: string}
  shaped:
    type: object
    properties:
      kind: {type: string}
      size: {type: integer}
    anyOf:
    - {required: [size], properties: {size: {minimum: 1}}}
    - {required: [kind], properties: {kind: {enum: [small]}}}
    oneOf:
    - {properties: {kind: {maxLength: 5}}}
    not: {required: [forbidden], properties: {forbidden: {type: string}}}
  pattern:
    type: object
    patternProperties:
      "^x-": {type: integer}
    properties:
      keep: {type: string}
  ios:
    x-kubernetes-int-or-string: true
  list:
    type: array
    maxItems: 3
    items:
      type: object
      required: [k]
      properties:
        k: {type: string, pattern: "^[a-z]+$"}
        v: {type: number, maximum: 10, exclusiveMaximum: true}
  unique:
    type: array
    uniqueItems: true
    items: {type: string}
  tuple:
    type: array
    items: [{type: string}, {type: integer}]
  mapOfLists:
    type: object
    additionalProperties: {type: array, items: {type: string, format: ipv4}}
  counted:
    type: object
    minProperties: 1
    maxProperties: 2
    x-kubernetes-preserve-unknown-fields: true
  nul:
    type: string
    nullable: true
    enum: [a, b]
`), v1); err != nil {
		t.Fatal(err)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v1, internal, nil); err != nil {
		t.Fatal(err)
	}
	_, openapiSchema, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		t.Fatal(err)
	}
	whole := kubeOpenAPIOnly{validate.NewSchemaValidator(openapiSchema, nil, "", strfmt.Default)}
	lib := &crdLibrary{load: func() (*apiextensions.JSONSchemaProps, error) { return internal, nil }, check: compileSchemaCheck(openapiSchema, strfmt.Default)}
	// The same schema in the precompiled form, where only what a value
	// reaches of its node is decoded (decodeReached).
	compact, err := compactSchemaJSON(internal)
	if err != nil {
		t.Fatal(err)
	}
	precompiled := &crdLibrary{load: lib.load, nodeAt: func(steps []schemaStep) ([]byte, error) { return schemaNodeAt(compact, steps) }, check: lib.check}
	obj := objectFromYAML(t, `
closed: {a: abc, b: 1}
all: {x: p, y: 2}
any: hello
one: s
neg: 3
shaped: {kind: small, size: 2}
pattern: {keep: k, x-one: 1}
ios: 3
list: [{k: a, v: 1.5}, {k: b}]
unique: [a, b]
tuple: [s, 1]
mapOfLists: {m: [1.2.3.4]}
counted: {z: 1}
nul: a
extra: {n: 1}
`)
	if r := whole.full.Validate(obj); !r.IsValid() {
		t.Fatalf("the object is not valid: %v", r.Errors)
	}
	all := mutations(obj, openapiSchema)
	var addUnknown func(v any, path []any)
	addUnknown = func(v any, path []any) {
		switch v := v.(type) {
		case map[string]any:
			all = append(all, mutation{path: append(slices.Clone(path), "unknownKey"), value: int64(-1)})
			for k, e := range v {
				// Without the key (its schema is then not reached), and
				// with a value of the wrong type beside the others.
				all = append(all, mutation{path: append(slices.Clone(path), k), value: removedKey})
				addUnknown(e, append(slices.Clone(path), k))
			}
		case []any:
			for i, e := range v {
				addUnknown(e, append(slices.Clone(path), i))
			}
		}
	}
	addUnknown(obj, nil)
	var withErrors, belowRoot int
	for _, m := range all {
		mutated := m.apply(obj)
		errs, below := uncertainMatchesWhole(t, lib, whole, mutated, fmt.Sprintf("%v = %#v", m.path, m.value))
		uncertainMatches(t, precompiled, errs, mutated, fmt.Sprintf("precompiled: %v = %#v", m.path, m.value))
		if errs != "" {
			withErrors++
			if below {
				belowRoot++
			}
		}
	}
	t.Logf("%d mutations, %d with errors, %d of those validated below the root only", len(all), withErrors, belowRoot)
	if withErrors == 0 || withErrors == len(all) || belowRoot == 0 {
		t.Fatal("the mutations exercise only one side")
	}
}
