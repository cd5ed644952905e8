package yamlstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// readWhole is the reference DocumentReader is held to: the stream read by
// yaml's own decoder, each document as one tree, stopping at the first
// document that is not YAML.
func readWhole(name string, r io.Reader) []Document {
	dec := yaml.NewDecoder(r)
	var out []Document
	for i := 1; ; i++ {
		var node yaml.Node
		err := dec.Decode(&node)
		if err == io.EOF {
			return out
		}
		src := fmt.Sprintf("%s#%d", name, i)
		if err != nil {
			return append(out, Document{Source: src, Err: fmt.Errorf("not YAML: %v", err)})
		}
		out = append(out, readNode(&node, src, 0)...)
	}
}

// streamCases are inputs where cutting by lines could go wrong: every one
// must read as the whole-tree reading does.
var streamCases = map[string]string{
	"list at column 0":                       "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n",
	"list indented":                          "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: a\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata: {name: b}\n",
	"comments and blanks between items":      "kind: List\napiVersion: v1\nitems:   # the objects\n# first\n- apiVersion: v1\n  kind: ConfigMap\n\n  metadata:\n    name: a\n\n   # indented comment\n# second\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n",
	"keys after the items":                   "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\nmetadata:\n  resourceVersion: \"\"\n",
	"items twice":                            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\nitems:\n- kind: Secret\n",
	"block scalars with dashes":              "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n  data:\n    script: |\n      - not an item\n      items:\n    keep: |+\n      x\n\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n",
	"quoted string across a dash line":       "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n  data:\n    k: \"one\n- two\"\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n",
	"single-quoted across a dash line":       "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n  data:\n    k: 'one\n- two'\n",
	"flow collection across a dash line":     "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a, labels: {x: y,\n- z: w}}\n",
	"anchor in one item used in another":     "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: &m\n    name: a\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: *m\n",
	"anchor in the header":                   "apiVersion: v1\nkind: List\nx: &d {key: value}\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n  data: *d\n",
	"anchor within an item":                  "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n    labels: &l {x: y}\n    annotations: *l\n",
	"alias as an item":                       "apiVersion: v1\nkind: List\nx: &o {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\nitems:\n- *o\n- *o\n",
	"text after a flow item":                 "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}} !x\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n",
	"text after an anchored flow item":       "apiVersion: v1\nkind: List\nitems:\n- &i {apiVersion: v1, kind: ConfigMap, metadata: {name: a}} x\n",
	"a line under the item's mapping":        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n metadata: {name: a}\n",
	"a directive":                            "%YAML 1.1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
	"a directive after an end":               "a: 1\n...\n%TAG !e! tag:example.com,2000:\n---\nb: 1\n",
	"a byte order mark and a comment":        "\ufeff# comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n",
	"a line separator":                       "a: 1\n---\nb: 1\u2028c: 2\n---\nd: 3\n",
	"a next line in a List":                  "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n  data: {k: \"x\u0085y\"}\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n",
	"a document after an end":                "a: 1\n...\nb: 2\n",
	"an end first":                           "...\napiVersion: v1\n",
	"a kind with items that are not objects": "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nitems:\n- a\n- b\n",
	"a kind with object items":               "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n",
	"json list pretty":                       "{\n  \"kind\": \"ConfigMapList\",\n  \"apiVersion\": \"v1\",\n  \"items\": [\n    {\n      \"apiVersion\": \"v1\",\n      \"kind\": \"ConfigMap\",\n      \"metadata\": {\"name\": \"a\"}\n    },\n    {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\",\n     \"metadata\": {\"name\": \"b\", \"name\": \"c\"}}\n  ],\n  \"metadata\": {\"resourceVersion\": \"\"}\n}\n",
	"json list kind last":                    "{\"items\": [{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}}], \"kind\": \"List\", \"apiVersion\": \"v1\"}",
	"json list items twice":                  "{\"kind\": \"List\", \"items\": [{\"kind\": \"ConfigMap\"}], \"items\": []}\n",
	"json list duplicate header key":         "{\"kind\": \"List\", \"metadata\": {\"a\": 1, \"a\": 2}, \"items\": [{\"kind\": \"ConfigMap\"}]}\n",
	"json list with a scalar item":           "{\"kind\": \"List\", \"items\": [{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}}, 3]}\n",
	"json object with items":                 "{\"apiVersion\": \"example.com/v1\", \"kind\": \"Widget\", \"metadata\": {\"name\": \"w\"}, \"items\": [1, 2]}\n",
	"json list empty":                        "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": []}\n",
	"json list then a document":              "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}}]}\n---\n{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"b\"}}\n",
	"json almost":                            "{\"kind\": \"List\", \"items\": [{\"apiVersion\": \"v1\", kind: ConfigMap}]}\n",
	"flow items":                             "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: ConfigMap,\n   metadata: {name: b}}\n",
	"a scalar item":                          "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n- just a string\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: c\n",
	"an empty item":                          "apiVersion: v1\nkind: List\nitems:\n-\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: c\n",
	"dash alone on its line":                 "apiVersion: v1\nkind: List\nitems:\n-\n  apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n",
	"nested sequence item":                   "apiVersion: v1\nkind: List\nitems:\n- - a\n  - b\n",
	"duplicate key in an item":               "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n    name: b\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: c\n",
	"duplicate key in the header":            "apiVersion: v1\nkind: List\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n",
	"crlf":                                   "apiVersion: v1\r\nkind: List\r\nitems:\r\n- apiVersion: v1\r\n  kind: ConfigMap\r\n  metadata:\r\n    name: a\r\n- apiVersion: v1\r\n  kind: ConfigMap\r\n  metadata:\r\n    name: b\r\n",
	"tab in an item":                         "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n\tkind: ConfigMap\n",
	"flow list":                              "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}]\n",
	"json list":                              "{\"apiVersion\": \"v1\", \"kind\": \"List\", \"items\": [\n  {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"a\"}},\n  {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\", \"metadata\": {\"name\": \"b\"}}\n]}\n",
	"items in a flow mapping":                "{apiVersion: v1, kind: List,\nitems:\n- a: 1\n}\n",
	"items under an indented root":           "  apiVersion: v1\n  kind: List\nitems:\n- apiVersion: v1\n",
	"items with a tag":                       "apiVersion: v1\nkind: List\nitems: !!seq\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n",
	"items not a list":                       "apiVersion: v1\nkind: List\nitems:\n  apiVersion: v1\n",
	"under-indented dash":                    "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: ConfigMap\n    metadata:\n      name: a\n - kind: x\n",
	"multi-line plain scalar":                "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n  data:\n    k: one\n     two\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n",
	"documents and markers":                  "# leading comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n---\n# only a comment\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: b\n...\n%YAML 1.2\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n...\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: d\n",
	"marker with content":                    "--- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n--- # comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n---\n",
	"no newline at the end":                  "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a",
	"dashes that are not markers":            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: |\n    ---x\n----\n",
	"null and scalar documents":              "---\n~\n---\njust text\n---\n- a list\n",
	"empty":                                  "",
	"only comments":                          "# nothing\n\n# here\n",
	"list then an error":                     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\nkey: [unclosed\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n",
	"broken list":                            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: a\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: b\n",
}

