package gridweave

import (
	"bytes"
	"embed"
	"encoding"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/api/clusterapi"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/rayctl"
)

// The API's own documentation: GET /openapi.json is an OpenAPI 3.1
// document built from the route table (paths, methods, who may call) and
// from the Go request and response types (their json field names), with
// the words of the operations table below; GET /docs is Swagger UI
// (vendored in webdocs/, embedded) pointed at it. Both are open without
// credentials. A test holds the document and the route table to each
// other in both directions.

// webdocsFS holds the docs page: Swagger UI (see webdocs/README.md) and
// our own index.html and start-up script.
//
//go:embed webdocs/index.html webdocs/gridweave-docs.js webdocs/swagger-ui-bundle.js webdocs/swagger-ui.css
//go:embed webdocs/LICENSE webdocs/NOTICE webdocs/swagger-ui-bundle.js.LICENSE.txt
var webdocsFS embed.FS

// handleOpenAPI answers the OpenAPI document.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	doc, problems := s.openAPI()
	if len(problems) > 0 {
		s.logFor(r).Warn("the OpenAPI document is incomplete", "problems", problems)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		s.writeError(w, r, fmt.Errorf("encode the OpenAPI document: %w", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(buf.Bytes())
}

// docsPolicy keeps the docs page to this origin: scripts, styles, images
// and the requests a person tries out all go to this service only.
const docsPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// handleDocs answers the interactive API page.
func (s *Server) handleDocs(w http.ResponseWriter, r *http.Request) {
	s.serveDocsFile(w, r, "index.html")
}

// handleDocsAsset answers one of the page's files (the renderer, its
// stylesheet, its licence).
func (s *Server) handleDocsAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if name == "index.html" || !fs.ValidPath(name) || strings.Contains(name, "/") {
		s.writeError(w, r, &apiError{status: http.StatusNotFound, code: "no_such_route", message: "no route " + r.Method + " " + r.URL.Path})
		return
	}
	s.serveDocsFile(w, r, name)
}

func (s *Server) serveDocsFile(w http.ResponseWriter, r *http.Request, name string) {
	data, err := fs.ReadFile(webdocsFS, path.Join("webdocs", name))
	if err != nil {
		s.writeError(w, r, &apiError{status: http.StatusNotFound, code: "no_such_route", message: "no route " + r.Method + " " + r.URL.Path})
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", docsPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	switch path.Ext(name) {
	case ".html":
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-cache")
	case ".js":
		h.Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		h.Set("Content-Type", "text/css; charset=utf-8")
	default:
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	// The files are part of the binary: the build is their version.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}

// ---- the operations

// operation is what the route table does not say about a route: its
// words, its body and answer types, and the errors it can answer beyond
// those its auth rule, its body and the rate limit imply.
type operation struct {
	id          string
	tag         string
	summary     string
	description string
	query       []param
	// request is the body's Go type (a zero value), or nil for no body.
	// requestSchema, when set, is used instead of reflecting request.
	request       any
	requestSchema map[string]any
	// optionalBody marks a body that may be left out.
	optionalBody bool
	status       int
	// response is the 2xx body's Go type (a zero value); responseSchema,
	// when set, is used instead. responseType defaults to application/json.
	response       any
	responseSchema map[string]any
	responseType   string
	// errors are the statuses this route answers besides 401/403 (auth),
	// 400/413/415 (a body), 400 (path parameters) and 429.
	errors []int
	// extra are other documented answers (not in the error shape).
	extra map[string]any
}

type param struct {
	name, description string
	schema            map[string]any
}

var (
	stringSchema = map[string]any{"type": "string"}
	boolSchema   = map[string]any{"type": "boolean"}
)

// operations describes every route of routeTable, by pattern.
func operations() map[string]operation {
	rayCluster := map[string]any{"$ref": "#/components/schemas/RayCluster"}
	gridweaveObject := map[string]any{"type": "object", "description": "A Kubernetes object of gridweave.dev/v1alpha1 (GridweaveJob or GridweaveEndpoint): apiVersion, kind, metadata, spec, status. Schema: gridweave/crd/bases."}
	gridweaveList := map[string]any{"type": "object", "properties": map[string]any{"items": map[string]any{"type": "array", "items": gridweaveObject}}, "required": []string{"items"}}
	deletedSchema := map[string]any{"type": "object", "properties": map[string]any{"deleted": stringSchema}, "required": []string{"deleted"}}
	return map[string]operation{
		"GET /healthz": {id: "healthz", tag: "service", summary: "Liveness",
			description: "Answers while the process serves; not rate limited.",
			status:      200, response: api.Health{}},
		"GET /readyz": {id: "readyz", tag: "service", summary: "Readiness: the ledger, WireGuard and Kubernetes answer",
			status: 200, response: api.Readiness{},
			extra: map[string]any{"503": map[string]any{
				"description": "A backend does not answer; `error` says which.",
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
					"type": "object", "required": []string{"status", "error"},
					"properties": map[string]any{"status": map[string]any{"const": "unavailable"}, "error": stringSchema},
				}}},
			}}},
		"GET /metrics": {id: "metrics", tag: "service", summary: "Prometheus metrics",
			description: "The Prometheus text exposition. Needs the admin credential on the public listener; open on the internal one.",
			status:      200, responseType: "text/plain", responseSchema: stringSchema},
		"GET /openapi.json": {id: "openapi", tag: "docs", summary: "This OpenAPI 3.1 document",
			status: 200, responseSchema: map[string]any{"type": "object"}},
		"GET /docs": {id: "docs", tag: "docs", summary: "The interactive API page (Swagger UI)",
			status: 200, responseType: "text/html", responseSchema: stringSchema},
		"GET /docs/{file}": {id: "docsAsset", tag: "docs", summary: "A file of the API page (renderer, stylesheet, licence)",
			status: 200, responseType: "text/plain", responseSchema: stringSchema, errors: []int{404}},

		"GET /join-node.sh": {id: "joinScript", tag: "nodes", summary: "The script the join command runs on a node",
			description: "Downloads the join agent for the node's OS and architecture, checks its SHA-256 against /v1/nodes/agent/{os}/{arch}/sha256, and runs it with the join key.",
			status:      200, responseType: "text/x-shellscript", responseSchema: stringSchema},
		"GET /v1/nodes/agent/{os}/{arch}": {id: "joinAgent", tag: "nodes", summary: "The join agent binary for an OS and architecture",
			description: "From AGENT_DIR (join-node-<os>-<arch>); the X-Checksum-Sha256 header announces its SHA-256.",
			status:      200, responseType: "application/octet-stream", responseSchema: map[string]any{"type": "string", "contentEncoding": "binary"}, errors: []int{404}},
		"GET /v1/nodes/agent/{os}/{arch}/sha256": {id: "joinAgentSum", tag: "nodes", summary: "The SHA-256 of the join agent binary, in hex",
			status: 200, responseType: "text/plain", responseSchema: stringSchema, errors: []int{404}},

		"GET /v1/nodes/worker-image": {id: "workerImage", tag: "nodes", summary: "The GPU worker image as a tarball to import",
			description: "WORKER_IMAGE_TAR, the image RAY_IMAGE_WORKER names (X-Image-Name); X-Checksum-Sha256 announces its SHA-256.",
			status:      200, responseType: "application/x-tar", responseSchema: map[string]any{"type": "string", "contentEncoding": "binary"}, errors: []int{404}},
		"GET /v1/nodes/worker-image/sha256": {id: "workerImageSum", tag: "nodes", summary: "The SHA-256 of the worker image tarball, in hex",
			status: 200, responseType: "text/plain", responseSchema: stringSchema, errors: []int{404}},

		"POST /v1/nodes/join-keys": {id: "mintJoinKey", tag: "nodes", summary: "Mint a join key",
			description: "Returns the key once (it is stored hashed) with the command a person pastes on the node. A provider key is a JWT that also authenticates the provider (verify-provider).",
			request:     api.MintKeyRequest{}, status: 201, response: api.MintKeyResponse{}},
		"GET /v1/nodes/join-keys": {id: "listJoinKeys", tag: "nodes", summary: "List join keys (never their secrets)",
			status: 200, response: api.KeyList{}},
		"DELETE /v1/nodes/join-keys/{id}": {id: "revokeJoinKey", tag: "nodes", summary: "Revoke a join key",
			description: "Nodes that joined with it stay; it admits no new node.",
			status:      200, response: api.Key{}, errors: []int{404}},
		"POST /v1/nodes/validate": {id: "validateNode", tag: "nodes", summary: "Join step 1: check the key, reserve the VPN address, add the WireGuard peer",
			description: "The first join presents `key`; a re-join of the same public key presents `node_token` (the key alone is then 409 `node_token_required`). " +
				"A hostname held by another public key is 409 `hostname_taken`. A different major version is 426 `version_mismatch` (run update.sh on the node).",
			request: api.ValidateRequest{}, status: 200, response: api.ValidateResponse{}, errors: []int{409, 426}},
		"POST /v1/nodes/register": {id: "registerNode", tag: "nodes", summary: "Join step 2: finalise the peer; a GPU node joins its worker group",
			description: "`key` completes a reservation made by validate (same public key); every later register presents `node_token`. " +
				"The pod CIDR comes from Kubernetes, never from the node. `worker_group` is null for a CPU-only node.",
			request: api.RegisterRequest{}, status: 200, response: api.RegisterResponse{}, errors: []int{409, 422, 426}},
		"POST /v1/nodes/disconnect": {id: "disconnectNode", tag: "nodes", summary: "Remove a node: peer, routes, scrape target, worker, Kubernetes Node, ledger",
			description: "Idempotent: `released` is false when there was nothing left to remove.",
			request:     api.HostnameRequest{}, status: 200, response: api.DisconnectResponse{}, errors: []int{409}},
		"POST /v1/nodes/leave": {id: "leaveNode", tag: "nodes", summary: "A node leaves by itself (its node token as bearer)",
			request: api.HostnameRequest{}, status: 200, response: api.DisconnectResponse{}, errors: []int{409}},
		"POST /v1/nodes/verify-provider": {id: "verifyProvider", tag: "nodes", summary: "Check a provider key (the key as bearer)",
			request: api.EmptyRequest{}, optionalBody: true, status: 200, response: api.VerifyProviderResponse{}},
		"POST /v1/nodes/report-version": {id: "reportVersion", tag: "nodes", summary: "A node reports its worker version (its node token as bearer)",
			description: "Recorded in the ledger and as the annotation `" + fleet.VersionAnnotation + "` on the Kubernetes Node.",
			request:     api.ReportVersionRequest{}, status: 200, response: api.NodeEnvelope{}, errors: []int{404, 409}},
		"GET /v1/nodes": {id: "listNodes", tag: "nodes", summary: "List nodes",
			status: 200, response: api.NodeList{}},
		"GET /v1/nodes/{hostname}": {id: "getNode", tag: "nodes", summary: "Get a node",
			status: 200, response: api.NodeEnvelope{}, errors: []int{404}},

		"POST /v1/kuberay/clusters": {id: "createCluster", tag: "clusters", summary: "Create a RayCluster",
			description: "The body is either a typed spec (`name`, `head`, `worker_groups`, …) or a whole `ray.io/v1` RayCluster object (it has `kind`). " +
				"The cluster goes into the service's namespace.",
			requestSchema: map[string]any{"oneOf": []any{
				map[string]any{"$ref": "#/components/schemas/ClusterSpec"}, rayCluster,
			}},
			request: rayctl.ClusterSpec{}, status: 201, responseSchema: rayCluster, errors: []int{409, 422}},
		"GET /v1/kuberay/clusters": {id: "listClusters", tag: "clusters", summary: "List RayClusters",
			query:  []param{{"label_selector", "A Kubernetes label selector, e.g. `team=ml`.", stringSchema}},
			status: 200, response: api.ClusterList{}},
		"GET /v1/kuberay/clusters/{name}": {id: "getCluster", tag: "clusters", summary: "Get a RayCluster",
			status: 200, responseSchema: rayCluster, errors: []int{404}},
		"DELETE /v1/kuberay/clusters/{name}": {id: "deleteCluster", tag: "clusters", summary: "Delete a RayCluster",
			status: 200, response: api.ClusterDeleted{}, errors: []int{404}},
		"PATCH /v1/kuberay/clusters/{name}/scale": {id: "scaleWorkerGroup", tag: "clusters", summary: "Scale a worker group (replicas, min, max in one update)",
			request: clusterapi.ScaleRequest{}, status: 200, responseSchema: rayCluster, errors: []int{404, 409, 422}},
		"POST /v1/kuberay/clusters/{name}/worker-groups": {id: "addWorkerGroup", tag: "clusters", summary: "Add a worker group (typed)",
			request: rayctl.WorkerGroup{}, status: 201, responseSchema: rayCluster, errors: []int{404, 409, 422}},
		"POST /v1/kuberay/clusters/{name}/worker-groups-raw": {id: "addWorkerGroupRaw", tag: "clusters", summary: "Add a worker group (a KubeRay WorkerGroupSpec as it is)",
			request: rayv1.WorkerGroupSpec{}, status: 201, responseSchema: rayCluster, errors: []int{404, 409, 422}},
		"GET /v1/kuberay/clusters/{name}/workers": {id: "listWorkers", tag: "clusters", summary: "List worker pods",
			query:  []param{{"group", "Only this worker group's pods.", stringSchema}},
			status: 200, response: clusterapi.WorkerList{}, errors: []int{404}},
		"GET /v1/kuberay/clusters/{name}/worker-groups": {id: "listWorkerGroups", tag: "clusters", summary: "List worker groups with their pod counts",
			status: 200, response: clusterapi.GroupList{}, errors: []int{404}},
		"GET /v1/kuberay/clusters/{name}/worker-groups/{group}/logs": {id: "workerGroupLogs", tag: "clusters", summary: "Stream a worker group's logs",
			description: "Plain text, each line prefixed with its pod.",
			query: []param{
				{"tail", "Only the last N lines of each pod.", map[string]any{"type": "integer", "minimum": 0}},
				{"since", "Only lines newer than this Go duration, e.g. `10m`.", stringSchema},
				{"follow", "Keep streaming.", boolSchema},
			},
			status: 200, responseType: "text/plain", responseSchema: stringSchema, errors: []int{404}},
		"DELETE /v1/kuberay/clusters/{name}/worker-groups/{group}": {id: "removeWorkerGroup", tag: "clusters", summary: "Remove a worker group (drains first)",
			description: "Scales the group to 0, waits for its pods to go, then removes it; with `immediate=true` removes it and deletes its pods at once.",
			query:       []param{{"immediate", "Do not drain first.", boolSchema}},
			status:      200, responseSchema: rayCluster, errors: []int{404, 409, 504}},
		"DELETE /v1/kuberay/clusters/{name}/worker-groups/{group}/pods": {id: "deleteWorkerGroupPods", tag: "clusters", summary: "Delete a worker group's pods (KubeRay recreates them)",
			status: 200, response: api.PodsDeleted{}, errors: []int{404}},
		"POST /v1/kuberay/clusters/{name}/swap-worker-groups": {id: "swapWorkerGroup", tag: "clusters", summary: "Replace one worker group by another in one update",
			request: clusterapi.SwapRequest{}, status: 200, responseSchema: rayCluster, errors: []int{404, 409, 422}},
		"POST /v1/crd/jobs": {id: "createJob", tag: "crd", summary: "Create a GridweaveJob",
			description:   "A GridweaveJob object (apiVersion and kind may be left out); the API server validates it against the CRD.",
			requestSchema: gridweaveObject, status: 201, responseSchema: gridweaveObject, errors: []int{409, 422, 503}},
		"GET /v1/crd/jobs": {id: "listJobs", tag: "crd", summary: "List GridweaveJobs",
			query:  []param{{"label_selector", "A Kubernetes label selector.", stringSchema}, {"owner", "Only the jobs of this owner (spec.owner).", stringSchema}},
			status: 200, responseSchema: gridweaveList, errors: []int{503}},
		"GET /v1/crd/jobs/{name}": {id: "getJob", tag: "crd", summary: "Read a GridweaveJob",
			status: 200, responseSchema: gridweaveObject, errors: []int{404, 503}},
		"PATCH /v1/crd/jobs/{name}": {id: "patchJob", tag: "crd", summary: "Merge-patch a GridweaveJob",
			description:   "A JSON merge patch. With metadata.resourceVersion in it the write is conditional: 409 when the object changed since.",
			requestSchema: map[string]any{"type": "object"}, status: 200, responseSchema: gridweaveObject, errors: []int{404, 409, 422, 503}},
		"PATCH /v1/crd/jobs/{name}/status": {id: "patchJobStatus", tag: "crd", summary: "Merge-patch a GridweaveJob's status",
			requestSchema: map[string]any{"type": "object"}, status: 200, responseSchema: gridweaveObject, errors: []int{404, 409, 422, 503}},
		"DELETE /v1/crd/jobs/{name}": {id: "deleteJob", tag: "crd", summary: "Delete a GridweaveJob",
			status: 200, responseSchema: deletedSchema, errors: []int{404, 503}},
		"POST /v1/crd/endpoints": {id: "createEndpoint", tag: "crd", summary: "Create a GridweaveEndpoint",
			requestSchema: gridweaveObject, status: 201, responseSchema: gridweaveObject, errors: []int{409, 422, 503}},
		"GET /v1/crd/endpoints": {id: "listEndpoints", tag: "crd", summary: "List GridweaveEndpoints",
			query:  []param{{"label_selector", "A Kubernetes label selector.", stringSchema}, {"owner", "Only the endpoints of this owner (spec.owner).", stringSchema}},
			status: 200, responseSchema: gridweaveList, errors: []int{503}},
		"GET /v1/crd/endpoints/by-name/{name}": {id: "getEndpointByName", tag: "crd", summary: "Read the GridweaveEndpoint whose spec.name is {name}",
			status: 200, responseSchema: gridweaveObject, errors: []int{404, 503}},
		"GET /v1/crd/endpoints/{name}": {id: "getEndpoint", tag: "crd", summary: "Read a GridweaveEndpoint",
			status: 200, responseSchema: gridweaveObject, errors: []int{404, 503}},
		"PATCH /v1/crd/endpoints/{name}": {id: "patchEndpoint", tag: "crd", summary: "Merge-patch a GridweaveEndpoint (a new spec.hardware moves its workers)",
			description:   "A JSON merge patch. A change of spec.hardware swaps the endpoint's worker group on its RayCluster for one on the new hardware in one update (head and other groups untouched) before answering, and records the new group in the status.",
			requestSchema: map[string]any{"type": "object"}, status: 200, responseSchema: gridweaveObject, errors: []int{404, 409, 422, 502, 503}},
		"PATCH /v1/crd/endpoints/{name}/status": {id: "patchEndpointStatus", tag: "crd", summary: "Merge-patch a GridweaveEndpoint's status",
			requestSchema: map[string]any{"type": "object"}, status: 200, responseSchema: gridweaveObject, errors: []int{404, 409, 422, 503}},
		"DELETE /v1/crd/endpoints/{name}": {id: "deleteEndpoint", tag: "crd", summary: "Delete a GridweaveEndpoint",
			status: 200, responseSchema: deletedSchema, errors: []int{404, 503}},
		"GET /v1/ray/serve/statuses": {id: "serveStatuses", tag: "ray", summary: "Ray Serve applications and their deployments' statuses",
			status: 200, response: api.ServeStatuses{}, errors: []int{502, 503, 504}},
		"DELETE /v1/ray/serve/applications/{app}": {id: "deleteServeApplication", tag: "ray", summary: "Remove one Serve application, keeping the others",
			description: "Ray has no per-application DELETE: the declarative config is read and PUT back without this application. Refused (409) when Serve runs applications deployed imperatively, which the PUT would remove.",
			status:      200, responseSchema: deletedSchema, errors: []int{404, 409, 502, 503, 504}},
		"POST /v1/kubetorch/sync": {id: "syncBundle", tag: "kubetorch", summary: "Upload a code bundle (tar.gz or zip)",
			description: "The body is the archive (`Content-Type: application/gzip` for a tar.gz, `application/zip`), or the multipart field `bundle`. " +
				"Every entry is checked: nothing escaping the root (`..`, absolute paths, links pointing out), no device files, no duplicate paths, " +
				"at most 10,000 entries and 512 MiB expanded, at most 100:1 compression; a refused entry is a 400 naming it. " +
				"Stored content-addressed (the same bytes are one bundle); `url` serves it, without credentials, as the zip Ray's working_dir takes.",
			status: 201, response: api.BundleSynced{}, errors: []int{400, 413, 415}},
		"GET /v1/kubetorch/bundles/{file}": {id: "getBundle", tag: "kubetorch", summary: "A bundle's zip, at its unguessable URL (<sha256>.zip)",
			status: 200, responseType: "application/zip", responseSchema: map[string]any{"type": "string", "format": "binary"}, errors: []int{404}},
		"POST /v1/kubetorch/train": {id: "train", tag: "kubetorch", summary: "Launch distributed training on a cluster's GPU workers",
			description: "A Ray job through the dashboard Jobs API: the bundle as runtime_env.working_dir, the command run on every GPU (Ray Train's torch backend sets MASTER_ADDR, RANK, WORLD_SIZE, LOCAL_RANK as torchrun does), nodes and GPUs per node from the cluster's ready GPU workers unless given. Recorded as a GridweaveJob owned by `owner` (default the caller's sub).",
			request:     api.TrainRequest{}, status: 201, response: api.TrainResponse{}, errors: []int{404, 409, 502, 503, 504}},
		"GET /v1/kubetorch/health": {id: "kubetorchHealth", tag: "kubetorch", summary: "The dashboard reachable, a cluster's GPU workers ready, per group",
			query: []param{{"cluster", "The RayCluster.", stringSchema}}, status: 200, response: api.KubeTorchHealth{}, errors: []int{404}},
		"GET /v1/kubetorch/jobs/{id}": {id: "kubetorchJob", tag: "kubetorch", summary: "A KubeTorch job's status and last log lines (a user sees only their own)",
			status: 200, response: api.KubeTorchJob{}, errors: []int{404, 502, 503, 504}},
		"POST /v1/kuberay/clusters/{name}/replace-worker-groups": {id: "replaceWorkerGroups", tag: "clusters", summary: "Replace all worker groups in one update",
			request: clusterapi.ReplaceRequest{}, status: 200, responseSchema: rayCluster, errors: []int{404, 409, 422}},
	}
}

