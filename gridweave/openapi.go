package gridweave

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/swaggest/jsonschema-go"
	"github.com/swaggest/openapi-go"
	"github.com/swaggest/openapi-go/openapi31"

	"gridweave.dev/gridweave/api"
)

// The API's own description: GET /openapi.json is an OpenAPI 3.1 document.
// swaggest/openapi-go reflects the schemas of the request and answer
// bodies from the Go types of package api (their json names, and their
// description, example and enum tags; a field without omitempty is
// required), and the operations from the route table (each route's doc).
// This file adds what reflection cannot know: who may call
// each route (security), the error answers each route can give with the
// codes it may answer (routeCodes: its own and those of its kind), the path and query
// parameters' words, and servers. Tests hold the document to the route
// table both ways, and validate every answer the HTTP tests receive
// against it.

// OpenAPI returns the service's OpenAPI 3.1 document, as JSON. It is
// built once.
func (s *Server) OpenAPI() ([]byte, error) {
	s.openapiOnce.Do(func() { s.openapiDoc, s.openapiErr = buildOpenAPI(s.routeTable(), s.cfg.ServerVersion) })
	return s.openapiDoc, s.openapiErr
}

// openapiCache holds the built document.
type openapiCache struct {
	openapiOnce sync.Once
	openapiDoc  []byte
	openapiErr  error
}

func buildOpenAPI(table []route, version string) ([]byte, error) {
	r := openapi31.NewReflector()
	r.Spec.Info.
		WithTitle("Gridweave control plane").
		WithVersion(version).
		WithDescription("Onboards machines into the GPU cluster (the join flow) and manages its RayClusters.\n\n" +
			"Credentials are bearer tokens (`Authorization: Bearer …`): press **Authorize** and fill in the one a route names. " +
			"`validate` and `register` take the join key or node token in the body instead. " +
			"Every error is `{\"error\": {\"code\", \"message\", \"field\"?, …}}`; every field of an answer that is not marked optional is always present (null when not set). " +
			"A JSON body needs `Content-Type: application/json` (else 415).").
		WithLicense(openapi31.License{Name: "Apache-2.0", Identifier: ptrTo("Apache-2.0")})
	jr := r.JSONSchemaReflector()
	jr.DefaultOptions = append(jr.DefaultOptions,
		jsonschema.InterceptDefName(componentName),
		jsonschema.InterceptNullability(func(p jsonschema.InterceptNullabilityParams) {
			// Lists and maps are answered empty, never null.
			if p.NullAdded && (p.Type.Kind() == reflect.Slice || p.Type.Kind() == reflect.Map) {
				p.Schema.RemoveType(jsonschema.Null)
			}
		}),
		jsonschema.InterceptSchema(func(p jsonschema.InterceptSchemaParams) (bool, error) {
			// Our own structs have exactly their fields: the decoder refuses
			// others in a request, and an answer carries no others.
			if p.Processed && p.Value.Kind() == reflect.Struct && p.Schema.HasType(jsonschema.Object) && p.Schema.AdditionalProperties == nil {
				if _, exposes := p.Value.Interface().(jsonschema.Exposer); !exposes {
					p.Schema.WithAdditionalProperties(jsonschema.SchemaOrBool{TypeBoolean: ptrTo(false)})
				}
			}
			return false, nil
		}),
		jsonschema.InterceptProp(func(p jsonschema.InterceptPropParams) error {
			if !p.Processed || p.ParentSchema == nil || p.Field.Tag.Get("json") == "" {
				return nil
			}
			name, opts, _ := strings.Cut(p.Field.Tag.Get("json"), ",")
			if name == "-" || strings.Contains(opts, "omitempty") || slices.Contains(p.ParentSchema.Required, p.Name) {
				return nil
			}
			p.ParentSchema.Required = append(p.ParentSchema.Required, p.Name)
			return nil
		}),
	)
	jr.AddTypeMapping(rayv1.RayCluster{}, rayClusterDoc{})
	jr.AddTypeMapping(&rayv1.RayCluster{}, rayClusterDoc{})
	jr.AddTypeMapping(rayv1.WorkerGroupSpec{}, workerGroupSpecDoc{})

	var problems []string
	for _, rt := range table {
		op := rt.doc
		if op.id == "" || op.summary == "" || op.status == 0 {
			problems = append(problems, fmt.Sprintf("route %q is not documented: give its doc an id, a summary and its status", rt.pattern))
			continue
		}
		if rt.auth == authBodyCredential {
			op.description = strings.TrimSpace(op.description + "\n\nCredential: the join key (`key`) or the node token (`node_token`) in the body, checked before any other field.")
		}
		if err := addOperation(r, rt, op); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return nil, fmt.Errorf("the OpenAPI document is incomplete:\n%s", strings.Join(problems, "\n"))
	}
	raw, err := json.Marshal(r.Spec)
	if err != nil {
		return nil, err
	}
	// What reflection does not know, added to the document as JSON.
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	completeOpenAPI(doc, table)
	return json.MarshalIndent(doc, "", "  ")
}

