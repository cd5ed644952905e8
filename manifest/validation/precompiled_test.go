package validation

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/golden"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	k8sjson "k8s.io/apimachinery/pkg/util/json"
)

// TestPrecompiledMatchesCRDs keeps precompiled/ what the verbatim CRDs in
// crds/ compile to (regenerate with go generate ./manifest/validation/, which
// runs this test with -update): the fast paths' bytes are the same, and
// decoding them gives fast paths deeply equal to those compiled from the
// CRDs; each version's schema (the library's side) loads deeply equal to
// the CRD's, descriptions dropped.
func TestPrecompiledMatchesCRDs(t *testing.T) {
	files, err := fs.Glob(embeddedCRDs, "crds/*.yaml")
	if err != nil || len(files) < 10 {
		t.Fatalf("%d embedded CRDs (%v)", len(files), err)
	}
	want := map[string]bool{}
	for _, name := range files {
		compiled, err := compileCRD(name)
		if err != nil || len(compiled) == 0 {
			t.Fatalf("%s: %d versions (%v)", name, len(compiled), err)
		}
		data, err := encodePrecompiled(compiled)
		if err != nil {
			t.Fatal(err)
		}
		path := precompiledName(name)
		want[path] = true
		if golden.FlagUpdate() {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for gvk, c := range compiled {
			props, err := c.lib.schemaProps()
			if err != nil {
				t.Fatal(err)
			}
			withoutDescriptions(props) // this compile's own copy
			schemaJSON, err := compactSchemaJSON(props)
			if err != nil {
				t.Fatal(err)
			}
			schemaPath := precompiledSchemaName(name, gvk.Version)
			want[schemaPath] = true
			if golden.FlagUpdate() {
				if err := os.WriteFile(schemaPath, schemaJSON, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			loaded, err := loadPrecompiledSchema(name, gvk.Version)()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(loaded, props) {
				t.Errorf("%s: the precompiled schema of %s differs from the CRD's without descriptions; run go generate ./manifest/validation/", schemaPath, gvk)
			}
		}
		if golden.FlagUpdate() {
			continue
		}
		embedded, err := precompiledFS.ReadFile(path)
		if err != nil || !bytes.Equal(embedded, data) {
			t.Errorf("%s differs from what %s compiles to (%v); run go generate ./manifest/validation/", path, name, err)
			continue
		}
		decoded, err := decodePrecompiled(embedded, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(decoded) != len(compiled) {
			t.Errorf("%s: %d versions decoded, %d compiled", name, len(decoded), len(compiled))
		}
		for gvk, c := range compiled {
			d := decoded[gvk]
			if d == nil {
				t.Errorf("%s: %s not decoded", name, gvk)
				continue
			}
			if !reflect.DeepEqual(d.plan, c.plan) || !reflect.DeepEqual(d.root, c.root) {
				t.Errorf("%s %s: the decoded structural plan differs from the compiled one", name, gvk)
			}
			if !reflect.DeepEqual(d.check, c.check) {
				t.Errorf("%s %s: the decoded schema check differs from the compiled one", name, gvk)
			}
			if d.namespaced != c.namespaced || d.statusSubresource != c.statusSubresource || d.embedded != c.embedded || d.hasCELRules != c.hasCELRules {
				t.Errorf("%s %s: decoded flags %v %v %v %v, compiled %v %v %v %v", name, gvk,
					d.namespaced, d.statusSubresource, d.embedded, d.hasCELRules, c.namespaced, c.statusSubresource, c.embedded, c.hasCELRules)
			}
		}
	}
	if golden.FlagUpdate() {
		return
	}
	stored, _ := fs.Glob(precompiledFS, "precompiled/*")
	for _, path := range stored {
		if !want[path] {
			t.Errorf("%s: no embedded CRD compiles to it; remove it", path)
		}
	}
}

// TestPrecompiledDecodeRefusesDamage: a truncated or altered precompiled
// file is an error (or, for a change that keeps it well formed, other
// values), never a panic.
func TestPrecompiledDecodeRefusesDamage(t *testing.T) {
	const name = "crds/ray.io_rayclusters.yaml"
	data, err := precompiledFS.ReadFile(precompiledName(name))
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(data); n += 1 + n/50 {
		if _, err := decodePrecompiled(data[:n], name); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(data))
		}
	}
	for i := len(precompiledMagic); i < len(data); i += 7 {
		altered := bytes.Clone(data)
		altered[i] ^= 0xff
		decodePrecompiled(altered, name) // must not panic
	}
}

// compactSchemaJSON is a schema in apiextensions' internal form as JSON,
// without the fields that hold their zero value (the internal type has no
// omitempty tags): nulls, and false or "" in the fields of type bool or
// string, which decode back to the same zero. Values (default, enum,
// example) are kept as they are.
func compactSchemaJSON(props *apiextensions.JSONSchemaProps) ([]byte, error) {
	plain := map[string]bool{}
	for _, t := range []reflect.Type{reflect.TypeFor[apiextensions.JSONSchemaProps](), reflect.TypeFor[apiextensions.ValidationRule]()} {
		for i := range t.NumField() {
			if k := t.Field(i).Type.Kind(); k == reflect.Bool || k == reflect.String {
				plain[t.Field(i).Name] = true
			}
		}
	}
	values := map[string]bool{"Default": true, "Enum": true, "Example": true}
	data, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	var v any
	if err := k8sjson.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	var compact func(v any)
	compact = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, child := range v {
				if child == nil || plain[k] && (child == false || child == "") {
					delete(v, k)
				} else if !values[k] {
					compact(child)
				}
			}
		case []any:
			for _, child := range v {
				compact(child)
			}
		}
	}
	compact(v)
	return json.Marshal(v)
}

