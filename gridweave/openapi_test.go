package gridweave

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/rayctl/rayctltest"
	"gridweave.dev/wgkey"
)

const docsAdminToken = "docs-admin-token-0123456789abcdef"

// newDocsTestServer starts the service over in-memory backends.
func newDocsTestServer(t testing.TB) (*Server, *httptest.Server) {
	t.Helper()
	cfg, err := ConfigFromEnv(func(name string) string {
		return map[string]string{
			"ADMIN_TOKEN": docsAdminToken, "JWT_SECRET": "docs-jwt-secret-0123456789abcdef0123", "SERVER_VERSION": "1.4.0",
			"MASTER_IP": "203.0.113.7", "VPN_CIDR": "198.18.0.0/16", "MASTER_VPN_IP": "198.18.0.1",
		}[name]
	})
	if err != nil {
		t.Fatal(err)
	}
	store := new(memstore.Store)
	t.Cleanup(func() { store.Close() })
	pool, err := joinkeys.NewPool(cfg.VPNCIDR, cfg.MasterVPNIP)
	if err != nil {
		t.Fatal(err)
	}
	kr, err := joinkeys.New(store, &joinkeys.Options{JWTSecret: []byte(cfg.JWTSecret), Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	_, pub, err := wgkey.GeneratePair()
	if err != nil {
		t.Fatal(err)
	}
	fakes := rayctltest.New(t, cfg.Namespace)
	s, err := New(context.Background(), cfg, Backends{Keyring: kr, Mesh: memmesh.New(pub), Ray: fakes.Client, Kube: fakes.Kube})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return s, srv
}

// docsGet fetches path without credentials.
func docsGet(t testing.TB, url string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// fetchOpenAPI answers the served document, decoded.
func fetchOpenAPI(t testing.TB, url string) map[string]any {
	t.Helper()
	resp, body := docsGet(t, url+"/openapi.json")
	if resp.StatusCode != 200 {
		t.Fatalf("GET /openapi.json: %d %s", resp.StatusCode, body)
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("GET /openapi.json is not JSON: %v", err)
	}
	return doc
}

// documentedRoutes lists a document's operations as "METHOD /path".
func documentedRoutes(doc map[string]any) []string {
	var out []string
	paths, _ := doc["paths"].(map[string]any)
	for p, item := range paths {
		for method := range item.(map[string]any) {
			out = append(out, strings.ToUpper(method)+" "+p)
		}
	}
	slices.Sort(out)
	return out
}

// diffRoutes reports the registered routes a document lacks and the
// operations it names that are not registered.
func diffRoutes(registered, documented []string) (missing, extra []string) {
	for _, r := range registered {
		if !slices.Contains(documented, r) {
			missing = append(missing, r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			extra = append(extra, d)
		}
	}
	return missing, extra
}

func registeredRoutes(s *Server) []string {
	var out []string
	for _, rt := range s.routeTable() {
		out = append(out, rt.pattern)
	}
	return out
}

// TestOpenAPICoversRouteTable: the served document lists exactly the
// routes of routeTable, and builds without problems.
func TestOpenAPICoversRouteTable(t *testing.T) {
	s, srv := newDocsTestServer(t)
	doc := fetchOpenAPI(t, srv.URL)
	missing, extra := diffRoutes(registeredRoutes(s), documentedRoutes(doc))
	for _, r := range missing {
		t.Errorf("route %s is registered but not in /openapi.json: add it to operations() in openapi.go", r)
	}
	for _, r := range extra {
		t.Errorf("/openapi.json names %s, which is not a registered route", r)
	}
	if _, problems := s.openAPI(); len(problems) > 0 {
		t.Errorf("the document has problems:\n%s", strings.Join(problems, "\n"))
	}
}

// TestOpenAPIRouteDiffCatchesDrift shows the comparison above failing on
// a document that lacks a route or names one too many.
func TestOpenAPIRouteDiffCatchesDrift(t *testing.T) {
	s, _ := newDocsTestServer(t)
	doc, _ := s.openAPI()
	registered := registeredRoutes(s)

	paths := doc["paths"].(map[string]any)
	delete(paths["/v1/nodes/validate"].(map[string]any), "post")
	paths["/v1/nodes/reboot"] = map[string]any{"post": map[string]any{}}
	missing, extra := diffRoutes(registered, documentedRoutes(doc))
	if !slices.Equal(missing, []string{"POST /v1/nodes/validate"}) || !slices.Equal(extra, []string{"POST /v1/nodes/reboot"}) {
		t.Errorf("diff = missing %q, extra %q; want the removed and the invented route", missing, extra)
	}

	// The builder itself says when operations() and the table disagree.
	ops := operations()
	if _, ok := ops["POST /v1/nodes/validate"]; !ok {
		t.Fatal("operations() lacks validate")
	}
	table := s.routeTable()
	table = append(table, route{"POST /v1/nodes/reboot", "admin", nil})
	known := map[string]bool{}
	for _, rt := range table {
		known[rt.pattern] = true
	}
	var undocumented []string
	for _, p := range slices.Sorted(maps.Keys(known)) {
		if _, ok := ops[p]; !ok {
			undocumented = append(undocumented, p)
		}
	}
	if !slices.Equal(undocumented, []string{"POST /v1/nodes/reboot"}) {
		t.Errorf("undocumented = %q", undocumented)
	}
}

// TestOpenAPIDocument checks the document's shape: version, unique
// operation ids, security per auth rule, error answers, resolvable refs.
func TestOpenAPIDocument(t *testing.T) {
	s, srv := newDocsTestServer(t)
	doc := fetchOpenAPI(t, srv.URL)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	schemes := map[string]string{"admin": "adminBearer", "provider": "providerBearer", "node token": "nodeBearer", "internal": "internalBearer", "user": "userBearer"}
	paths := doc["paths"].(map[string]any)
	ids := map[string]string{}
	for _, rt := range s.routeTable() {
		method, p, _ := strings.Cut(rt.pattern, " ")
		op, _ := paths[p].(map[string]any)[strings.ToLower(method)].(map[string]any)
		if op == nil {
			continue // TestOpenAPICoversRouteTable reports it
		}
		id, _ := op["operationId"].(string)
		if id == "" || ids[id] != "" {
			t.Errorf("%s: operationId %q is empty or also used by %s", rt.pattern, id, ids[id])
		}
		ids[id] = rt.pattern
		if op["summary"] == "" || op["summary"] == nil {
			t.Errorf("%s: no summary", rt.pattern)
		}
		sec, hasSec := op["security"].([]any)
		switch rt.auth {
		case "none", "join key":
			if !hasSec || len(sec) != 0 {
				t.Errorf("%s (%s): security = %v, want [] (no bearer credential)", rt.pattern, rt.auth, op["security"])
			}
		default:
			want := []any{map[string]any{schemes[rt.auth]: []any{}}}
			if !reflect.DeepEqual(sec, want) {
				t.Errorf("%s (%s): security = %v, want %v", rt.pattern, rt.auth, sec, want)
			}
		}
		responses := op["responses"].(map[string]any)
		var want []string
		switch rt.auth {
		case "admin", "provider", "internal", "user":
			want = append(want, "401", "403")
		case "join key", "node token":
			want = append(want, "401")
		}
		if op["requestBody"] != nil {
			want = append(want, "400", "413")
		}
		if strings.Contains(p, "{") {
			want = append(want, "400")
		}
		if rt.pattern != "GET /healthz" {
			want = append(want, "429")
		}
		for _, code := range want {
			if responses[code] == nil {
				t.Errorf("%s: no %s response", rt.pattern, code)
			}
		}
		hasSuccess := false
		for code := range responses {
			hasSuccess = hasSuccess || strings.HasPrefix(code, "2")
		}
		if !hasSuccess {
			t.Errorf("%s: no 2xx response", rt.pattern)
		}
		for _, prm := range jsonSlice(op["parameters"]) {
			prm := prm.(map[string]any)
			if prm["in"] == "path" && !strings.Contains(p, "{"+prm["name"].(string)+"}") {
				t.Errorf("%s: path parameter %v is not in the path", rt.pattern, prm["name"])
			}
		}
	}
	for _, code := range []string{"409", "422", "426"} {
		found := false
		for _, item := range paths {
			for _, op := range item.(map[string]any) {
				found = found || op.(map[string]any)["responses"].(map[string]any)[code] != nil
			}
		}
		if !found {
			t.Errorf("no operation documents a %s answer", code)
		}
	}
	// Every $ref points into the document.
	walkJSON(doc, func(m map[string]any) {
		ref, ok := m["$ref"].(string)
		if !ok {
			return
		}
		if resolveRef(doc, ref) == nil {
			t.Errorf("$ref %q does not resolve", ref)
		}
	})
}

func jsonSlice(v any) []any { s, _ := v.([]any); return s }

func walkJSON(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(v)
		for _, x := range v {
			walkJSON(x, f)
		}
	case []any:
		for _, x := range v {
			walkJSON(x, f)
		}
	}
}

// resolveRef follows a local JSON pointer ("#/components/schemas/X").
func resolveRef(doc map[string]any, ref string) map[string]any {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil
	}
	var cur any = doc
	for _, seg := range strings.Split(p, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")]
	}
	m, _ := cur.(map[string]any)
	return m
}

// TestOpenAPIFieldNotesNameFields: every note is about a field the type
// has (a renamed json tag must not leave its words behind).
func TestOpenAPIFieldNotesNameFields(t *testing.T) {
	for typ, notes := range fieldNotes {
		var names []string
		for _, f := range jsonFields(typ) {
			names = append(names, f.name)
		}
		for name := range notes {
			if !slices.Contains(names, name) {
				t.Errorf("fieldNotes[%s] describes %q, which is not one of its json fields %q", typ, name, names)
			}
		}
	}
}

// TestOpenAPIAnswersMatchSchemas sends real requests and checks each
// answer against its documented schema: every required field present,
// no field the schema does not list.
func TestOpenAPIAnswersMatchSchemas(t *testing.T) {
	_, srv := newDocsTestServer(t)
	doc := fetchOpenAPI(t, srv.URL)
	_, pub, _ := wgkey.GeneratePair()
	call := func(method, path, token string, body any) (int, any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			data, _ := json.Marshal(body)
			rd = bytes.NewReader(data)
		}
		req, _ := http.NewRequest(method, srv.URL+path, rd)
		if rd != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v any
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return resp.StatusCode, v
	}
	check := func(method, path, docPath string, status int, v any) {
		t.Helper()
		op := doc["paths"].(map[string]any)[docPath].(map[string]any)[strings.ToLower(method)].(map[string]any)
		resp, _ := op["responses"].(map[string]any)[docsItoa(status)].(map[string]any)
		if ref, ok := resp["$ref"].(string); ok {
			resp = resolveRef(doc, ref)
		}
		if resp == nil {
			t.Errorf("%s %s answered %d, which the document does not list", method, path, status)
			return
		}
		schema := resp["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
		for _, problem := range conforms(doc, schema, v, "") {
			t.Errorf("%s %s (%d): %s", method, path, status, problem)
		}
	}

	answer := func(method, path, docPath, token string, body any, want int) map[string]any {
		t.Helper()
		status, v := call(method, path, token, body)
		if status != want {
			t.Errorf("%s %s: %d %v, want %d", method, path, status, v, want)
		}
		check(method, path, docPath, status, v)
		m, _ := v.(map[string]any)
		return m
	}

	answer("GET", "/healthz", "/healthz", "", nil, 200)
	key, _ := answer("POST", "/v1/nodes/join-keys", "/v1/nodes/join-keys", docsAdminToken, map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 3600}, 201)["key"].(string)
	answer("POST", "/v1/nodes/join-keys", "/v1/nodes/join-keys", docsAdminToken, map[string]any{"kind": "provider", "org": "acme", "ttl_seconds": 3600}, 201)
	answer("GET", "/v1/nodes/join-keys", "/v1/nodes/join-keys", docsAdminToken, nil, 200)
	nodeToken, _ := answer("POST", "/v1/nodes/validate", "/v1/nodes/validate", "",
		map[string]any{"key": key, "hostname": "gpu-node-1", "public_key": pub.String(), "version": "1.4.2"}, 200)["node_token"].(string)
	answer("POST", "/v1/nodes/register", "/v1/nodes/register", "", map[string]any{"node_token": nodeToken, "hostname": "gpu-node-1", "version": "1.4.2",
		"gpus": []any{map[string]any{"index": 0, "vendor": "nvidia", "name": "NVIDIA A100", "memory_mib": 81920, "uuid": "GPU-1"}}}, 200)
	answer("GET", "/v1/nodes/gpu-node-1", "/v1/nodes/{hostname}", docsAdminToken, nil, 200)
	answer("GET", "/v1/nodes", "/v1/nodes", docsAdminToken, nil, 200)
	answer("POST", "/v1/nodes/report-version", "/v1/nodes/report-version", nodeToken, map[string]any{"hostname": "gpu-node-1", "version": "1.4.3"}, 200)
	answer("GET", "/v1/kuberay/clusters", "/v1/kuberay/clusters", docsAdminToken, nil, 200)
	answer("GET", "/v1/kuberay/clusters/gridweave-cluster/worker-groups", "/v1/kuberay/clusters/{name}/worker-groups", docsAdminToken, nil, 200)
	answer("GET", "/v1/kuberay/clusters/gridweave-cluster/workers", "/v1/kuberay/clusters/{name}/workers", docsAdminToken, nil, 200)
	answer("POST", "/v1/nodes/disconnect", "/v1/nodes/disconnect", docsAdminToken, map[string]any{"hostname": "gpu-node-1"}, 200)

	// Errors in the contract's shape.
	answer("POST", "/v1/nodes/validate", "/v1/nodes/validate", "", map[string]any{"key": key, "hostname": "Not A Hostname", "public_key": pub.String(), "version": "1.4.2"}, 400)
	answer("POST", "/v1/nodes/validate", "/v1/nodes/validate", "", map[string]any{"key": key, "hostname": "gpu-node-2", "public_key": pub.String(), "version": "2.0.0"}, 426)
	answer("GET", "/v1/nodes", "/v1/nodes", "", nil, 401)
	answer("GET", "/v1/nodes/join-keys", "/v1/nodes/join-keys", key, nil, 401)
	answer("GET", "/v1/nodes/nobody", "/v1/nodes/{hostname}", docsAdminToken, nil, 404)
}

func docsItoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// conforms checks v against the parts of JSON Schema the document uses:
// $ref, type (with null), properties, required, additionalProperties,
// items, anyOf/oneOf, const, enum.
func conforms(doc, schema map[string]any, v any, at string) []string {
	if ref, ok := schema["$ref"].(string); ok {
		return conforms(doc, resolveRef(doc, ref), v, at)
	}
	if alts, ok := schema["anyOf"].([]any); ok {
		return conformsOne(doc, alts, v, at)
	}
	if alts, ok := schema["oneOf"].([]any); ok {
		return conformsOne(doc, alts, v, at)
	}
	if c, ok := schema["const"]; ok && !reflect.DeepEqual(c, v) {
		return []string{at + ": " + jsonString(v) + " is not " + jsonString(c)}
	}
	if enum, ok := schema["enum"].([]any); ok && !slices.ContainsFunc(enum, func(e any) bool { return reflect.DeepEqual(e, v) }) {
		return []string{at + ": " + jsonString(v) + " is not one of " + jsonString(enum)}
	}
	if types := schemaTypes(schema["type"]); types != nil && !slices.Contains(types, jsonType(v)) &&
		!(jsonType(v) == "integer" && slices.Contains(types, "number")) {
		return []string{at + ": " + jsonType(v) + " " + jsonString(v) + ", want " + strings.Join(types, " or ")}
	}
	var problems []string
	switch v := v.(type) {
	case map[string]any:
		props, _ := schema["properties"].(map[string]any)
		for _, r := range jsonSlice(toAnySlice(schema["required"])) {
			if _, ok := v[r.(string)]; !ok {
				problems = append(problems, at+"."+r.(string)+": required but absent")
			}
		}
		for k, x := range v {
			if ps, ok := props[k].(map[string]any); ok {
				problems = append(problems, conforms(doc, ps, x, at+"."+k)...)
			} else if add, ok := schema["additionalProperties"].(map[string]any); ok {
				problems = append(problems, conforms(doc, add, x, at+"."+k)...)
			} else if props != nil && schema["additionalProperties"] != true {
				problems = append(problems, at+"."+k+": not in the schema")
			}
		}
	case []any:
		if items, ok := schema["items"].(map[string]any); ok {
			for i, x := range v {
				problems = append(problems, conforms(doc, items, x, at+"["+docsItoa(i)+"]")...)
			}
		}
	}
	return problems
}

func conformsOne(doc map[string]any, alts []any, v any, at string) []string {
	var all []string
	for _, a := range alts {
		p := conforms(doc, a.(map[string]any), v, at)
		if len(p) == 0 {
			return nil
		}
		all = append(all, p...)
	}
	return all
}

func toAnySlice(v any) any {
	switch v := v.(type) {
	case []string:
		out := make([]any, len(v))
		for i, s := range v {
			out[i] = s
		}
		return out
	}
	return v
}

func schemaTypes(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, x.(string))
		}
		return out
	}
	return nil
}