func ptrTo[T any](v T) *T { return &v }

// componentName names a Go type's schema: its own name, capitalised
// (api.Node is Node, rayctl.ClusterSpec is ClusterSpec; the describing
// types of this package without their Doc: rayClusterDoc is RayCluster).
func componentName(t reflect.Type, def string) string {
	n := t.Name()
	if n == "" {
		return def
	}
	if t.PkgPath() == reflect.TypeFor[rayClusterDoc]().PkgPath() {
		n = strings.TrimSuffix(n, "Doc")
	}
	return strings.ToUpper(n[:1]) + n[1:]
}

// addOperation adds one route to the reflector: its words, its path and
// query parameters, its body and its 2xx answer.
func addOperation(r *openapi31.Reflector, rt route, op operation) error {
	method, path, _ := strings.Cut(rt.pattern, " ")
	oc, err := r.NewOperationContext(method, path)
	if err != nil {
		return err
	}
	oc.SetID(op.id)
	oc.SetSummary(op.summary)
	oc.SetTags(op.tag)
	if op.description != "" {
		oc.SetDescription(op.description)
	}
	if params := parameters(path, op.query); params != nil {
		oc.AddReqStructure(params)
	}
	if op.request != nil {
		oc.AddReqStructure(op.request)
	}
	ct := op.responseType
	if ct == "" {
		ct = "application/json"
	}
	oc.AddRespStructure(op.response, openapi.WithHTTPStatus(op.status), openapi.WithContentType(ct))
	for status, alt := range op.alternatives {
		oc.AddRespStructure(alt, openapi.WithHTTPStatus(status))
	}
	if err := r.AddOperation(oc); err != nil {
		return fmt.Errorf("%s: %w", rt.pattern, err)
	}
	return nil
}

// parameters is a value of a struct type made for the route's path and
// query parameters, tagged as swaggest reads them; nil when it has none.
func parameters(path string, query []param) any {
	var fields []reflect.StructField
	for _, seg := range strings.Split(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			fields = append(fields, reflect.StructField{Name: fmt.Sprintf("P%d", len(fields)), Type: reflect.TypeFor[string](),
				Tag: reflect.StructTag(fmt.Sprintf(`path:%q description:%q`, name, pathParams[name]))})
		}
	}
	for _, q := range query {
		fields = append(fields, reflect.StructField{Name: fmt.Sprintf("Q%d", len(fields)), Type: q.typ,
			Tag: reflect.StructTag(fmt.Sprintf(`query:%q description:%q`, q.name, q.description))})
	}
	if fields == nil {
		return nil
	}
	return reflect.New(reflect.StructOf(fields)).Elem().Interface()
}

