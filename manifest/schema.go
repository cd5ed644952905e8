package manifest

import (
	"embed"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// JSON Schemas of the launcher's own files — the recipe and the infra
// spec (draft 2020-12), the RayService chart's values (draft-07, the draft
// every Helm 3 release enforces at install) — for editors (the YAML
// language server's `# yaml-language-server: $schema=…`), Helm and CI.
// They are made from the Go types the strict parser decodes into: every
// key the parser knows (through Kubernetes' and KubeRay's types too), no
// other (additionalProperties: false), each field's type, its doc comment
// as description, and the constraints the parser's checks make, written
// as `schema:"…"` tags on the fields (required; minimum=; maximum=;
// minLength=; maxLength=; pattern=; orEmpty; enum=a|b; minProperties=;
// propertyNames=; quantity) and a few rules between fields below.

// SchemaKinds are the files Schema describes.
var SchemaKinds = []string{"recipe", "infra", "chart-values"}

// specSources are this package's type declarations, read for their doc
// comments.
//
//go:embed specs.go chart.go
var specSources embed.FS

const (
	dns1035Label    = `^[a-z]([-a-z0-9]*[a-z0-9])?$`
	dns1123Label    = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	dns1123Sub      = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	quantityPattern = `^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
	octet           = `(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`
	cidrPattern     = `^((` + octet + `\.){3}` + octet + `/([0-9]|[12][0-9]|3[0-2])|[0-9a-fA-F:.]*:[0-9a-fA-F:.]*/([0-9]|[1-9][0-9]|1[01][0-9]|12[0-8]))$`
)

var schemaCache struct {
	sync.Mutex
	docs map[string]string
}

// Schema returns the JSON Schema of a kind of SchemaKinds.
func Schema(kind string) ([]byte, error) {
	var root reflect.Type
	var shapes map[string]reflect.Type
	title := ""
	switch kind {
	case "recipe":
		root, title = reflect.TypeFor[Recipe](), "Gridweave launcher recipe"
	case "infra":
		root, shapes, title = reflect.TypeFor[Infra](), infraShapes, "Gridweave launcher infra spec"
	case "chart-values":
		root, title = reflect.TypeFor[ChartValues](), "Gridweave RayService chart values"
	default:
		return nil, fmt.Errorf("no schema of %q: want %s", kind, strings.Join(SchemaKinds, ", "))
	}
	docs, err := fieldDocs()
	if err != nil {
		return nil, err
	}
	g := &schemaGen{defs: map[string]any{}, docs: docs, shapes: shapes, owners: map[reflect.Type]string{}, defsKey: "$defs"}
	draft := "https://json-schema.org/draft/2020-12/schema"
	if kind == "chart-values" {
		// Helm before 3.18 validates with a draft-07 validator, which
		// knows definitions, not $defs.
		g.defsKey, draft = "definitions", "http://json-schema.org/draft-07/schema#"
	}
	s := g.of(root, "")
	s["$schema"] = draft
	s["$id"] = "https://gridweave.dev/schemas/" + kind + ".json"
	s["title"] = title
	switch kind {
	case "infra":
		infraRules(s)
	case "chart-values":
		chartRules(s)
	}
	if len(g.defs) > 0 {
		s[g.defsKey] = g.defs
	}
	return json.MarshalIndent(s, "", "  ")
}

// infraRules are the infra spec's rules between fields: images are needed
// unless the launch attaches; a RayJob's settings need a RayJob, and
// SidecarMode no submitterConfig; only kuberay.pdb takes minAvailable, and
// not with maxUnavailable; egress CIDRs need a policy that limits egress.
func infraRules(s map[string]any) {
	s["if"] = map[string]any{"properties": map[string]any{"launch": map[string]any{"properties": map[string]any{"mode": map[string]any{"const": ModeAttach}}}}}
	s["else"] = map[string]any{"required": []string{"images"}, "properties": map[string]any{"images": map[string]any{"type": "object", "minProperties": 1}}}
	props := s["properties"].(map[string]any)
	// A RayJob's retries and deadline need a RayJob.
	props["launch"].(map[string]any)["anyOf"] = []any{
		map[string]any{"not": map[string]any{"anyOf": []any{
			map[string]any{"required": []string{"backoffLimit"}}, map[string]any{"required": []string{"activeDeadlineSeconds"}},
			map[string]any{"required": []string{"preRunningDeadlineSeconds"}}, map[string]any{"required": []string{"submitterConfig"}},
			map[string]any{"required": []string{"submissionMode"}}}}},
		map[string]any{"properties": map[string]any{"mode": map[string]any{"const": ModeRayJob}}},
	}
	// SidecarMode makes no submitter Job to configure.
	props["launch"].(map[string]any)["if"] = map[string]any{"required": []string{"submissionMode"},
		"properties": map[string]any{"submissionMode": map[string]any{"const": "SidecarMode"}}}
	props["launch"].(map[string]any)["then"] = map[string]any{"not": map[string]any{"required": []string{"submitterConfig"}}}
	sandbox := props["sandbox"].(map[string]any)["properties"].(map[string]any)
	sandbox["pdb"].(map[string]any)["not"] = map[string]any{"required": []string{"minAvailable"}}
	// Egress CIDRs need a policy that limits egress.
	sandbox["networkPolicy"].(map[string]any)["if"] = map[string]any{"required": []string{"allowedEgressCidrs"}, "properties": map[string]any{"allowedEgressCidrs": map[string]any{"minItems": 1}}}
	sandbox["networkPolicy"].(map[string]any)["then"] = map[string]any{"properties": map[string]any{
		"allowEgress": map[string]any{"not": map[string]any{"const": true}}, "enabled": map[string]any{"not": map[string]any{"const": false}}}}
	kuberay := props["kuberay"].(map[string]any)["properties"].(map[string]any)
	kuberay["pdb"].(map[string]any)["dependentSchemas"] = map[string]any{
		"minAvailable": map[string]any{"properties": map[string]any{"maxUnavailable": map[string]any{"const": 0}}}}
}

// chartRules are the chart values' rules between fields: an exposure
// needs its hostnames (and a gateway for an HTTPRoute), auth only with a
// NebariApp, every Serve application an import_path.
func chartRules(s map[string]any) {
	exposed := map[string]any{"properties": map[string]any{"exposure": map[string]any{"type": "object", "properties": map[string]any{"type": map[string]any{"enum": []string{"httproute", "nebariapp"}}}, "required": []string{"type"}}}, "required": []string{"exposure"}}
	needHost := map[string]any{"properties": map[string]any{"exposure": map[string]any{"required": []string{"dashboardHostname"}, "properties": map[string]any{"dashboardHostname": map[string]any{"minLength": 1}}}}}
	serveOn := map[string]any{"properties": map[string]any{"serve": map[string]any{"type": "object", "properties": map[string]any{"enabled": map[string]any{"const": true}}, "required": []string{"enabled"}}}, "required": []string{"serve"}}
	needServeHost := map[string]any{"properties": map[string]any{"exposure": map[string]any{"required": []string{"serveHostname"}, "properties": map[string]any{"serveHostname": map[string]any{"minLength": 1}}}}}
	route := map[string]any{"properties": map[string]any{"exposure": map[string]any{"type": "object", "properties": map[string]any{"type": map[string]any{"const": "httproute"}}, "required": []string{"type"}}}, "required": []string{"exposure"}}
	needGateway := map[string]any{"properties": map[string]any{"exposure": map[string]any{
		"required": []string{"gateway"}, "properties": map[string]any{"gateway": map[string]any{"required": []string{"name"}, "properties": map[string]any{"name": map[string]any{"minLength": 1}}}},
		"not": map[string]any{"required": []string{"auth"}, "properties": map[string]any{"auth": map[string]any{"const": true}}}}}}
	npOn := map[string]any{"properties": map[string]any{"networkPolicy": map[string]any{"type": "object", "properties": map[string]any{"enabled": map[string]any{"const": true}}, "required": []string{"enabled"}}}, "required": []string{"networkPolicy"}}
	needClients := map[string]any{"properties": map[string]any{"networkPolicy": map[string]any{"anyOf": []any{
		map[string]any{"required": []string{"clientNamespaces"}, "properties": map[string]any{"clientNamespaces": map[string]any{"minItems": 1}}},
		map[string]any{"required": []string{"clientPodLabels"}, "properties": map[string]any{"clientPodLabels": map[string]any{"minProperties": 1}}},
	}}}}
	s["allOf"] = []any{
		map[string]any{"if": npOn, "then": needClients},
		map[string]any{"if": exposed, "then": needHost},
		map[string]any{"if": map[string]any{"allOf": []any{exposed, serveOn}}, "then": needServeHost},
		map[string]any{"if": route, "then": needGateway},
	}
	props := s["properties"].(map[string]any)
	props["serveApplications"].(map[string]any)["items"] = map[string]any{"type": "object", "required": []string{"import_path"},
		"properties": map[string]any{"import_path": map[string]any{"type": "string"}}}
}

type schemaGen struct {
	defs    map[string]any
	defsKey string // $defs (2020-12) or definitions (draft-07)
	docs    map[string]string
	shapes  map[string]reflect.Type
	// owners names this package's anonymous struct types by the field
	// that holds them ("ChartValues.Serve"), for their fields' docs.
	owners map[reflect.Type]string
}

var (
	quantityType = reflect.TypeFor[resource.Quantity]()
	intOrString  = reflect.TypeFor[intstr.IntOrString]()
	timeType     = reflect.TypeFor[metav1.Time]()
	rawType      = reflect.TypeFor[runtime.RawExtension]()
	durationType = reflect.TypeFor[metav1.Duration]()
)

// of is the schema of t at path (a field path of this package's types,
// for shapes and docs; "" inside other packages' types).
func (g *schemaGen) of(t reflect.Type, path string) map[string]any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case quantityType:
		return map[string]any{"anyOf": []any{map[string]any{"type": "string", "pattern": quantityPattern}, map[string]any{"type": "number"}}}
	case intOrString:
		return map[string]any{"type": []string{"string", "integer"}}
	case timeType:
		return map[string]any{"type": []string{"string", "null"}, "format": "date-time"}
	case durationType:
		return map[string]any{"type": "string"}
	case rawType:
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.String:
		// A YAML spec's string field takes any scalar (`cpu: 2` is "2").
		return map[string]any{"type": []string{"string", "number", "boolean"}}
	case reflect.Int32:
		return map[string]any{"type": "integer", "minimum": -1 << 31, "maximum": 1<<31 - 1}
	case reflect.Int, reflect.Int64, reflect.Int16, reflect.Int8, reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint8:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string"}
		}
		return map[string]any{"type": "array", "items": g.of(t.Elem(), path)}
	case reflect.Map:
		if t.Elem().Kind() == reflect.Interface {
			if shape, ok := g.shapes[path]; ok {
				return g.of(shape, "")
			}
			return map[string]any{"type": "object"}
		}
		return map[string]any{"type": "object", "additionalProperties": g.of(t.Elem(), path)}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if t.PkgPath() == reflect.TypeFor[Recipe]().PkgPath() || t.Name() == "" {
			return g.object(t, path)
		}
		name := defName(t)
		if _, ok := g.defs[name]; !ok {
			g.defs[name] = map[string]any{} // a placeholder for recursion
			g.defs[name] = g.object(t, "")
		}
		return map[string]any{"$ref": "#/" + g.defsKey + "/" + name}
	}
	return map[string]any{}
}

func defName(t reflect.Type) string {
	pkg := t.PkgPath()
	switch {
	case strings.HasPrefix(pkg, "k8s.io/api/"):
		pkg = strings.ReplaceAll(strings.TrimPrefix(pkg, "k8s.io/api/"), "/", ".")
	case pkg == reflect.TypeFor[rayv1.RayClusterSpec]().PkgPath():
		pkg = "ray.v1"
	default:
		pkg = pkg[strings.LastIndex(pkg, "/")+1:]
	}
	return pkg + "." + t.Name()
}

// object is the schema of a struct: its json fields (an embedded struct's
// inline), no other.
func (g *schemaGen) object(t reflect.Type, path string) map[string]any {
	props := map[string]any{}
	var required []string
	ours := t.PkgPath() == reflect.TypeFor[Recipe]().PkgPath() || g.owners[t] != ""
	owner := t.Name()
	if owner == "" {
		owner = g.owners[t]
	}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
				ft := f.Type
				for ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
					continue
				}
			}
			if name == "" {
				name = f.Name
			}
			sub := name
			if path != "" {
				sub = path + "." + name
			}
			if ours && f.Type.Kind() == reflect.Struct && f.Type.Name() == "" {
				g.owners[f.Type] = owner + "." + f.Name
			}
			s := g.of(f.Type, sub)
			if doc := g.docs[owner+"."+f.Name]; ours && doc != "" {
				s = withDescription(s, doc)
			}
			req := applyTag(s, f.Tag.Get("schema"))
			if req {
				required = append(required, name)
			} else if k := indirect(f.Type).Kind(); k == reflect.Struct || k == reflect.Map || k == reflect.Slice || f.Type.Kind() == reflect.Pointer {
				// YAML's empty value (`infra:`, `kuberay: ~`) leaves the field unset.
				s = nullable(s)
			}
			props[name] = s
		}
	}
	walk(t)
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		out["required"] = required
	}
	if doc := g.docs[owner]; ours && doc != "" {
		out["description"] = doc
	}
	return out
}

func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// nullable lets s be null too.
func nullable(s map[string]any) map[string]any {
	switch t := s["type"].(type) {
	case string:
		s["type"] = []string{t, "null"}
		return s
	case []string:
		if !slices.Contains(t, "null") {
			s["type"] = append(t, "null")
		}
		return s
	}
	if len(s) == 0 {
		return s // anything, null included
	}
	out := map[string]any{"anyOf": []any{map[string]any{"type": "null"}, s}}
	if d, ok := s["description"]; ok {
		out["description"] = d
		delete(s, "description")
	}
	return out
}

// withDescription adds a description beside a $ref without changing what
// the schema accepts.
func withDescription(s map[string]any, doc string) map[string]any {
	if _, ref := s["$ref"]; ref {
		return map[string]any{"allOf": []any{s}, "description": doc}
	}
	s["description"] = doc
	return s
}

// applyTag adds a `schema:"…"` tag's constraints to s; it reports whether
// the field is required.
func applyTag(s map[string]any, tag string) (required bool) {
	if tag == "" {
		return false
	}
	target := s
	if s["type"] == "array" {
		target = s["items"].(map[string]any) // constraints of a list are its items'
	}
	if s["type"] == "object" {
		if extra, ok := s["additionalProperties"].(map[string]any); ok {
			target = extra // and of a map its values'
		}
	}
	orEmpty := false
	for _, part := range strings.Split(tag, ";") {
		key, value, _ := strings.Cut(part, "=")
		switch key {
		case "required":
			required = true
		case "orEmpty": // the pattern, or "" (a default applies)
			orEmpty = true
		case "quantity": // or empty: unset; a number is one too
			target["type"], target["minimum"] = []string{"string", "number"}, 0
			target["pattern"] = "^(" + strings.TrimSuffix(strings.TrimPrefix(quantityPattern, "^"), "$") + ")?$"
		case "cidr":
			target["type"], target["pattern"] = "string", cidrPattern
		case "dns1035":
			target["type"], target["pattern"] = "string", dns1035Label
		case "dns1123label":
			target["type"], target["pattern"], target["maxLength"] = "string", dns1123Label, 63
		case "dns1123subdomain":
			target["type"], target["pattern"], target["maxLength"] = "string", dns1123Sub, 253
		case "pattern":
			target["type"], target["pattern"] = "string", value
		case "enum":
			target["type"], target["enum"] = "string", strings.Split(value, "|")
		case "propertyNames":
			s["propertyNames"] = map[string]any{"pattern": value}
		case "minimum", "maximum", "minLength", "maxLength", "minProperties":
			n, err := strconv.Atoi(value)
			if err != nil {
				panic(fmt.Sprintf("manifest: schema tag %q: %v", tag, err))
			}
			if key == "minProperties" {
				s[key] = n
			} else {
				target[key] = n
			}
		default:
			panic(fmt.Sprintf("manifest: unknown schema tag %q", part))
		}
	}
	if p, ok := target["pattern"].(string); ok && orEmpty {
		target["pattern"] = "^(" + strings.TrimSuffix(strings.TrimPrefix(p, "^"), "$") + ")?$"
	}
	return required
}

// fieldDocs reads the doc comments of this package's spec types: "Type"
// and "Type.Field" (a field of an anonymous struct type is under the
// outer type's name) → the comment, on one line.
func fieldDocs() (map[string]string, error) {
	schemaCache.Lock()
	defer schemaCache.Unlock()
	if schemaCache.docs != nil {
		return schemaCache.docs, nil
	}
	docs := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range []string{"specs.go", "chart.go"} {
		src, err := specSources.ReadFile(name)
		if err != nil {
			return nil, err
		}
		file, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if doc := text(gd.Doc); doc != "" {
					docs[ts.Name.Name] = doc
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				var fields func(owner string, st *ast.StructType)
				fields = func(owner string, st *ast.StructType) {
					for _, f := range st.Fields.List {
						doc := text(f.Doc)
						if doc == "" {
							doc = text(f.Comment)
						}
						for _, n := range f.Names {
							if doc != "" {
								docs[owner+"."+n.Name] = doc
							}
							if inner, ok := f.Type.(*ast.StructType); ok {
								fields(owner+"."+n.Name, inner)
							}
						}
					}
				}
				fields(ts.Name.Name, st)
			}
		}
	}
	schemaCache.docs = docs
	return docs, nil
}

func text(g *ast.CommentGroup) string {
	if g == nil {
		return ""
	}
	return strings.Join(strings.Fields(g.Text()), " ")
}
