package strictyaml

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestLargeMappingsDecodeAsYAMLDoes: a mapping large enough to be decoded
// here, not by yaml (decodeLarge), gives what yaml gives, for values of
// every kind; and the ones this reading could get wrong are left to yaml.
func TestLargeMappingsDecodeAsYAMLDoes(t *testing.T) {
	values := []string{
		"plain", `"quoted"`, "'single'", "42", "-7", "0x1f", "3.25", "1e3", ".inf", "true", "no", "null", "~", "",
		"2024-01-02", "2024-01-02T03:04:05Z", "!!binary aGVsbG8=", "[1, two, {three: 3}]", "{a: 1, b: [x]}",
		"|\n    a literal\n    block", ">\n    folded\n    text", "!!str 12", "!!int '12'",
	}
	var doc strings.Builder
	doc.WriteString("top:\n")
	for i := range 2 * largeMapping {
		fmt.Fprintf(&doc, "  key-%d: %s\n", i, values[i%len(values)])
	}
	doc.WriteString("  nested:\n")
	for i := range largeMapping + 1 {
		flowSafe := values[:19] // no block scalars inside a flow collection
		fmt.Fprintf(&doc, "    n-%d: [%d, {deep: %s}]\n", i, i, flowSafe[i%len(flowSafe)])
	}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(doc.String()), &root); err != nil {
		t.Fatal(err)
	}
	top := root.Content[0].Content[1]
	var want any
	if err := top.Decode(&want); err != nil {
		t.Fatal(err)
	}
	got, ok := (&Decoder{}).decodeLarge(top, "top")
	if !ok {
		t.Fatal("a large mapping of plain keys was left to yaml")
	}
	if !reflect.DeepEqual(got, normalize(want)) {
		t.Fatalf("decoded\n%v\nyaml decodes\n%v", got, normalize(want))
	}

	for name, extra := range map[string]string{
		"a merge key":         "  <<: {merged: 1}\n",
		"an alias":            "  anchored: &a {x: 1}\n  again: *a\n",
		"a key written twice": "  key-0: again\n",
		"a number key":        "  7: seven\n",
	} {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(doc.String()+extra), &n); err != nil {
			t.Fatal(err)
		}
		if _, ok := (&Decoder{}).decodeLarge(n.Content[0].Content[1], "top"); ok {
			t.Errorf("%s: decoded here, want it left to yaml", name)
		}
	}
	small := &yaml.Node{}
	if err := yaml.Unmarshal([]byte("a: 1\nb: 2\n"), small); err != nil {
		t.Fatal(err)
	}
	if _, ok := (&Decoder{}).decodeLarge(small.Content[0], ""); ok {
		t.Error("a small mapping decoded here, want it left to yaml")
	}
}