// completeOpenAPI adds to the reflected document who may call each
// route, the error answers, the request id header and servers.
func completeOpenAPI(doc map[string]any, table []route) {
	doc["servers"] = []any{map[string]any{"url": "/", "description": "This server (the public listener)."}}
	doc["tags"] = []any{
		map[string]any{"name": "nodes", "description": "The join flow and the node ledger."},
		map[string]any{"name": "clusters", "description": "RayClusters and their worker groups."},
		map[string]any{"name": "crd", "description": "The gateway's GridweaveJobs and GridweaveEndpoints (internal)."},
		map[string]any{"name": "ray", "description": "Ray Serve through the cluster's dashboard (internal)."},
		map[string]any{"name": "kubetorch", "description": "Code bundles and distributed training on a cluster's GPU workers."},
		map[string]any{"name": "service", "description": "Health, readiness and metrics."},
		map[string]any{"name": "docs", "description": "This document and the page that renders it."},
	}
	components, _ := doc["components"].(map[string]any)
	if components == nil {
		components = map[string]any{}
		doc["components"] = components
	}
	schemes := map[string]any{}
	for _, sc := range securitySchemes {
		schemes[sc.scheme] = map[string]any{"type": "http", "scheme": "bearer", "description": sc.desc}
	}
	components["securitySchemes"] = schemes
	components["headers"] = map[string]any{
		"X-Request-Id": map[string]any{"description": "The request's id (the caller's X-Request-Id when sane); the server log carries it.", "schema": map[string]any{"type": "string"}},
	}
	responses := map[string]any{}
	for status, e := range errorResponses {
		responses[e.name] = errorResponse(status, e.desc, errorCodes[status])
	}
	components["responses"] = responses
	schemas, _ := components["schemas"].(map[string]any)
	if schemas == nil {
		schemas = map[string]any{}
		components["schemas"] = schemas
	}
	schemas["Error"] = errorSchema(nil)

	paths, _ := doc["paths"].(map[string]any)
	for _, rt := range table {
		method, path, _ := strings.Cut(rt.pattern, " ")
		item, _ := paths[path].(map[string]any)
		o, _ := item[strings.ToLower(method)].(map[string]any)
		if o == nil {
			continue
		}
		op := rt.doc
		switch sc, ok := securitySchemes[rt.auth]; {
		case ok:
			o["security"] = []any{map[string]any{sc.scheme: []any{}}}
		default:
			o["security"] = []any{}
		}
		rs, _ := o["responses"].(map[string]any)
		for _, resp := range rs {
			if m, ok := resp.(map[string]any); ok {
				m["headers"] = map[string]any{"X-Request-Id": map[string]any{"$ref": "#/components/headers/X-Request-Id"}}
			}
		}
		for status, resp := range routeErrorResponses(routeCodes(rt, op, path)) {
			rs[status] = resp
		}
	}
}

// routeCodes are the error codes a route can answer: its own (its doc's
// codes), and those of its kind: its credential, its body and
// parameters, the listeners it is on, the rate limit, and the 405, 413
// (a declared length over the limit, whatever the route) and 500 every
// route can give.
func routeCodes(rt route, op operation, path string) []string {
	codes := slices.Clone(op.codes)
	if strings.Contains(path, "{") || len(op.query) > 0 {
		codes = append(codes, api.CodeInvalidField)
	}
	if op.request != nil {
		codes = append(codes, api.CodeInvalidJSON, api.CodeInvalidBody, api.CodeInvalidField, api.CodeUnsupportedMediaType)
	}
	switch rt.auth {
	case authAdmin, authUser, authProvider:
		// A bearer that is no JWT of ours may be a provider key, looked up
		// in the ledger: its failure to answer is the route's answer.
		codes = append(codes, api.CodeUnauthenticated, api.CodeForbidden)
		codes = append(codes, kubernetesCodes...)
	case authNodeToken:
		codes = append(codes, api.CodeUnauthenticated, api.CodeForbidden)
	case authInternal:
		codes = append(codes, api.CodeUnauthenticated, api.CodeForbidden, api.CodeInternalRoute)
	case authBodyCredential:
		codes = append(codes, api.CodeUnauthenticated, api.CodeInvalidJoinKey, api.CodeJoinKeyExpired, api.CodeJoinKeyRevoked,
			api.CodeJoinKeyExhausted, api.CodeJoinKeyNotYetValid, api.CodeInvalidNodeToken)
	}
	switch {
	case rt.on&publicUntilVPN != 0:
		codes = append(codes, api.CodeThroughTheTunnel) // once a VPN listener serves it
	case rt.on&onPublic == 0:
		codes = append(codes, api.CodeNotFound) // the public listener's answer
	}
	if rt.on&onVPN != 0 {
		codes = append(codes, api.CodeOutsideVPN)
	}
	if rt.on&onInternal != 0 {
		codes = append(codes, api.CodeFromTheFleet)
	}
	if rt.on&(onPublic|publicUntilVPN) == 0 || rt.on&onVPN == 0 || rt.on&onInternal == 0 {
		// The listeners that do not serve it answer its path as no route.
		codes = append(codes, api.CodeNoSuchRoute)
	}
	if rt.pattern != "GET /healthz" {
		codes = append(codes, api.CodeRateLimited)
	}
	codes = append(codes, api.CodeMethodNotAllowed, api.CodeBodyTooLarge, api.CodeInternal)
	slices.Sort(codes)
	return slices.Compact(codes)
}

// routeErrorResponses are a route's error answers by status, each
// listing the codes of codes it comes with.
func routeErrorResponses(codes []string) map[string]any {
	byStatus := map[int][]string{}
	for _, c := range codes {
		status := api.ErrorStatus[c]
		byStatus[status] = append(byStatus[status], c)
	}
	out := map[string]any{}
	for status, cs := range byStatus {
		out[strconv.Itoa(status)] = errorResponse(status, errorResponses[status].desc, cs)
	}
	return out
}