// pathParams describes the {params} of the paths.
var pathParams = map[string]string{
	"id":       "The join key's id, or the KubeTorch job's.",
	"hostname": "The node's hostname.",
	"name":     "The object's name: a RayCluster, a GridweaveJob or a GridweaveEndpoint (a DNS-1123 name); under by-name, the endpoint's spec.name.",
	"app":      "The Ray Serve application's name.",
	"group":    "The worker group's name.",
	"file":     "The file's name.",
	"os":       "The node's operating system as Go names it (linux).",
	"arch":     "The node's architecture as Go names it (amd64, arm64).",
}

// fieldNote documents one JSON field of a type.
type fieldNote struct {
	desc     string
	enum     []any
	example  any
	format   string
	required bool // in a request body
}

// fieldNotes are the words for the fields; the names come from the types'
// json tags (a test checks that every note names a field).
var fieldNotes = map[reflect.Type]map[string]fieldNote{
	reflect.TypeFor[api.MintKeyRequest](): {
		"kind":        {desc: "`org`: a random token; `provider`: a JWT that also authenticates the provider.", enum: []any{"org", "provider"}, required: true},
		"org":         {desc: "The organisation the key's nodes belong to.", example: "acme", required: true},
		"ttl_seconds": {desc: "The key's lifetime in seconds (positive).", example: 3600, required: true},
		"provider":    {desc: "A provider key's JWT subject; defaults to `org`."},
		"max_uses":    {desc: "How many nodes may join with the key; 0 means no limit."},
		"labels":      {desc: "Free-form labels kept with the key."},
	},
	reflect.TypeFor[api.MintKeyResponse](): {
		"key":          {desc: "The secret, shown only here."},
		"provider":     {desc: "The provider (JWT subject) of a provider key; null for an org key."},
		"join_command": {desc: "What a person pastes on the node."},
	},
	reflect.TypeFor[api.Key](): {
		"created_by": {desc: "The subject of the admin credential that minted it."},
		"max_uses":   {desc: "0 means no limit."},
	},
	reflect.TypeFor[api.ValidateRequest](): {
		"key":        {desc: "The join key (first join). Required unless `node_token` is given."},
		"hostname":   {desc: "The node's hostname (a DNS-1123 label, not a route name under /v1/nodes/).", example: "gpu-node-1", required: true},
		"public_key": {desc: "The node's WireGuard public key (base64, 32 bytes).", example: "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=", required: true},
		"version":    {desc: "The worker's semantic version; a different major version than the server's is refused (426).", example: "1.4.2", required: true},
		"node_token": {desc: "The node token from the first validate (a re-join)."},
	},
	reflect.TypeFor[api.ValidateResponse](): {
		"vpn_ip":            {desc: "The node's WireGuard address."},
		"master_endpoint":   {desc: "host:port of the master's WireGuard listener; empty when MASTER_IP is not set."},
		"k3s_url":           {desc: "Where the k3s agent joins; empty when the k3s step is off."},
		"k3s_token":         {desc: "The k3s agent token (never the server token); empty when the k3s step is off."},
		"node_token":        {desc: "The node's own credential: keep it for register, report-version, leave and re-joins."},
		"master_public_key": {desc: "The master's WireGuard public key."},
	},
	reflect.TypeFor[api.RegisterRequest](): {
		"key":        {desc: "The join key, to complete the reservation validate made (first join only)."},
		"node_token": {desc: "The node token from validate. Required unless completing a first join with `key`."},
		"hostname":   {desc: "The node's hostname.", example: "gpu-node-1", required: true},
		"public_key": {desc: "The node's WireGuard public key (with `key`)."},
		"version":    {desc: "The worker's semantic version.", example: "1.4.2", required: true},
		"gpus":       {desc: "The node's GPUs, all of one vendor; empty for a CPU-only node."},
	},
	reflect.TypeFor[api.GPU](): {
		"vendor":     {desc: "Left out, `nvidia` (agents that predate AMD support send none).", enum: []any{"nvidia", "amd"}},
		"index":      {example: 0},
		"name":       {example: "NVIDIA A100-SXM4-80GB"},
		"memory_mib": {example: 81920},
	},
	reflect.TypeFor[api.RegisterResponse](): {
		"worker_group": {desc: "The worker group the node serves in; null for a CPU-only node."},
	},
	reflect.TypeFor[api.HostnameRequest](): {
		"hostname": {desc: "The node's hostname.", example: "gpu-node-1", required: true},
	},
	reflect.TypeFor[api.DisconnectResponse](): {
		"released": {desc: "False when there was nothing left to remove."},
	},
	reflect.TypeFor[api.ReportVersionRequest](): {
		"hostname": {desc: "The node's hostname.", example: "gpu-node-1", required: true},
		"version":  {desc: "The worker's semantic version.", example: "1.4.2", required: true},
	},
	reflect.TypeFor[api.Node](): {
		"status":   {desc: "`validated` after validate, `registered` after register, `disconnected` while it is being removed."},
		"pod_cidr": {desc: "The pod CIDR Kubernetes gave the node; null until it has one."},
	},
	reflect.TypeFor[clusterapi.ScaleRequest](): {
		"group":        {desc: "The worker group to scale.", required: true},
		"replicas":     {desc: "Give at least one of replicas, min_replicas, max_replicas; min ≤ replicas ≤ max after the change."},
		"min_replicas": {},
		"max_replicas": {},
	},
	reflect.TypeFor[clusterapi.SwapRequest](): {
		"old_group": {desc: "The group to replace.", required: true},
		"new_group": {desc: "The group that takes its place.", required: true},
	},
	reflect.TypeFor[clusterapi.ReplaceRequest](): {
		"worker_groups": {desc: "The cluster's new worker groups.", required: true},
	},
	reflect.TypeFor[rayctl.ClusterSpec](): {
		"name":      {desc: "The RayCluster's name.", example: "demo", required: true},
		"namespace": {desc: "Must be the service's namespace if given."},
		"image":     {desc: "The Ray image; default RAY_IMAGE."},
		"head":      {required: true},
	},
	reflect.TypeFor[rayctl.WorkerGroup](): {
		"name":          {desc: "The group's name.", example: "cpu", required: true},
		"replicas":      {desc: "Default 1."},
		"min_replicas":  {desc: "Default 0."},
		"max_replicas":  {desc: "Default max(replicas, 1)."},
		"node_hostname": {desc: "Pins the group's pods to one node."},
		"gpu_resource":  {desc: "The extended resource name; default nvidia.com/gpu."},
	},
}