// TestDocumentReaderReadsAsTheWholeTree holds the streaming reader — the
// stream cut into documents by line, block Lists into items — to yaml's
// decoder reading each document as one tree, on the cases above and on
// every YAML file the tests have (the users' corpus, the launch recipes,
// the deploy manifests, KubeRay's samples, kubeconform's fixtures). Up to
// a document that is not YAML they must read the same documents, sources,
// objects, lines and errors; that document's error must be the same; the
// streaming reader goes on past it (each document is read on its own).
func TestDocumentReaderReadsAsTheWholeTree(t *testing.T) {
	inputs := map[string]string{}
	for name, text := range streamCases {
		inputs[name] = text
	}
	var files []string
	for _, glob := range []string{"../../validation/testdata/users/*.yaml", "../../testdata/*.yaml", "../../../deploy/kubernetes/*.yaml", "../../../examples/launcher/specs/*.yaml"} {
		m, _ := filepath.Glob(glob)
		files = append(files, m...)
	}
	samples, _ := filepath.Glob(filepath.Join(kubeRaySamplesDir(t), "*.yaml"))
	files = append(files, samples...)
	if fixtures := kubeconformFixturesDir(t); fixtures != "" {
		m, _ := filepath.Glob(filepath.Join(fixtures, "*.yaml"))
		files = append(files, m...)
	}
	if len(files) < 50 {
		t.Fatalf("only %d files to read", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if testing.Short() && len(data) > 1<<20 {
			continue // valid_large.yaml, a List of 100,000: in make test
		}
		inputs[f] = string(data)
	}
	for name, text := range inputs {
		want := readWhole("in.yaml", strings.NewReader(text))
		got, err := ReadDocuments("in.yaml", strings.NewReader(text))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := compareDocuments(got, want); diff != "" {
			t.Errorf("%s: %s", name, diff)
		}
	}
}

// compareDocuments is "" when got reads as want. Where want ends with a
// document that is not YAML, got must read the same before it and then
// report an error there or after: the streaming reader may first read the
// broken document's items before the break, and yaml's decoder, which
// reads a token ahead, can blame a document for a later one's lines.
func compareDocuments(got, want []Document) string {
	brokenAt := len(want)
	if n := len(want); n > 0 && want[n-1].Err != nil && strings.HasPrefix(want[n-1].Err.Error(), "not YAML") {
		brokenAt = n - 1
	}
	if len(got) < brokenAt || brokenAt == len(want) && len(got) != len(want) {
		return fmt.Sprintf("%d documents, want %d:\n got %s\nwant %s", len(got), len(want), sources(got), sources(want))
	}
	for i, w := range want[:brokenAt] {
		g := got[i]
		if g.Source != w.Source {
			return fmt.Sprintf("document %d is %s, want %s", i, g.Source, w.Source)
		}
		if (g.Err == nil) != (w.Err == nil) || (g.Err != nil && yamlErrorText(g.Err) != yamlErrorText(w.Err)) {
			return fmt.Sprintf("%s: error %v, want %v", w.Source, g.Err, w.Err)
		}
		if w.Err != nil {
			continue
		}
		if !reflect.DeepEqual(g.Object.Object, w.Object.Object) {
			return fmt.Sprintf("%s: object %v, want %v", w.Source, g.Object.Object, w.Object.Object)
		}
		if !reflect.DeepEqual(g.Lines, w.Lines) {
			return fmt.Sprintf("%s: lines %v, want %v", w.Source, g.Lines, w.Lines)
		}
	}
	if brokenAt == len(want) {
		return ""
	}
	// An error at the broken document or after it (documents yaml reads
	// as empty can stand between).
	broken := want[brokenAt].Source
	for _, g := range got[brokenAt:] {
		if g.Err != nil && documentNumber(g.Source) >= documentNumber(broken) {
			return ""
		}
	}
	return fmt.Sprintf("no error at %s or after it (want %v); read %s", broken, want[brokenAt].Err, sources(got[brokenAt:]))
}

// documentNumber is the N of "name#N" or "name#N.items[i]".
func documentNumber(source string) int {
	_, rest, _ := strings.Cut(source, "#")
	rest, _, _ = strings.Cut(rest, ".")
	n, _ := strconv.Atoi(rest)
	return n
}

func sources(docs []Document) string {
	var s []string
	for _, d := range docs {
		s = append(s, d.Source)
	}
	return strings.Join(s, " ")
}

// TestDocumentReaderCutsBlockLists: the cases where a List is cut into
// its items really are cut (the reading above would pass with the whole
// tree alone), and the ones the cut cannot take are not.
func TestDocumentReaderCutsBlockLists(t *testing.T) {
	for name, cut := range map[string]bool{
		"list at column 0":                  true,
		"list indented":                     true,
		"comments and blanks between items": true,
		"keys after the items":              true,
		"block scalars with dashes":         true,
		"crlf":                              true,
		"no newline at the end":             true,
		"items twice":                       false,
		"duplicate key in the header":       false,
		"items in a flow mapping":           false,
		"items with a tag":                  false,
		"items not a list":                  false,
		"flow list":                         false,
		"json list":                         false,
	} {
		index := 1
		list := cutBlockList([]byte(streamCases[name]), 1, "in.yaml", &index)
		if (list != nil) != cut {
			t.Errorf("%s: cut %v, want %v", name, list != nil, cut)
		}
	}
	for name, cut := range map[string]bool{
		"json list":                      true,
		"json list pretty":               true,
		"json list kind last":            true,
		"json list then a document":      true,
		"json list items twice":          false,
		"json list duplicate header key": false,
		"json list with a scalar item":   false,
		"json object with items":         false,
		"json almost":                    false,
	} {
		index := 1
		text := streamCases[name]
		if name == "json list then a document" {
			text, _, _ = strings.Cut(text, "---")
		}
		if list := cutJSONList([]byte(text), 1, "in.yaml", &index); (list != nil) != cut {
			t.Errorf("%s: cut %v, want %v", name, list != nil, cut)
		}
	}
	// A dash line inside a quoted string cuts an item in two: the first
	// half does not read, and the rest comes from the whole tree.
	index := 1
	list := cutBlockList([]byte(streamCases["quoted string across a dash line"]), 1, "in.yaml", &index)
	if list == nil || len(list.starts) != 3 {
		t.Fatalf("want the List cut at 3 dash lines, got %+v", list)
	}
	docs := list.nextWindow()
	if len(docs) != 2 || docs[0].Err != nil || docs[0].Object.Object["data"].(map[string]any)["k"] != "one - two" {
		t.Fatalf("want 2 items, the first with data.k \"one - two\", got %+v", docs)
	}
}

// FuzzDocumentReader holds the streaming reader to the whole-tree reading
// on any input (go test -fuzz FuzzDocumentReader ./manifest/validation/).
func FuzzDocumentReader(f *testing.F) {
	for _, text := range streamCases {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		want := readWhole("in.yaml", strings.NewReader(text))
		got, err := ReadDocuments("in.yaml", strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		if diff := compareDocuments(got, want); diff != "" {
			t.Fatal(diff)
		}
	})
}

// TestDocumentReaderReturnsReadErrors: an error reading the stream is the
// caller's, after the documents read before it.
func TestDocumentReaderReturnsReadErrors(t *testing.T) {
	broken := errors.New("disk gone")
	r := io.MultiReader(strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n"), errReader{broken})
	docs, err := ReadDocuments("in.yaml", r)
	if !errors.Is(err, broken) || len(docs) != 1 || docs[0].Object.GetName() != "a" {
		t.Fatalf("want document a then %v, got %d documents, %v", broken, len(docs), err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// kubeRaySamplesDir is config/samples of the pinned KubeRay module.
func kubeRaySamplesDir(t *testing.T) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/ray-project/kuberay/ray-operator").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "config", "samples")
}

// kubeconformFixturesDir is kubeconform v0.8.0's fixtures, downloaded to
// the module cache.
func kubeconformFixturesDir(t *testing.T) string {
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/yannh/kubeconform@v0.8.0").Output()
	if err != nil {
		t.Fatalf("go mod download kubeconform: %v", err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download kubeconform: %s", out)
	}
	return filepath.Join(m.Dir, "fixtures")
}

// yamlErrorText is an error's message, or only "not YAML" for a YAML
// error: yaml's decoder counts a stream's lines from 0 for some errors and
// from 1 for others, and a document read on its own can end where the
// stream's reading found the next document's marker (a quoted string left
// open: "unexpected end of stream" for "unexpected document indicator").
func yamlErrorText(err error) string {
	if strings.HasPrefix(err.Error(), "not YAML: ") {
		return "not YAML"
	}
	return err.Error()
}

// TestDocumentReaderListsAreLists: a document is read as a List of
// objects when its kind names a list, or when all its items are mappings;
// a kind of its own with other items is one object.
func TestDocumentReaderListsAreLists(t *testing.T) {
	for name, want := range map[string]string{
		"a kind with items that are not objects": "in.yaml#1",
		"a kind with object items":               "in.yaml#1.items[0]",
		"a scalar item":                          "in.yaml#1.items[0] in.yaml#1.items[1] in.yaml#1.items[2]",
	} {
		docs, err := ReadDocuments("in.yaml", strings.NewReader(streamCases[name]))
		if err != nil || sources(docs) != want {
			t.Errorf("%s: read %s (%v), want %s", name, sources(docs), err, want)
		}
	}
}