// errorSchema is the error body; with codes, its code is one of them.
func errorSchema(codes []string) map[string]any {
	code := map[string]any{"type": "string", "description": "A snake_case code a program can switch on.", "examples": []any{"invalid_field"}}
	if codes != nil {
		code["enum"] = codes
	}
	return map[string]any{
		"type": "object", "required": []any{"error"}, "additionalProperties": false,
		"properties": map[string]any{"error": map[string]any{
			"type": "object", "required": []any{"code", "message"},
			"properties": map[string]any{
				"code":    code,
				"message": map[string]any{"type": "string", "description": "A sentence for a person."},
				"field":   map[string]any{"type": "string", "description": "The request field at fault, when there is one.", "examples": []any{"hostname"}},
			},
			"additionalProperties": true,
			"description":          "Some codes add details, e.g. `version_mismatch` adds `server_version`, `min_version` and `worker_version`.",
		}},
	}
}

// errorResponse is an error answer of status whose code is one of codes.
func errorResponse(status int, desc string, codes []string) map[string]any {
	headers := map[string]any{"X-Request-Id": map[string]any{"$ref": "#/components/headers/X-Request-Id"}}
	switch status {
	case http.StatusUnauthorized:
		headers["WWW-Authenticate"] = map[string]any{"description": "`Bearer realm=\"gridweave\"`", "schema": map[string]any{"type": "string"}}
	case http.StatusUpgradeRequired:
		headers["Upgrade"] = map[string]any{"description": "`gridweave-worker/<server version>`", "schema": map[string]any{"type": "string"}}
	case http.StatusTooManyRequests:
		headers["Retry-After"] = map[string]any{"description": "Seconds until a request is admitted again.", "schema": map[string]any{"type": "integer"}}
	case http.StatusMethodNotAllowed:
		headers["Allow"] = map[string]any{"description": "The methods the path serves.", "schema": map[string]any{"type": "string"}}
	}
	return map[string]any{
		"description": desc + " Codes: `" + strings.Join(codes, "`, `") + "`.",
		"headers":     headers,
		"content":     map[string]any{"application/json": map[string]any{"schema": errorSchema(codes)}},
	}
}

// rayClusterDoc and workerGroupSpecDoc describe KubeRay's objects by
// reference to KubeRay's own CRD, which is too large to repeat here.
type (
	rayClusterDoc      struct{}
	workerGroupSpecDoc struct{}
	gridweaveObjectDoc struct{}
	binaryDoc          struct{}
	anyObjectDoc       struct{}
)

const rayCRD = "https://github.com/ray-project/kuberay/blob/v1.6.0/ray-operator/config/crd/bases/ray.io_rayclusters.yaml"

func schemaOf(m map[string]any) (jsonschema.Schema, error) {
	var s jsonschema.Schema
	raw, err := json.Marshal(m)
	if err != nil {
		return s, err
	}
	err = json.Unmarshal(raw, &s)
	return s, err
}

// JSONSchema implements jsonschema.Exposer.
func (rayClusterDoc) JSONSchema() (jsonschema.Schema, error) {
	return schemaOf(map[string]any{
		"type":        "object",
		"title":       "RayCluster",
		"description": "A KubeRay `ray.io/v1` RayCluster, as Kubernetes stores it (KubeRay v1.6.0; schema: " + rayCRD + ").",
		"required":    []string{"apiVersion", "kind", "metadata", "spec"},
		"properties": map[string]any{
			"apiVersion": map[string]any{"const": "ray.io/v1"},
			"kind":       map[string]any{"const": "RayCluster"},
			"metadata":   map[string]any{"type": "object", "description": "Kubernetes ObjectMeta (name, namespace, labels, …)."},
			"spec":       map[string]any{"type": "object", "description": "RayClusterSpec: headGroupSpec, workerGroupSpecs, rayVersion, …"},
			"status":     map[string]any{"type": "object", "description": "RayClusterStatus, written by KubeRay."},
		},
		"additionalProperties": true,
	})
}

// JSONSchema implements jsonschema.Exposer.
func (workerGroupSpecDoc) JSONSchema() (jsonschema.Schema, error) {
	return schemaOf(map[string]any{
		"type":        "object",
		"title":       "WorkerGroupSpec",
		"description": "A KubeRay `ray.io/v1` WorkerGroupSpec (an item of RayCluster `spec.workerGroupSpecs`; schema: " + rayCRD + ").",
		"required":    []string{"groupName", "template"},
		"properties": map[string]any{
			"groupName":      map[string]any{"type": "string"},
			"replicas":       map[string]any{"type": "integer", "format": "int32"},
			"minReplicas":    map[string]any{"type": "integer", "format": "int32"},
			"maxReplicas":    map[string]any{"type": "integer", "format": "int32"},
			"rayStartParams": map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "string"}},
			"template":       map[string]any{"type": "object", "description": "A Kubernetes PodTemplateSpec."},
		},
		"additionalProperties": true,
	})
}