// errorResponses describe the error answers, by status.
var errorResponses = map[int]struct{ name, desc string }{
	400: {"BadRequest", "A malformed body or value: `invalid_json`, `invalid_body`, `invalid_field` (with `field` naming it)."},
	401: {"Unauthorized", "Missing or invalid credentials (`WWW-Authenticate` is set): `unauthenticated`, or for a join key or node token in the body " +
		"`invalid_join_key`, `join_key_expired`, `join_key_revoked`, `join_key_exhausted`, `join_key_not_yet_valid`, `invalid_node_token` (with `field`)."},
	403: {"Forbidden", "A valid credential of another role: `forbidden`; an internal route that is off on this listener: `internal_route`."},
	404: {"NotFound", "`node_not_found`, `join_key_not_found`, `not_found`, `no_such_route`."},
	409: {"Conflict", "The request conflicts with the current state: `hostname_taken`, `node_token_required`, `public_key_taken`, `pod_cidr_conflict`, " +
		"`allowed_ip_conflict`, `vpn_pool_exhausted`, `worker_group_exists`, `already_exists`, `conflict` (the object kept changing; retry)."},
	413: {"PayloadTooLarge", "The body is larger than MAX_BODY_BYTES: `body_too_large`."},
	415: {"UnsupportedMediaType", "The body is not application/json: `unsupported_media_type`."},
	422: {"Unprocessable", "Well-formed but refused by KubeRay's or Kubernetes' validation: `invalid_spec` (with `field`), `rejected_by_kubernetes`, `invalid_object` (with `field`, the API server's path)."},
	426: {"UpgradeRequired", "The worker's major version differs from the server's: `version_mismatch`, with `server_version`, `min_version`, " +
		"`worker_version` and an `Upgrade` header; run update.sh on the node."},
	429: {"TooManyRequests", "More than RATE_LIMIT_PER_MINUTE requests a minute from this address: `rate_limited`, with `Retry-After`."},
	502: {"BadGateway", "A system behind this service refused or failed: `kubernetes_denied`, `ray_dashboard_error`, `ray_dashboard_unreachable`."},
	503: {"Unavailable", "The route needs a backend this server runs without: `no_kubernetes`, `no_ray_dashboard`."},
	504: {"Timeout", "The operation did not finish in time: `timeout`, `ray_dashboard_timeout`."},
}

