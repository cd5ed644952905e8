package openapitest

import (
	"bytes"

	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Document is a parsed OpenAPI document whose answer schemas are compiled
// on first use.
type Document struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	schemas  map[string]*jsonschema.Schema
}

const docURL = "urn:gridweave:openapi.json"

// Parse reads an OpenAPI 3.1 document.
func Parse(raw []byte) (*Document, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("openapitest: the document is not JSON: %w", err)
	}
	doc, ok := v.(map[string]any)
	if !ok || doc["openapi"] == nil {
		return nil, fmt.Errorf("openapitest: not an OpenAPI document")
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(docURL, doc); err != nil {
		return nil, err
	}
	return &Document{doc: doc, compiler: c, schemas: map[string]*jsonschema.Schema{}}, nil
}

// Check reports whether an answer of status with the given content type
// and body is one the document describes for method and path (a request
// path, matched against the document's path templates).
func (d *Document) Check(method, path string, status int, contentType string, body []byte) error {
	tmpl, op := d.operation(method, path)
	if op == nil && status == http.StatusMethodNotAllowed {
		// The path serves other methods: any of its operations lists the
		// 405 answer.
		for _, other := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if tmpl, op = d.operation(other, path); op != nil {
				method = other
				break
			}
		}
	}
	if op == nil && status == http.StatusNotFound {
		// No route at all: the answer is the document's 404.
		if nf, ok := d.resolve("/components/responses/NotFound")["content"]; ok && nf != nil {
			return d.checkContent(fmt.Sprintf("%s %s answered 404", method, path), "/components/responses/NotFound", d.resolve("/components/responses/NotFound"), contentType, body)
		}
	}
	if op == nil {
		return fmt.Errorf("%s %s: the document has no such operation", method, path)
	}
	where := fmt.Sprintf("%s %s (%s %s) answered %d", method, path, strings.ToUpper(method), tmpl, status)
	responses, _ := op["responses"].(map[string]any)
	resp, _ := responses[strconv.Itoa(status)].(map[string]any)
	pointer := "/paths/" + escape(tmpl) + "/" + strings.ToLower(method) + "/responses/" + strconv.Itoa(status)
	if ref, ok := resp["$ref"].(string); ok {
		pointer = strings.TrimPrefix(ref, "#")
		resp = d.resolve(pointer)
	}
	if resp == nil {
		return fmt.Errorf("%s, which the document does not list", where)
	}
	return d.checkContent(where, pointer, resp, contentType, body)
}

// checkContent checks a body against the response object at pointer.
func (d *Document) checkContent(where, pointer string, resp map[string]any, contentType string, body []byte) error {
	content, _ := resp["content"].(map[string]any)
	if len(content) == 0 {
		if len(body) > 0 {
			return fmt.Errorf("%s with a body, and the document describes none", where)
		}
		return nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return fmt.Errorf("%s with Content-Type %q: %v", where, contentType, err)
	}
	media, ok := content[mt].(map[string]any)
	if !ok {
		return fmt.Errorf("%s as %s; the document describes %v", where, mt, keys(content))
	}
	if mt != "application/json" || media["schema"] == nil {
		return nil
	}
	sch, err := d.schema(pointer + "/content/" + escape(mt) + "/schema")
	if err != nil {
		return fmt.Errorf("%s: the document's schema does not compile: %v", where, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s: the body is not JSON: %v", where, err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("%s: the body does not match the document: %v\nbody: %s", where, err, truncate(body))
	}
	return nil
}

func (d *Document) schema(pointer string) (*jsonschema.Schema, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s, ok := d.schemas[pointer]; ok {
		return s, nil
	}
	s, err := d.compiler.Compile(docURL + "#" + pointer)
	if err != nil {
		return nil, err
	}
	d.schemas[pointer] = s
	return s, nil
}

// operation finds the operation of method whose path template matches
// path ({x} matches one segment; a literal segment wins over a template).
func (d *Document) operation(method, path string) (string, map[string]any) {
	paths, _ := d.doc["paths"].(map[string]any)
	best, bestScore := "", -1
	for tmpl := range paths {
		if score, ok := match(tmpl, path); ok && score > bestScore {
			if item, _ := paths[tmpl].(map[string]any); item[strings.ToLower(method)] != nil {
				best, bestScore = tmpl, score
			}
		}
	}
	if best == "" {
		return "", nil
	}
	op, _ := paths[best].(map[string]any)[strings.ToLower(method)].(map[string]any)
	return best, op
}

// match reports whether path fits tmpl, and how many literal segments
// matched.
func match(tmpl, path string) (int, bool) {
	ts, ps := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return 0, false
	}
	score := 0
	for i := range ts {
		switch {
		case strings.HasPrefix(ts[i], "{") && ps[i] != "":
		case ts[i] == ps[i]:
			score++
		default:
			return 0, false
		}
	}
	return score, true
}

func (d *Document) resolve(pointer string) map[string]any {
	var cur any = d.doc
	for _, seg := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")]
	}
	m, _ := cur.(map[string]any)
	return m
}

func escape(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1") }

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func truncate(b []byte) string {
	if len(b) > 600 {
		return string(b[:600]) + "..."
	}
	return string(b)
}

// Middleware wraps h so that every answer it gives is checked against
// the document; an answer the document does not describe fails t. Long
// answers (streams) are checked on what was written.
func Middleware(t testing.TB, d *Document, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.ServeHTTP(w, r) // a CORS preflight, answered by the middleware
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		if err := d.Check(r.Method, r.URL.EscapedPath(), rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes()); err != nil {
			t.Errorf("openapitest: %v", err)
		}
	})
}

// MustParse is Parse for tests.
func MustParse(t testing.TB, raw []byte) *Document {
	t.Helper()
	d, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