// TestPrecompiledNodeSchemas: the schema of every node of every
// precompiled version, read alone (precompiledNodeAt, skipping the JSON
// of the rest), is deeply equal to that node of the whole schema decoded,
// both decoded whole and by decodeReached for a value that reaches every
// part of the node.
func TestPrecompiledNodeSchemas(t *testing.T) {
	files, err := fs.Glob(precompiledFS, "precompiled/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("%d precompiled schemas (%v)", len(files), err)
	}
	nodes := 0
	for _, file := range files {
		base := strings.TrimSuffix(strings.TrimPrefix(file, "precompiled/"), ".json")
		crdFile, version := "crds/"+base[:strings.LastIndex(base, ".")]+".yaml", base[strings.LastIndex(base, ".")+1:]
		if precompiledSchemaName(crdFile, version) != file {
			t.Fatalf("%s: read as %s %s", file, crdFile, version)
		}
		whole, err := loadPrecompiledSchema(crdFile, version)()
		if err != nil {
			t.Fatal(err)
		}
		at := precompiledNodeAt(crdFile, version)
		var walk func(s *apiextensions.JSONSchemaProps, steps []schemaStep)
		walk = func(s *apiextensions.JSONSchemaProps, steps []schemaStep) {
			nodes++
			if testing.Short() && nodes%13 != 0 {
				goto children // a sample
			}
			if node, err := at(steps); err != nil {
				t.Fatalf("%s at %s: %v", file, stepsKey(steps), err)
			} else {
				alone := &apiextensions.JSONSchemaProps{}
				if err := k8sjson.Unmarshal(node, alone); err != nil {
					t.Fatalf("%s at %s: %v", file, stepsKey(steps), err)
				}
				if !reflect.DeepEqual(alone, s) {
					t.Fatalf("%s at %s: read alone, the node differs from the whole schema's", file, stepsKey(steps))
				}
				reached, err := decodeReached(node, reachingEvery(s))
				if err != nil {
					t.Fatalf("%s at %s: %v", file, stepsKey(steps), err)
				}
				if !reflect.DeepEqual(reached, s) {
					t.Fatalf("%s at %s: decoded for a value that reaches all of it, the node differs from the whole schema's", file, stepsKey(steps))
				}
			}
		children:
			for name, p := range s.Properties {
				walk(&p, append(slices.Clone(steps), schemaStep{property: name}))
			}
			if s.Items != nil && s.Items.Schema != nil {
				walk(s.Items.Schema, append(slices.Clone(steps), schemaStep{items: true}))
			}
			if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				walk(s.AdditionalProperties.Schema, append(slices.Clone(steps), schemaStep{additional: true}))
			}
		}
		walk(whole, nil)
		if _, err := at([]schemaStep{{property: "noSuchField"}}); err == nil {
			t.Errorf("%s: a node that is not there was read", file)
		}
	}
	t.Logf("%d nodes of %d schemas", nodes, len(files))
}