// securitySchemes name the bearer credential each auth rule takes.
var securitySchemes = map[string]struct{ scheme, desc string }{
	"admin":      {"adminBearer", "ADMIN_TOKEN, or a JWT (HS256, JWT_SECRET) with `sub`, `role: admin` and `exp`."},
	"provider":   {"providerBearer", "A provider join key (the JWT minted by POST /v1/nodes/join-keys with kind `provider`)."},
	"node token": {"nodeBearer", "The node's `node_token` (answered by POST /v1/nodes/validate)."},
	"user":       {"userBearer", "A JWT (HS256, JWT_SECRET) with `sub`, `role: user` (or `admin`) and `exp`: a user sees only their own KubeTorch jobs."},
	"internal":   {"internalBearer", "INTERNAL_TOKEN, on this (public) listener; the internal listener (INTERNAL_ADDR) serves these routes without credentials. With neither set they are off (403)."},
}

// ---- the document

// openAPI builds the document from the route table and operations();
// problems lists what it could not describe (a route without an
// operation, a Go type it cannot map), which the tests hold at zero.
func (s *Server) openAPI() (doc map[string]any, problems []string) {
	g := &schemaGen{components: map[string]any{}, names: map[string]reflect.Type{}, modes: map[reflect.Type]string{}}
	for name, sch := range externalSchemas() {
		g.components[name] = sch
	}
	ops := operations()
	auth := map[string]string{}
	paths := map[string]any{}
	for _, rt := range s.routeTable() {
		auth[rt.pattern] = rt.auth
		if _, ok := ops[rt.pattern]; !ok {
			g.problem("route %q has no operation in operations(): describe it in openapi.go", rt.pattern)
		}
	}
	// The document lists what operations() describes; the test compares
	// that with the route table both ways.
	for pattern, op := range ops {
		method, p, ok := strings.Cut(pattern, " ")
		if !ok {
			g.problem("operation %q is not \"METHOD /path\"", pattern)
			continue
		}
		rule, known := auth[pattern]
		if !known {
			g.problem("operation %q names no route of the route table", pattern)
		}
		item, _ := paths[p].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[p] = item
		}
		item[strings.ToLower(method)] = g.operation(pattern, p, rule, op)
	}
	schemes := map[string]any{}
	for _, sc := range securitySchemes {
		schemes[sc.scheme] = map[string]any{"type": "http", "scheme": "bearer", "description": sc.desc}
	}
	responses := map[string]any{}
	for status, e := range errorResponses {
		responses[e.name] = errorResponse(status, e.desc)
	}
	doc = map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":   "Gridweave control plane",
			"version": s.cfg.ServerVersion,
			"description": "Onboards machines into the GPU cluster (the join flow) and manages its RayClusters.\n\n" +
				"Credentials are bearer tokens (`Authorization: Bearer …`): press **Authorize** and fill in the one a route names. " +
				"`validate` and `register` take the join key or node token in the body instead. " +
				"Every error is `{\"error\": {\"code\", \"message\", \"field\"?, …}}`; every field listed in an answer is always present (null when not set).",
			"license": map[string]any{"name": "Apache-2.0", "identifier": "Apache-2.0"},
		},
		"tags": []any{
			map[string]any{"name": "nodes", "description": "The join flow and the node ledger."},
			map[string]any{"name": "clusters", "description": "RayClusters and their worker groups."},
			map[string]any{"name": "crd", "description": "The gateway's GridweaveJobs and GridweaveEndpoints (internal)."},
			map[string]any{"name": "ray", "description": "Ray Serve through the cluster's dashboard (internal)."},
			map[string]any{"name": "kubetorch", "description": "Code bundles and distributed training on a cluster's GPU workers."},
			map[string]any{"name": "service", "description": "Health, readiness and metrics."},
			map[string]any{"name": "docs", "description": "This document and the page that renders it."},
		},
		"paths": paths,
		"components": map[string]any{
			"schemas":         g.components,
			"securitySchemes": schemes,
			"responses":       responses,
			"headers": map[string]any{
				"X-Request-Id": map[string]any{"description": "The request's id (the caller's X-Request-Id when sane); the server log carries it.", "schema": stringSchema},
			},
		},
	}
	return doc, g.problems
}

