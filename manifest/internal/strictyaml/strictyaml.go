package strictyaml

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"gridweave.dev/manifest/internal/jsontree"
)

// Error is a value that does not suit its type, at a path and line.
type Error struct {
	Path    string // e.g. sandbox.resources.cpu
	Line    int    // 1-based; 0 if unknown
	Problem string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Problem
	}
	return e.Path + ": " + e.Problem
}

// DescribeType names what a value of t looks like, in a message's words.
func DescribeType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// Decoder checks YAML nodes against Go types the strict way.
type Decoder struct {
	// Lines records the line of every path converted (filled by Convert).
	Lines map[string]int
	// Shapes gives the type to check free-form fields (`any`,
	// map[string]any) against, by path.
	Shapes map[string]reflect.Type
	// JSONScalars: the document came from JSON, where a string field takes
	// only a string (in a hand-written spec, `tag: 2.54` is a string).
	JSONScalars bool
}

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
)

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func errorf(n *yaml.Node, path, format string, args ...any) error {
	return &Error{Path: path, Line: n.Line, Problem: fmt.Sprintf(format, args...)}
}

// Convert checks node n against type t and returns the JSON-ready value
// that decodes into t. Keys must name fields — recursively, through
// Kubernetes types as well — or the *Error names the path, the line and
// the nearest known field; scalars must suit their field (in YAML, any
// scalar suits a string field: `cpu: 32` means "32").
func (w *Decoder) Convert(n *yaml.Node, t reflect.Type) (any, error) {
	if w.Lines == nil {
		w.Lines = map[string]int{}
	}
	return w.convert(n, t, "")
}

func (w *Decoder) convert(n *yaml.Node, t reflect.Type, path string) (any, error) {
	w.Lines[path] = n.Line
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if shape, ok := w.Shapes[path]; ok {
		t = shape
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	generic := func() (any, error) {
		if v, ok := w.decodeLarge(n, path); ok {
			return v, nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, errorf(n, path, "%v", err)
		}
		return normalize(v), nil
	}
	// Types with their own decoding (quantities, int-or-string, times)
	// take the value as it is; they judge it when decoded.
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		v, err := generic()
		if err != nil {
			return nil, err
		}
		// Decode it here, so that a bad quantity or time names its field.
		js, err := jsontree.Marshal(v)
		if err == nil {
			err = json.Unmarshal(js, reflect.New(t).Interface())
		}
		if err != nil {
			return nil, errorf(n, path, "%v", err)
		}
		return v, nil
	}
	switch t.Kind() {
	case reflect.Interface:
		return generic()
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return generic()
		}
		if n.Kind != yaml.SequenceNode {
			return nil, errorf(n, path, "want a list, got %s", NodeKind(n))
		}
		out := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			v, err := w.convert(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil, errorf(n, path, "want a mapping, got %s", NodeKind(n))
		}
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			p := join(path, key)
			if _, dup := out[key]; dup {
				return nil, errorf(n.Content[i], p, "appears twice")
			}
			v, err := w.convert(n.Content[i+1], t.Elem(), p)
			if err != nil {
				return nil, err
			}
			out[key] = v
		}
		return out, nil
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil, errorf(n, path, "want a mapping, got %s", NodeKind(n))
		}
		fields := jsonFields(t)
		out := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			p := join(path, key.Value)
			if _, dup := out[key.Value]; dup {
				return nil, errorf(key, p, "appears twice")
			}
			ft, ok := fields[key.Value]
			if !ok {
				w.Lines[p] = key.Line
				return nil, errorf(key, p, "unknown field%s", suggest(key.Value, fields))
			}
			v, err := w.convert(value, ft, p)
			if err != nil {
				return nil, err
			}
			out[key.Value] = v
		}
		return out, nil
	}
	if n.Kind != yaml.ScalarNode {
		return nil, errorf(n, path, "want %s, got %s", DescribeType(t), NodeKind(n))
	}
	switch t.Kind() {
	case reflect.String:
		if w.JSONScalars && n.Tag != "!!str" {
			return nil, errorf(n, path, "want a string, got %s", n.Value)
		}
		return n.Value, nil
	case reflect.Bool:
		if n.Tag != "!!bool" {
			return nil, errorf(n, path, "want true or false, got %q", n.Value)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if n.Tag != "!!int" {
			return nil, errorf(n, path, "want an integer, got %q", n.Value)
		}
	case reflect.Float32, reflect.Float64:
		if n.Tag != "!!int" && n.Tag != "!!float" {
			return nil, errorf(n, path, "want a number, got %q", n.Value)
		}
	}
	return generic()
}

