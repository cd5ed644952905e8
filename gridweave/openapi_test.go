package gridweave

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/internal/openapitest"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
	"gridweave.dev/rayctl/rayctltest"
)

const docsAdminToken = "docs-admin-token-0123456789abcdef"

// newDocsTestServer starts the service over in-memory backends.
func newDocsTestServer(t testing.TB) (*Server, *httptest.Server) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.AdminToken, cfg.JWTSecret, cfg.ServerVersion = docsAdminToken, "docs-jwt-secret-0123456789abcdef0123", "1.4.0"
	cfg.MasterIP, cfg.VPNCIDR, cfg.MasterVPNIP = "203.0.113.7", netip.MustParsePrefix("198.18.0.0/16"), netip.MustParseAddr("198.18.0.1")
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
		t.Errorf("route %s is registered but not in /openapi.json: give it its doc in routeTable", r)
	}
	for _, r := range extra {
		t.Errorf("/openapi.json names %s, which is not a registered route", r)
	}
}

// TestOpenAPIBuildCatchesDrift: a route without its documentation stops
// the build and is named.
func TestOpenAPIBuildCatchesDrift(t *testing.T) {
	s, _ := newDocsTestServer(t)
	for name, doc := range map[string]operation{
		"no doc":     {},
		"no summary": {id: "rebootNode", status: 200, response: api.Health{}},
		"no status":  {id: "rebootNode", summary: "Reboot a node", response: api.Health{}},
	} {
		table := append(s.routeTable(), route{pattern: "POST /v1/nodes/reboot", auth: authAdmin, on: onPublic, doc: doc})
		_, err := buildOpenAPI(table, "1.0.0")
		if err == nil || !strings.Contains(err.Error(), `route "POST /v1/nodes/reboot" is not documented`) {
			t.Errorf("%s: a route without documentation: %v", name, err)
		}
	}
}