func errorResponse(status int, desc string) map[string]any {
	headers := map[string]any{"X-Request-Id": map[string]any{"$ref": "#/components/headers/X-Request-Id"}}
	switch status {
	case 401:
		headers["WWW-Authenticate"] = map[string]any{"description": "`Bearer realm=\"gridweave\"`", "schema": stringSchema}
	case 426:
		headers["Upgrade"] = map[string]any{"description": "`gridweave-worker/<server version>`", "schema": stringSchema}
	case 429:
		headers["Retry-After"] = map[string]any{"description": "Seconds until a request is admitted again.", "schema": map[string]any{"type": "integer"}}
	}
	return map[string]any{
		"description": desc,
		"headers":     headers,
		"content":     map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}},
	}
}

func (g *schemaGen) operation(pattern, p, rule string, op operation) map[string]any {
	out := map[string]any{"operationId": op.id, "summary": op.summary, "tags": []string{op.tag}}
	desc := op.description
	switch rule {
	case "none":
		out["security"] = []any{}
	case "join key":
		out["security"] = []any{}
		desc = strings.TrimSpace(desc + "\n\nCredential: the join key (`key`) or the node token (`node_token`) in the body.")
	default:
		sc, ok := securitySchemes[rule]
		if !ok {
			if rule != "" {
				g.problem("route %q: unknown auth rule %q", pattern, rule)
			}
		} else {
			out["security"] = []any{map[string]any{sc.scheme: []string{}}}
		}
	}
	if desc != "" {
		out["description"] = desc
	}
	errs := slices.Clone(op.errors)
	var params []any
	for _, seg := range strings.Split(p, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			params = append(params, map[string]any{"name": name, "in": "path", "required": true, "description": pathParams[name], "schema": stringSchema})
			if _, ok := pathParams[name]; !ok {
				g.problem("route %q: path parameter %q has no description in pathParams", pattern, name)
			}
			errs = append(errs, 400)
		}
	}
	for _, q := range op.query {
		params = append(params, map[string]any{"name": q.name, "in": "query", "description": q.description, "schema": q.schema})
		errs = append(errs, 400)
	}
	if params != nil {
		out["parameters"] = params
	}
	if op.request != nil || op.requestSchema != nil {
		sch := op.requestSchema
		if op.request != nil {
			s := g.schema(reflect.TypeOf(op.request), modeRequest)
			if sch == nil {
				sch = s
			}
		}
		out["requestBody"] = map[string]any{
			"required": !op.optionalBody,
			"content":  map[string]any{"application/json": map[string]any{"schema": sch}},
		}
		errs = append(errs, 400, 413, 415)
	}
	switch rule {
	case "admin", "provider", "internal", "user":
		errs = append(errs, 401, 403)
	case "join key", "node token":
		errs = append(errs, 401)
	}
	if pattern != "GET /healthz" {
		errs = append(errs, 429)
	}
	responses := map[string]any{}
	ok := map[string]any{
		"description": http.StatusText(op.status),
		"headers":     map[string]any{"X-Request-Id": map[string]any{"$ref": "#/components/headers/X-Request-Id"}},
	}
	sch := op.responseSchema
	if op.response != nil {
		sch = g.schema(reflect.TypeOf(op.response), modeResponse)
	}
	if sch == nil {
		g.problem("operation %q has no response schema", pattern)
	} else {
		ct := op.responseType
		if ct == "" {
			ct = "application/json"
		}
		ok["content"] = map[string]any{ct: map[string]any{"schema": sch}}
	}
	responses[fmt.Sprint(op.status)] = ok
	slices.Sort(errs)
	for _, status := range slices.Compact(errs) {
		e, known := errorResponses[status]
		if !known {
			g.problem("operation %q: no error response for status %d", pattern, status)
			continue
		}
		responses[fmt.Sprint(status)] = map[string]any{"$ref": "#/components/responses/" + e.name}
	}
	for k, v := range op.extra {
		responses[k] = v
	}
	out["responses"] = responses
	return out
}