func jsonType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}

func jsonString(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestDocsOpenWithoutCredentials: the document, the page and its files
// answer without credentials, from this origin only.
func TestDocsOpenWithoutCredentials(t *testing.T) {
	_, srv := newDocsTestServer(t)
	for _, tc := range []struct {
		path, contentType, contains string
	}{
		{"/openapi.json", "application/json", `"openapi": "3.1.0"`},
		{"/docs", "text/html", `src="docs/swagger-ui-bundle.js"`},
		{"/docs/swagger-ui-bundle.js", "text/javascript", "SwaggerUIBundle"},
		{"/docs/swagger-ui.css", "text/css", ".swagger-ui"},
		{"/docs/gridweave-docs.js", "text/javascript", `url: "openapi.json"`},
		{"/docs/LICENSE", "text/plain", "Apache License"},
	} {
		resp, body := docsGet(t, srv.URL+tc.path)
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d, want 200", tc.path, resp.StatusCode)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.contentType) {
			t.Errorf("GET %s: Content-Type %q, want %s", tc.path, ct, tc.contentType)
		}
		if !bytes.Contains(body, []byte(tc.contains)) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}
		if strings.HasPrefix(tc.path, "/docs") && !strings.Contains(resp.Header.Get("Content-Security-Policy"), "connect-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q does not keep requests to this origin", tc.path, resp.Header.Get("Content-Security-Policy"))
		}
	}
	for _, path := range []string{"/docs/index.html", "/docs/README.md", "/docs/nope.js", "/docs/..%2fopenapi.go", "/docs/webdocs%2fLICENSE"} {
		if resp, body := docsGet(t, srv.URL+path); resp.StatusCode != 404 {
			t.Errorf("GET %s: %d %s, want 404", path, resp.StatusCode, body)
		}
	}
	// The page names no other host.
	for _, path := range []string{"/docs", "/docs/gridweave-docs.js"} {
		_, body := docsGet(t, srv.URL+path)
		if bytes.Contains(body, []byte("http://")) || bytes.Contains(body, []byte("https://")) {
			t.Errorf("GET %s names an absolute URL", path)
		}
	}
}