// TestOpenAPIDocument checks the document's shape: version, servers,
// unique operation ids and summaries, who may call each route, the error
// answers of each route, and that every $ref resolves.
func TestOpenAPIDocument(t *testing.T) {
	s, srv := newDocsTestServer(t)
	doc := fetchOpenAPI(t, srv.URL)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	if servers := jsonSlice(doc["servers"]); len(servers) == 0 {
		t.Error("the document names no servers")
	}
	schemes := map[authRule]string{authAdmin: "adminBearer", authProvider: "providerBearer", authNodeToken: "nodeBearer", authInternal: "internalBearer", authUser: "userBearer"}
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
		case authNone, authBodyCredential:
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
		want := []string{"405"}
		switch rt.auth {
		case authAdmin, authProvider, authInternal, authUser, authNodeToken:
			want = append(want, "401", "403")
		case authBodyCredential:
			want = append(want, "401")
		}
		if op["requestBody"] != nil {
			want = append(want, "400", "413", "415")
		}
		if strings.Contains(p, "{") {
			want = append(want, "400", "404")
		}
		if rt.pattern != "GET /healthz" {
			want = append(want, "429")
		}
		for _, code := range want {
			if responses[code] == nil {
				t.Errorf("%s: no %s response", rt.pattern, code)
			}
		}
		hasSuccess, has4xx := false, false
		for code := range responses {
			hasSuccess = hasSuccess || strings.HasPrefix(code, "2")
			has4xx = has4xx || strings.HasPrefix(code, "4")
		}
		if !hasSuccess || !has4xx {
			t.Errorf("%s: a 2xx answer %v, a 4xx answer %v; want both", rt.pattern, hasSuccess, has4xx)
		}
		for _, prm := range jsonSlice(op["parameters"]) {
			prm := prm.(map[string]any)
			if prm["in"] == "path" && !strings.Contains(p, "{"+prm["name"].(string)+"}") {
				t.Errorf("%s: path parameter %v is not in the path", rt.pattern, prm["name"])
			}
			if prm["description"] == "" || prm["description"] == nil {
				t.Errorf("%s: parameter %v has no description", rt.pattern, prm["name"])
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
	// Every error status documented has its codes.
	for status := range errorResponses {
		if len(errorCodes[status]) == 0 {
			t.Errorf("status %d has no error codes", status)
		}
	}
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

// TestOpenAPIValidatorRefusesWhatTheDocumentDoesNotSay: the check every
// HTTP test runs on every answer fails on an undocumented field, status,
// error code or content type, and on a required field left out.
func TestOpenAPIValidatorRefusesWhatTheDocumentDoesNotSay(t *testing.T) {
	s, _ := newDocsTestServer(t)
	raw, err := s.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	d := openapitest.MustParse(t, raw)
	good := `{"status":"ok","version":"1.4.0"}`
	if err := d.Check("GET", "/healthz", 200, "application/json", []byte(good)); err != nil {
		t.Fatalf("a documented answer: %v", err)
	}
	goodNode := `{"node":{"hostname":"box","public_key":"k","vpn_ip":"198.18.0.2","org":"acme","join_key_id":"id","version":"1.4.0","status":"registered",` +
		`"gpus":[],"pod_cidr":null,"created_at":"2026-12-02T10:00:00Z","updated_at":"2026-12-02T10:00:00Z","registered_at":null,"last_seen":null,"last_handshake":null,"online":false,"worker_group":null,"version_behind":false,"links":null}}`
	if err := d.Check("GET", "/v1/nodes/box", 200, "application/json", []byte(goodNode)); err != nil {
		t.Fatalf("a documented node: %v", err)
	}
	for _, c := range []struct {
		name, method, path string
		status             int
		ct, body           string
	}{
		{"an undocumented field", "GET", "/healthz", 200, "application/json", `{"status":"ok","version":"1.4.0","uptime":3}`},
		{"a required field left out", "GET", "/healthz", 200, "application/json", `{"status":"ok"}`},
		{"an undocumented status", "GET", "/healthz", 418, "application/json", `{"error":{"code":"teapot","message":"x"}}`},
		{"an undocumented error code", "POST", "/v1/nodes/validate", 409, "application/json", `{"error":{"code":"machine_on_fire","message":"x"}}`},
		{"an error code of another status", "POST", "/v1/nodes/validate", 401, "application/json", `{"error":{"code":"hostname_taken","message":"x"}}`},
		{"an undocumented content type", "GET", "/healthz", 200, "text/plain", "ok"},
		{"a field of the wrong type", "GET", "/v1/nodes/box", 200, "application/json", strings.Replace(goodNode, `"hostname":"box"`, `"hostname":7`, 1)},
		{"null where a list is always given", "GET", "/v1/nodes/box", 200, "application/json", strings.Replace(goodNode, `"gpus":[]`, `"gpus":null`, 1)},
		{"no such operation", "PUT", "/healthz", 200, "application/json", good},
	} {
		if err := d.Check(c.method, c.path, c.status, c.ct, []byte(c.body)); err == nil {
			t.Errorf("%s: passed", c.name)
		}
	}
}

// TestOpenAPIAnswersMatchSchemas walks the join flow and the cluster
// reads, with some errors, through a server whose every answer is held
// to the document (the harness's check, which every HTTP test runs).
func TestOpenAPIAnswersMatchSchemas(t *testing.T) {
	s, _ := newDocsTestServer(t)
	raw, err := s.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(openapitest.Middleware(t, openapitest.MustParse(t, raw), s.Handler()))
	t.Cleanup(srv.Close)
	_, pub, _ := wgkey.GeneratePair()
	call := func(method, path, token string, body any, want int) map[string]any {
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
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		if resp.StatusCode != want {
			t.Errorf("%s %s: %d %v, want %d", method, path, resp.StatusCode, v, want)
		}
		return v
	}
	call("GET", "/healthz", "", nil, 200)
	call("GET", "/readyz", "", nil, 200)
	key, _ := call("POST", "/v1/nodes/join-keys", docsAdminToken, map[string]any{"kind": "org", "org": "acme", "ttl_seconds": 3600}, 201)["key"].(string)
	call("POST", "/v1/nodes/join-keys", docsAdminToken, map[string]any{"kind": "provider", "org": "acme", "ttl_seconds": 3600}, 201)
	call("GET", "/v1/nodes/join-keys", docsAdminToken, nil, 200)
	nodeToken, _ := call("POST", "/v1/nodes/validate", "", map[string]any{"key": key, "hostname": "gpu-node-1", "public_key": pub.String(), "version": "1.4.2"}, 200)["node_token"].(string)
	call("POST", "/v1/nodes/register", "", map[string]any{"node_token": nodeToken, "hostname": "gpu-node-1", "version": "1.4.2",
		"gpus": []any{map[string]any{"index": 0, "vendor": "nvidia", "name": "NVIDIA A100", "memory_mib": 81920, "uuid": "GPU-1"}}}, 200)
	call("GET", "/v1/nodes/gpu-node-1", docsAdminToken, nil, 200)
	call("GET", "/v1/nodes", docsAdminToken, nil, 200)
	call("POST", "/v1/nodes/report-version", nodeToken, map[string]any{"hostname": "gpu-node-1", "version": "1.4.3"}, 200)
	call("GET", "/v1/kuberay/clusters", docsAdminToken, nil, 200)
	call("GET", "/v1/kuberay/clusters/gridweave-cluster", docsAdminToken, nil, 200)
	call("GET", "/v1/kuberay/clusters/gridweave-cluster/worker-groups", docsAdminToken, nil, 200)
	call("GET", "/v1/kuberay/clusters/gridweave-cluster/workers", docsAdminToken, nil, 200)
	call("POST", "/v1/nodes/disconnect", docsAdminToken, map[string]any{"hostname": "gpu-node-1"}, 200)

	// Errors in the contract's shape.
	call("POST", "/v1/nodes/validate", "", map[string]any{"key": key, "hostname": "Not A Hostname", "public_key": pub.String(), "version": "1.4.2"}, 400)
	call("POST", "/v1/nodes/validate", "", map[string]any{"key": key, "hostname": "gpu-node-2", "public_key": pub.String(), "version": "2.0.0"}, 426)
	call("GET", "/v1/nodes", "", nil, 401)
	call("GET", "/v1/nodes/join-keys", key, nil, 401)
	call("GET", "/v1/nodes/nobody", docsAdminToken, nil, 404)
	call("PUT", "/v1/nodes", docsAdminToken, map[string]any{}, 405)
}

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

// TestAPIDocNamesEveryRouteAndCode holds docs/api.md, the wire contract
// people read, to the route table and the error codes: every route's
// method and path is named, and every code stands in its status's row.
func TestAPIDocNamesEveryRouteAndCode(t *testing.T) {
	raw, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	s, _ := newDocsTestServer(t)
	for _, rt := range s.routeTable() {
		if !strings.Contains(page, "`"+rt.pattern+"`") {
			t.Errorf("docs/api.md does not name `%s`", rt.pattern)
		}
	}
	for status, codes := range errorCodes {
		row := ""
		for _, line := range strings.Split(page, "\n") {
			if strings.HasPrefix(line, fmt.Sprintf("| %d |", status)) {
				row = line
			}
		}
		if row == "" {
			t.Errorf("docs/api.md has no row for status %d in its error codes", status)
			continue
		}
		for _, code := range codes {
			if !strings.Contains(row, "`"+code+"`") {
				t.Errorf("docs/api.md's row for %d lacks `%s`", status, code)
			}
		}
		for _, m := range regexp.MustCompile("`([a-z0-9_]+)`").FindAllStringSubmatch(row, -1) {
			if !slices.Contains(codes, m[1]) {
				t.Errorf("docs/api.md's row for %d names `%s`, which the server does not answer with that status", status, m[1])
			}
		}
	}
}