// normalize turns YAML's map[any]any (never produced by yaml.v3 for
// string keys, but possible for others) into JSON-ready maps.
// largeMapping is the number of keys from which a mapping is decoded here
// rather than by yaml: yaml's decoding compares every key with every other
// (to refuse duplicates), which made a ConfigMap of 100,000 keys take 30
// seconds.
const largeMapping = 64

// decodeLarge decodes a node holding a mapping of largeMapping keys or
// more the way yaml decodes it into an `any` (and normalize), one value
// at a time, so the time stays linear; ok is false — yaml decodes it —
// for any other node, and where this reading could differ from yaml's: a
// key that is not a plain string, a merge key, an alias anywhere (yaml
// bounds how far aliases expand), a key written twice (yaml's message
// says so).
func (w *Decoder) decodeLarge(n *yaml.Node, path string) (any, bool) {
	large, alias := largeWithoutAlias(n)
	if !large || alias {
		return nil, false
	}
	return w.decodeLinear(n, path)
}

func largeWithoutAlias(n *yaml.Node) (large, alias bool) {
	switch n.Kind {
	case yaml.AliasNode:
		return false, true
	case yaml.MappingNode:
		large = len(n.Content) >= 2*largeMapping
	}
	for _, c := range n.Content {
		l, a := largeWithoutAlias(c)
		if a {
			return false, true
		}
		large = large || l
	}
	return large, false
}

func (w *Decoder) decodeLinear(n *yaml.Node, path string) (any, bool) {
	switch n.Kind {
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i]
			if key.Kind != yaml.ScalarNode || key.ShortTag() != "!!str" {
				return nil, false
			}
			if _, dup := out[key.Value]; dup {
				return nil, false
			}
			v, ok := w.decodeLinear(n.Content[i+1], join(path, key.Value))
			if !ok {
				return nil, false
			}
			out[key.Value] = v
		}
		return out, true
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, ok := w.decodeLinear(c, fmt.Sprintf("%s[%d]", path, i))
			if !ok {
				return nil, false
			}
			out = append(out, v)
		}
		return out, true
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, false
	}
	return normalize(v), true
}

func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			t[k] = normalize(c)
		}
		return t
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, c := range t {
			out[fmt.Sprint(k)] = normalize(c)
		}
		return out
	case []any:
		for i, c := range t {
			t[i] = normalize(c)
		}
	}
	return v
}

// NodeKind names what a node is, in a message's words.
func NodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}

// jsonFields maps the JSON names of t's fields (embedded and inline
// structs flattened) to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if (f.Anonymous && name == "") || strings.Contains(opts, "inline") {
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					out[k] = v
				}
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// suggest names the known field closest to key, if one is close.
func suggest(key string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	if best := Nearest(key, names); best != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// Nearest is the name closest to key (case aside) within two edits, or ""
// when none is that close; of equally close names, the first in order.
func Nearest(key string, names []string) string {
	names = slices.Clone(names)
	sort.Strings(names)
	best, bestDist := "", 3
	for _, name := range names {
		if d := editDistance(strings.ToLower(key), strings.ToLower(name)); d < bestDist {
			best, bestDist = name, d
		}
	}
	return best
}

// ErrorLine is the line a yaml.v3 error names (0: none).
func ErrorLine(err error) int {
	var line int
	if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), "yaml: "), "line %d:", &line); scanErr == nil {
		return line
	}
	return 0
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