// ---- schemas from Go types

const (
	modeRequest  = "request"
	modeResponse = "response"
)

// schemaGen turns Go types into JSON Schemas (components.schemas) by
// their json tags, as encoding/json would encode them.
type schemaGen struct {
	components map[string]any
	names      map[string]reflect.Type
	modes      map[reflect.Type]string
	problems   []string
}

func (g *schemaGen) problem(format string, args ...any) {
	g.problems = append(g.problems, fmt.Sprintf(format, args...))
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	rawMessageType    = reflect.TypeFor[json.RawMessage]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// externalTypes are Go types described by hand (KubeRay's objects are
// described by KubeRay's CRDs, too large to repeat here).
var externalTypes = map[reflect.Type]string{
	reflect.TypeFor[rayv1.RayCluster]():      "RayCluster",
	reflect.TypeFor[rayv1.WorkerGroupSpec](): "WorkerGroupSpec",
}

func externalSchemas() map[string]any {
	crd := "https://github.com/ray-project/kuberay/blob/v1.6.0/ray-operator/config/crd/bases/ray.io_rayclusters.yaml"
	return map[string]any{
		"Error": map[string]any{
			"type": "object", "required": []string{"error"},
			"properties": map[string]any{"error": map[string]any{
				"type": "object", "required": []string{"code", "message"},
				"properties": map[string]any{
					"code":    map[string]any{"type": "string", "description": "A snake_case code a program can switch on.", "example": "invalid_field"},
					"message": map[string]any{"type": "string", "description": "A sentence for a person."},
					"field":   map[string]any{"type": "string", "description": "The request field at fault, when there is one.", "example": "hostname"},
				},
				"additionalProperties": true,
				"description":          "Some codes add details, e.g. `version_mismatch` adds `server_version`, `min_version` and `worker_version`.",
			}},
		},
		"RayCluster": map[string]any{
			"type":        "object",
			"description": "A KubeRay `ray.io/v1` RayCluster, as Kubernetes stores it (KubeRay v1.6.0; schema: " + crd + ").",
			"required":    []string{"apiVersion", "kind", "metadata", "spec"},
			"properties": map[string]any{
				"apiVersion": map[string]any{"const": "ray.io/v1"},
				"kind":       map[string]any{"const": "RayCluster"},
				"metadata":   map[string]any{"type": "object", "description": "Kubernetes ObjectMeta (name, namespace, labels, …)."},
				"spec":       map[string]any{"type": "object", "description": "RayClusterSpec: headGroupSpec, workerGroupSpecs, rayVersion, …"},
				"status":     map[string]any{"type": "object", "description": "RayClusterStatus, written by KubeRay."},
			},
			"additionalProperties": true,
		},
		"WorkerGroupSpec": map[string]any{
			"type":        "object",
			"description": "A KubeRay `ray.io/v1` WorkerGroupSpec (an item of RayCluster `spec.workerGroupSpecs`; schema: " + crd + ").",
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
		},
	}
}

// schema returns t's schema: a $ref for a named struct (its component
// added once), else inline.
func (g *schemaGen) schema(t reflect.Type, mode string) map[string]any {
	if name, ok := externalTypes[t]; ok {
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawMessageType:
		return map[string]any{}
	case t.Kind() == reflect.Pointer:
		inner := g.schema(t.Elem(), mode)
		if mode == modeRequest {
			return inner // optional in a request; the decoder leaves it nil
		}
		return nullable(inner)
	case t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType) ||
		t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType):
		g.problem("type %s encodes itself; describe it in externalTypes", t)
		return map[string]any{}
	}
	switch t.Kind() {
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		return map[string]any{"type": "integer", "format": "int64"}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		return map[string]any{"type": "integer", "format": "int32"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": g.schema(t.Elem(), mode)}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			g.problem("map type %s has non-string keys", t)
		}
		return map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem(), mode)}
	case reflect.Struct:
		if t.Name() == "" {
			return g.object(t, mode)
		}
		name := componentName(t)
		if inBothModes[t] && mode == modeRequest {
			name += "Input"
		}
		if prev, ok := g.names[name]; ok && prev != t {
			g.problem("types %s and %s would both be schema %q", prev, t, name)
		}
		if m, ok := g.modes[t]; ok && m != mode && !inBothModes[t] {
			g.problem("type %s is used in a request and in a response; its required fields differ", t)
		}
		if _, done := g.names[name]; !done {
			g.names[name] = t
			g.modes[t] = mode
			g.components[name] = nil // mark before recursing
			g.components[name] = g.object(t, mode)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	g.problem("type %s has no JSON schema", t)
	return map[string]any{}
}