// JSONSchema implements jsonschema.Exposer.
func (gridweaveObjectDoc) JSONSchema() (jsonschema.Schema, error) {
	return schemaOf(map[string]any{
		"type":                 "object",
		"title":                "GridweaveObject",
		"description":          "A Kubernetes object of gridweave.dev/v1alpha1 (GridweaveJob or GridweaveEndpoint): apiVersion, kind, metadata, spec, status. Schema: gridweave/crd/bases.",
		"additionalProperties": true,
	})
}

// JSONSchema implements jsonschema.Exposer.
func (binaryDoc) JSONSchema() (jsonschema.Schema, error) {
	return schemaOf(map[string]any{"type": "string", "contentMediaType": "application/octet-stream"})
}

// JSONSchema implements jsonschema.Exposer.
func (anyObjectDoc) JSONSchema() (jsonschema.Schema, error) {
	return schemaOf(map[string]any{"type": "object"})
}

// gridweaveList answers the CRD proxy's lists.
type gridweaveList struct {
	Items []gridweaveObjectDoc `json:"items"`
}

// errorResponses name and describe the error answers, by status.
var errorResponses = map[int]struct{ name, desc string }{
	http.StatusBadRequest:            {"BadRequest", "A malformed body or value (`field` names it)."},
	http.StatusUnauthorized:          {"Unauthorized", "Missing or invalid credentials (`WWW-Authenticate` is set); a join key or node token in the body that is not valid."},
	http.StatusForbidden:             {"Forbidden", "A valid credential of another role; an internal route that is off on this listener."},
	http.StatusNotFound:              {"NotFound", "Nothing of that name."},
	http.StatusMethodNotAllowed:      {"MethodNotAllowed", "The path serves other methods (`Allow` lists them)."},
	http.StatusConflict:              {"Conflict", "The request conflicts with the current state (`conflict`: the object kept changing; retry)."},
	http.StatusRequestEntityTooLarge: {"PayloadTooLarge", "The body is larger than the server's limit (a bundle: its limit for bundles)."},
	http.StatusUnsupportedMediaType:  {"UnsupportedMediaType", "The body is not of the route's type (Content-Type: application/json for a JSON body)."},
	http.StatusUnprocessableEntity:   {"Unprocessable", "Well-formed but refused by KubeRay's or Kubernetes' validation (`field` names the first field at fault)."},
	http.StatusUpgradeRequired:       {"UpgradeRequired", "The agent's major version differs from the server's; `server_version`, `min_version`, `worker_version` and an `Upgrade` header say which. Run the join command again on the node: it fetches the master's agent and keeps the node's identity."},
	http.StatusTooManyRequests:       {"TooManyRequests", "More requests a minute from this address than the server admits (`Retry-After` says when to retry)."},
	http.StatusBadGateway:            {"BadGateway", "A system behind this service refused or failed."},
	http.StatusServiceUnavailable:    {"Unavailable", "The route needs a backend this server runs without, or Kubernetes is overloaded."},
	http.StatusGatewayTimeout:        {"Timeout", "The operation did not finish in time."},
	http.StatusInternalServerError:   {"InternalError", "A failure of the service's own; the message hides the cause, the server log has it under the request id."},
}

// securitySchemes name the bearer credential of each auth rule the
// middleware or the fleet checks as a bearer.
var securitySchemes = map[authRule]struct{ scheme, desc string }{
	authAdmin:     {"adminBearer", "The admin token, or a JWT (HS256, the server's JWT secret) with `sub`, `role: admin` and `exp`."},
	authProvider:  {"providerBearer", "A provider join key (the JWT minted by POST /v1/nodes/join-keys with kind `provider`)."},
	authNodeToken: {"nodeBearer", "The node's `node_token` (answered by POST /v1/nodes/validate)."},
	authUser:      {"userBearer", "A JWT (HS256, the server's JWT secret) with `sub`, `role: user` (or `admin`) and `exp`: a user sees only their own KubeTorch jobs."},
	authInternal:  {"internalBearer", "The internal token, on this (public) listener; the internal listener serves these routes without credentials. With neither set they are off (403)."},
}