// reachingEvery are values that together reach every part of s: for each
// property an object with that property alone, holding in turn each of
// the values that reach all of the property's schema, the same for
// additionalProperties, a list of the values for items, and those of the
// schemas s combines.
func reachingEvery(s *apiextensions.JSONSchemaProps) []any {
	var values []any
	for name, p := range s.Properties {
		for _, v := range reachingEvery(&p) {
			values = append(values, map[string]any{name: v})
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		for _, v := range reachingEvery(s.AdditionalProperties.Schema) {
			values = append(values, map[string]any{"(not a property)": v})
		}
	}
	if s.Items != nil && s.Items.Schema != nil {
		values = append(values, reachingEvery(s.Items.Schema))
	}
	for _, list := range [][]apiextensions.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range list {
			values = append(values, reachingEvery(&list[i])...)
		}
	}
	if s.Not != nil {
		values = append(values, reachingEvery(s.Not)...)
	}
	if len(values) == 0 {
		return []any{nil}
	}
	return values
}

// memberValue finds a member past others whose keys and strings hold
// quotes, escapes and brackets, and a key written with escapes.
func TestMemberValue(t *testing.T) {
	obj := []byte(` { "a\"}" : {"x": "]}\\", "y": [1, {"z": "{"}]}, "b": -1.5e3 ,"\u003cc\u003e": [ ], "d":"v"}`)
	for key, want := range map[string]string{`a"}`: `{"x": "]}\\", "y": [1, {"z": "{"}]}`, "b": "-1.5e3", "<c>": "[ ]", "d": `"v"`} {
		got, err := memberValue(obj, key)
		if err != nil || string(got) != want {
			t.Errorf("%q: %q, %v; want %q", key, got, err, want)
		}
	}
	for _, bad := range [][]byte{obj, []byte(`[1]`), []byte(`{"e": "cut`), []byte(``)} {
		if got, err := memberValue(bad, "e"); err == nil {
			t.Errorf("%q: found %q", bad, got)
		}
	}
	for _, empty := range []string{"{}", " { } "} {
		if _, err := memberValue([]byte(empty), "a"); err == nil || !strings.Contains(err.Error(), `no member "a"`) {
			t.Errorf("%q: %v", empty, err)
		}
	}
}

// decodeReached decodes of a pod template only the fields a value has:
// one container with a name reaches three properties of the hundreds,
// and keeps what is read of the value's keys (required).
func TestDecodeReachedLeavesOutWhatIsNotReached(t *testing.T) {
	node, err := precompiledNodeAt("crds/ray.io_rayclusters.yaml", "v1")([]schemaStep{{property: "spec"}, {property: "headGroupSpec"}, {property: "template"}})
	if err != nil {
		t.Fatal(err)
	}
	whole := &apiextensions.JSONSchemaProps{}
	if err := k8sjson.Unmarshal(node, whole); err != nil {
		t.Fatal(err)
	}
	value := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "x"}}}}
	reached, err := decodeReached(node, []any{value})
	if err != nil {
		t.Fatal(err)
	}
	podSpec := reached.Properties["spec"]
	container := podSpec.Properties["containers"].Items.Schema
	if len(reached.Properties) != 1 || len(podSpec.Properties) != 1 || len(container.Properties) != 1 || container.Properties["name"].Type != "string" {
		t.Errorf("reached %d template, %d pod spec, %d container properties; want 1 each", len(reached.Properties), len(podSpec.Properties), len(container.Properties))
	}
	wholeContainer := whole.Properties["spec"].Properties["containers"].Items.Schema
	if !slices.Equal(container.Required, wholeContainer.Required) || len(wholeContainer.Properties) < 20 || len(whole.Properties["spec"].Properties) < 20 {
		t.Errorf("the whole node: %d pod spec, %d container properties, required %v; reached required %v",
			len(whole.Properties["spec"].Properties), len(wholeContainer.Properties), wholeContainer.Required, container.Required)
	}
}