// inBothModes are the types used in requests and in answers: a field
// optional in a request is always present in an answer, so the request's
// form is a component of its own, <Name>Input.
var inBothModes = map[reflect.Type]bool{reflect.TypeFor[api.GPU](): true}

// componentName is t's name with a capital: mintRequest → MintRequest.
func componentName(t reflect.Type) string {
	n := t.Name()
	return strings.ToUpper(n[:1]) + n[1:]
}

func nullable(s map[string]any) map[string]any {
	if typ, ok := s["type"].(string); ok {
		out := make(map[string]any, len(s))
		for k, v := range s {
			out[k] = v
		}
		out["type"] = []string{typ, "null"}
		return out
	}
	return map[string]any{"anyOf": []any{s, map[string]any{"type": "null"}}}
}

// jsonField is a struct field as encoding/json sees it.
type jsonField struct {
	name      string
	omitempty bool
	typ       reflect.Type
}

// jsonFields lists t's fields as encoding/json encodes them, promoting the
// fields of embedded structs without a json name.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omit := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		out = append(out, jsonField{name: name, omitempty: omit, typ: f.Type})
	}
	return out
}

func (g *schemaGen) object(t reflect.Type, mode string) map[string]any {
	notes := fieldNotes[t]
	props := map[string]any{}
	required := []string{}
	for _, f := range jsonFields(t) {
		s := g.schema(f.typ, mode)
		n := notes[f.name]
		if n.desc != "" || n.enum != nil || n.example != nil || n.format != "" {
			if ref, isRef := s["$ref"]; isRef && n.desc != "" {
				// 3.1 allows siblings of $ref; keep the reference intact.
				s = map[string]any{"$ref": ref, "description": n.desc}
			} else {
				s = withNote(s, n)
			}
		}
		props[f.name] = s
		if mode == modeRequest && n.required || mode == modeResponse && !f.omitempty {
			required = append(required, f.name)
		}
	}
	out := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if mode == modeResponse {
		// Answers may grow new fields; requests are decoded strictly.
		delete(out, "additionalProperties")
	}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

func withNote(s map[string]any, n fieldNote) map[string]any {
	out := make(map[string]any, len(s)+3)
	for k, v := range s {
		out[k] = v
	}
	if n.desc != "" {
		out["description"] = n.desc
	}
	if n.enum != nil {
		out["enum"] = n.enum
	}
	if n.example != nil {
		out["examples"] = []any{n.example}
	}
	if n.format != "" {
		out["format"] = n.format
	}
	return out
}
