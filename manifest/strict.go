package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"gridweave.dev/manifest/internal/jsontree"
	"gridweave.dev/manifest/internal/strictyaml"
)

// SpecError is a problem in a spec file, at a path and line.
type SpecError struct {
	File    string // may be empty
	Path    string // e.g. sandbox.resources.cpu
	Line    int    // 1-based; 0 if unknown
	Problem string
}

func (e *SpecError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d: ", e.Line)
	} else if e.File != "" {
		b.WriteString(" ")
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Problem)
	return b.String()
}

// ErrSpec is wrapped by every *SpecError.
var ErrSpec = errors.New("invalid spec")

// Is makes errors.Is(err, ErrSpec) hold.
func (e *SpecError) Is(target error) bool { return target == ErrSpec }

// decodeStrict decodes one YAML document into out (a pointer to a struct
// with json tags). Every key must name a field — recursively, through
// Kubernetes types as well — or the error names its path, line and the
// nearest known field; a value of the wrong type names its path and line.
// Fields whose type is `any` or map[string]any are free-form, except those
// listed in shapes, whose keys are checked against the given type.
func decodeStrict(file string, data []byte, out any, shapes map[string]reflect.Type) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line := strictyaml.ErrorLine(err)
		if line == 0 {
			// yaml.v3 gives no line for errors found at the end of the
			// stream (an unclosed quote or bracket): point there.
			line = max(1, bytes.Count(data, []byte("\n"))+1)
			if bytes.HasSuffix(data, []byte("\n")) {
				line--
			}
		}
		return &SpecError{File: file, Line: line, Problem: strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &SpecError{File: file, Problem: "the file is empty"}
	}
	root := doc.Content[0]
	d := strictyaml.Decoder{Shapes: shapes}
	generic, err := d.Convert(root, reflect.TypeOf(out).Elem())
	if err != nil {
		var se *strictyaml.Error
		if errors.As(err, &se) {
			return &SpecError{File: file, Path: se.Path, Line: se.Line, Problem: se.Problem}
		}
		return &SpecError{File: file, Problem: err.Error()}
	}
	lines := d.Lines
	js, err := jsontree.Marshal(generic)
	if err != nil {
		return &SpecError{File: file, Problem: err.Error()}
	}
	if err := json.Unmarshal(js, out); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return &SpecError{File: file, Path: te.Field, Line: lines[te.Field],
				Problem: fmt.Sprintf("want %s, got %s", strictyaml.DescribeType(te.Type), te.Value)}
		}
		return &SpecError{File: file, Problem: err.Error()}
	}
	return nil
}
