package gridweave

import (
	"reflect"
	"strconv"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/swaggest/jsonschema-go"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/api/clusterapi"
	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/rayctl"
)

// operation is what the route table does not say about a route.
type operation struct {
	id          string
	tag         string
	summary     string
	description string
	query       []param
	// request is the JSON body's Go type (a zero value), or nil for none.
	request any
	status  int
	// response is the 2xx answer's Go type (a zero value); responseType
	// defaults to application/json.
	response     any
	responseType string
	// alternatives are other answers by status, not in the error shape.
	alternatives map[int]any
	// errors are the statuses this route answers besides those
	// errorStatuses adds for every route of its kind.
	errors []int
}

// param is a query parameter.
type param struct {
	name, description string
	typ               reflect.Type
}

// pageParams are a list's paging parameters.
var pageParams = []param{
	{"limit", "At most this many items (1 to 500; default 500).", intParam},
	{"continue", "The `continue` token of the previous page; none for the first.", stringParam},
}

var (
	stringParam = reflect.TypeFor[string]()
	intParam    = reflect.TypeFor[int]()
	boolParam   = reflect.TypeFor[bool]()
)

// operations describes every route of routeTable, by pattern: the words
// of the document, the Go types of its body and its answer (zero values),
// and the error statuses it answers besides those of its credential, its
// body and parameters, and the rate limit (errorStatuses).
func operations() map[string]operation {
	rayCluster := rayv1.RayCluster{}
	gridweaveObject := gridweaveObjectDoc{}
	deleted := api.Deleted{}
	anyObject := anyObjectDoc{}
	return map[string]operation{
		"GET /healthz": {id: "healthz", tag: "service", summary: "Liveness",
			description: "Answers while the process serves; not rate limited.",
			status:      200, response: api.Health{}},
		"GET /readyz": {id: "readyz", tag: "service", summary: "Readiness: the ledger, WireGuard and Kubernetes answer",
			description: "503 when a backend does not answer: `status` is `unavailable` and `error` says which.",
			status:      200, response: api.Readiness{}, alternatives: map[int]any{503: api.Readiness{}}},
		"GET /metrics": {id: "metrics", tag: "service", summary: "Prometheus metrics",
			description: "The Prometheus text exposition. Needs the admin credential on the public listener; open on the internal one.",
			status:      200, responseType: "text/plain", response: ""},
		"GET /openapi.json": {id: "openapi", tag: "docs", summary: "This OpenAPI 3.1 document",
			status: 200, response: anyObject},
		"GET /docs": {id: "docs", tag: "docs", summary: "The interactive API page (Swagger UI)",
			status: 200, responseType: "text/html", response: ""},
		"GET /docs/{file}": {id: "docsAsset", tag: "docs", summary: "A file of the API page (renderer, stylesheet, licence)",
			status: 200, responseType: "text/plain", response: "", errors: []int{404}},

		"GET /ui/": {id: "console", tag: "docs", summary: "The web console: nodes, keys, clusters and jobs (sign in with the admin token, an admin JWT or a user JWT)",
			description: "With the certificate the server made itself (HTTPS without `TLS_CERT_FILE`), served to loopback callers only (403 `console_loopback_only`) unless `CONSOLE_PUBLIC=on`.",
			status:      200, responseType: "text/html", response: "", errors: []int{403}},
		"GET /ui/{file}": {id: "consoleAsset", tag: "docs", summary: "A file of the web console (script, stylesheet, licence)",
			status: 200, responseType: "text/plain", response: "", errors: []int{403, 404}},

		"GET /join-node.sh": {id: "joinScript", tag: "nodes", summary: "The script the join command runs on a node",
			description: "Downloads the join agent for the node's OS and architecture, checks its SHA-256 against /v1/nodes/agent/{os}/{arch}/sha256, and runs it with the join key.",
			status:      200, responseType: "text/x-shellscript", response: ""},
		"GET /v1/nodes/agent/{os}/{arch}": {id: "joinAgent", tag: "nodes", summary: "The join agent binary for an OS and architecture",
			description: "From AGENT_DIR (join-node-<os>-<arch>); the X-Checksum-Sha256 header announces its SHA-256.",
			status:      200, responseType: "application/octet-stream", response: binaryDoc{}, errors: []int{404}},
		"GET /v1/nodes/agent/{os}/{arch}/sha256": {id: "joinAgentSum", tag: "nodes", summary: "The SHA-256 of the join agent binary, in hex",
			status: 200, responseType: "text/plain", response: "", errors: []int{404}},

		"GET /v1/nodes/agent/{os}/{arch}/k3s": {id: "k3sBinary", tag: "nodes", summary: "The k3s binary the master runs, for a machine without k3s",
			description: "K3S_BINARY, for the master's own OS and architecture only (404 `no_k3s` otherwise, or when there is none); X-Checksum-Sha256 announces its SHA-256.",
			status:      200, responseType: "application/octet-stream", response: binaryDoc{}, errors: []int{404}},
		"GET /v1/nodes/agent/{os}/{arch}/k3s/sha256": {id: "k3sBinarySum", tag: "nodes", summary: "The SHA-256 of the k3s binary, in hex",
			status: 200, responseType: "text/plain", response: "", errors: []int{404}},
		"GET /v1/nodes/agent/{os}/{arch}/kubelet": {id: "kubeletBinary", tag: "nodes", summary: "The kubelet a machine of the kubelet join mode runs",
			description: "KUBELET_BINARY (the control plane's kubelet), for the master's own OS and architecture only (404 `no_kubelet` otherwise, or when there is none); X-Checksum-Sha256 announces its SHA-256. Served through the tunnels once the master has a VPN listener.",
			status:      200, responseType: "application/octet-stream", response: binaryDoc{}, errors: []int{404}},
		"GET /v1/nodes/agent/{os}/{arch}/kubelet/sha256": {id: "kubeletBinarySum", tag: "nodes", summary: "The SHA-256 of the kubelet, in hex",
			status: 200, responseType: "text/plain", response: "", errors: []int{404}},
		"GET /v1/nodes/worker-image": {id: "workerImage", tag: "nodes", summary: "The GPU worker image as a tarball to import",
			description: "WORKER_IMAGE_TAR, the image RAY_IMAGE_WORKER names (X-Image-Name); X-Checksum-Sha256 announces its SHA-256.",
			status:      200, responseType: "application/octet-stream", response: binaryDoc{}, errors: []int{404}},
		"GET /v1/nodes/worker-image/sha256": {id: "workerImageSum", tag: "nodes", summary: "The SHA-256 of the worker image tarball, in hex",
			status: 200, responseType: "text/plain", response: "", errors: []int{404}},

		"POST /v1/nodes/join-keys": {id: "mintJoinKey", tag: "nodes", summary: "Mint a join key",
			description: "Returns the key once (it is stored hashed) with the command a person pastes on the node. A provider key is a JWT that also authenticates the provider (verify-provider).",
			request:     api.MintKeyRequest{}, status: 201, response: api.MintKeyResponse{}},
		"GET /v1/nodes/join-keys": {id: "listJoinKeys", tag: "nodes", summary: "List join keys (never their secrets), a page at a time, oldest first",
			query: pageParams, status: 200, response: api.KeyList{}},
		"DELETE /v1/nodes/join-keys/{id}": {id: "revokeJoinKey", tag: "nodes", summary: "Revoke a join key",
			description: "Nodes that joined with it stay; it admits no new node.",
			status:      200, response: api.Key{}, errors: []int{404}},
		"POST /v1/nodes/validate": {id: "validateNode", tag: "nodes", summary: "Join step 1: check the key, reserve the VPN address, add the WireGuard peer",
			description: "The first join presents `key`; a re-join of the same public key presents `node_token` (the key alone is then 409 `node_token_required`). " +
				"A hostname held by another public key is 409 `hostname_taken`; a first join under the name of a Kubernetes Node no Gridweave join made is 409 `hostname_in_cluster`. A different major version is 426 `version_mismatch` (run the join command again on the node).",
			request: api.ValidateRequest{}, status: 200, response: api.ValidateResponse{}, errors: []int{409, 426}},
		"POST /v1/nodes/register": {id: "registerNode", tag: "nodes", summary: "Join step 2: finalise the peer; a GPU node joins its worker group",
			description: "`key` completes a reservation made by validate (same public key); every later register presents `node_token`. " +
				"The pod CIDR comes from Kubernetes, never from the node. `worker_group` is null for a CPU-only node.",
			request: api.RegisterRequest{}, status: 200, response: api.RegisterResponse{}, errors: []int{409, 422, 426}},
		"POST /v1/nodes/disconnect": {id: "disconnectNode", tag: "nodes", summary: "Remove a node: peer, routes, scrape target, worker, Kubernetes Node, ledger",
			description: "Idempotent: `released` is false when there was nothing left to remove. In the kubelet join mode the Node is drained first (cordoned, its pods evicted, waited for up to KUBELET_DRAIN_TIMEOUT).",
			request:     api.HostnameRequest{}, status: 200, response: api.DisconnectResponse{}, errors: []int{409}},
		"POST /v1/nodes/leave": {id: "leaveNode", tag: "nodes", summary: "A node leaves by itself (its node token as bearer)",
			request: api.HostnameRequest{}, status: 200, response: api.DisconnectResponse{}, errors: []int{409}},
		"POST /v1/nodes/verify-provider": {id: "verifyProvider", tag: "nodes", summary: "Check a provider key (the key as bearer)",
			description: "The body is `{}` or nothing.",
			status:      200, response: api.VerifyProviderResponse{}, errors: []int{400}},
		"POST /v1/nodes/report-version": {id: "reportVersion", tag: "nodes", summary: "A node reports its worker version (its node token as bearer)",
			description: "Recorded in the ledger and as the annotation `" + fleet.VersionAnnotation + "` on the Kubernetes Node.",
			request:     api.ReportVersionRequest{}, status: 200, response: api.NodeEnvelope{}, errors: []int{404, 409}},
		"GET /v1/nodes/peers": {id: "nodePeers", tag: "nodes", summary: "A node waits for the other nodes it links to directly (its node token as bearer)",
			description: "Every node with a tunnel that the caller may link to (its own org's, and those of `SHARED_ORGS`): public key, VPN address, pod CIDR and the endpoints to try (where the master's WireGuard device sees its packets come from, then the ones its agent reported; those in private ranges only with `FLEET_LAN=on`). " +
				"A node holds at most " + strconv.Itoa(MaxPollsPerNode) + " long polls open at once (429 `too_many_polls`). " +
				"With `since` (the `revision` of the last answer) and `wait`, the answer comes when the directory differs from that revision, or after `wait` seconds with the same one (a long poll: call again). " +
				"A node missing from an answer has left: its peer goes. Served on the VPN listener as on the public one.",
			query: []param{
				{"hostname", "The calling node (required).", stringParam},
				{"since", "The revision the node holds; the answer waits while the directory is at it.", stringParam},
				{"wait", "How long to wait for a change, in seconds (0 to 60; default 0, answer at once).", intParam},
			},
			status: 200, response: api.PeerDirectory{}, errors: []int{404}},
		"POST /v1/nodes/links": {id: "reportLinks", tag: "nodes", summary: "A node reports the state of its links to the other nodes (its node token as bearer)",
			description: "Per other node: direct, relayed (through the master) or connecting, the endpoint, the last handshake and bytes. Kept in memory; an agent reports every few seconds.",
			request:     api.LinksReport{}, status: 200, response: api.LinksAccepted{}, errors: []int{404}},
		"GET /v1/nodes/{hostname}/audit": {id: "getNodeAudit", tag: "nodes", summary: "A node's audit trail: joins (with which key, from which address), registers, refusals, disconnects and leaves",
			status: 200, response: api.AuditList{}},
		"GET /v1/nodes/{hostname}/kubernetes": {id: "getNodeKubernetes", tag: "nodes", summary: "A node's Kubernetes Node: whether it exists, its conditions",
			status: 200, response: api.KubernetesNode{}, errors: []int{404}},
		"GET /v1/nodes/history": {id: "fleetHistory", tag: "nodes", summary: "The fleet over the last six hours: registered and online nodes and online GPUs by pool, a sample a minute",
			status: 200, response: api.FleetHistory{}},
		"GET /v1/nodes/{hostname}/links": {id: "getNodeLinks", tag: "nodes", summary: "A node's links to the other nodes, as its agent last reported them",
			status: 200, response: api.NodeLinks{}, errors: []int{404}},
		"GET /v1/nodes": {id: "listNodes", tag: "nodes", summary: "List nodes, a page at a time, by hostname",
			query: pageParams, status: 200, response: api.NodeList{}},
		"GET /v1/nodes/{hostname}": {id: "getNode", tag: "nodes", summary: "Get a node",
			status: 200, response: api.NodeEnvelope{}, errors: []int{404}},

		"POST /v1/kuberay/clusters": {id: "createCluster", tag: "clusters", summary: "Create a RayCluster",
			description: "The body is either a typed spec (`name`, `head`, `worker_groups`, …) or a whole `ray.io/v1` RayCluster object (it has `kind`). " +
				"The cluster goes into the service's namespace.",
			request: jsonschema.OneOf(rayctl.ClusterSpec{}, rayCluster), status: 201, response: rayCluster, errors: []int{409, 422}},
		"GET /v1/kuberay/clusters": {id: "listClusters", tag: "clusters", summary: "List RayClusters",
			query:  []param{{"label_selector", "A Kubernetes label selector, e.g. `team=ml`.", stringParam}},
			status: 200, response: api.ClusterList{}},
		"GET /v1/kuberay/clusters/{name}": {id: "getCluster", tag: "clusters", summary: "Get a RayCluster",
			status: 200, response: rayCluster, errors: []int{404}},
		"DELETE /v1/kuberay/clusters/{name}": {id: "deleteCluster", tag: "clusters", summary: "Delete a RayCluster",
			status: 200, response: api.ClusterDeleted{}, errors: []int{404}},
		"PATCH /v1/kuberay/clusters/{name}/scale": {id: "scaleWorkerGroup", tag: "clusters", summary: "Scale a worker group (replicas, min, max in one update)",
			request: clusterapi.ScaleRequest{}, status: 200, response: rayCluster, errors: []int{404, 409, 422}},
		"POST /v1/kuberay/clusters/{name}/worker-groups": {id: "addWorkerGroup", tag: "clusters", summary: "Add a worker group (typed)",
			request: rayctl.WorkerGroup{}, status: 201, response: rayCluster, errors: []int{404, 409, 422}},
		"POST /v1/kuberay/clusters/{name}/worker-groups-raw": {id: "addWorkerGroupRaw", tag: "clusters", summary: "Add a worker group (a KubeRay WorkerGroupSpec as it is)",
			request: rayv1.WorkerGroupSpec{}, status: 201, response: rayCluster, errors: []int{404, 409, 422}},
		"GET /v1/kuberay/clusters/{name}/workers": {id: "listWorkers", tag: "clusters", summary: "List worker pods",
			query:  []param{{"group", "Only this worker group's pods.", stringParam}},
			status: 200, response: clusterapi.WorkerList{}, errors: []int{404}},
		"GET /v1/kuberay/clusters/{name}/worker-groups": {id: "listWorkerGroups", tag: "clusters", summary: "List worker groups with their pod counts",
			status: 200, response: clusterapi.GroupList{}, errors: []int{404}},
		"GET /v1/kuberay/clusters/{name}/worker-groups/{group}/logs": {id: "workerGroupLogs", tag: "clusters", summary: "Stream a worker group's logs",
			description: "Plain text, each line prefixed with its pod.",
			query: []param{
				{"tail", "Only the last N lines of each pod.", intParam},
				{"since", "Only lines newer than this Go duration, e.g. `10m`.", stringParam},
				{"follow", "Keep streaming.", boolParam},
			},
			status: 200, responseType: "text/plain", response: "", errors: []int{404}},
		"DELETE /v1/kuberay/clusters/{name}/worker-groups/{group}": {id: "removeWorkerGroup", tag: "clusters", summary: "Remove a worker group (drains first)",
			description: "Scales the group to 0, waits for its pods to go, then removes it; with `immediate=true` removes it and deletes its pods at once.",
			query:       []param{{"immediate", "Do not drain first.", boolParam}},
			status:      200, response: rayCluster, errors: []int{404, 409, 504}},
		"DELETE /v1/kuberay/clusters/{name}/worker-groups/{group}/pods": {id: "deleteWorkerGroupPods", tag: "clusters", summary: "Delete a worker group's pods (KubeRay recreates them)",
			status: 200, response: api.PodsDeleted{}, errors: []int{404}},
		"POST /v1/kuberay/clusters/{name}/swap-worker-groups": {id: "swapWorkerGroup", tag: "clusters", summary: "Replace one worker group by another in one update",
			request: clusterapi.SwapRequest{}, status: 200, response: rayCluster, errors: []int{404, 409, 422}},
		"POST /v1/crd/jobs": {id: "createJob", tag: "crd", summary: "Create a GridweaveJob",
			description: "A GridweaveJob object (apiVersion and kind may be left out); the API server validates it against the CRD.",
			request:     gridweaveObject, status: 201, response: gridweaveObject, errors: []int{409, 422, 503}},
		"GET /v1/crd/jobs": {id: "listJobs", tag: "crd", summary: "List GridweaveJobs",
			query:  []param{{"label_selector", "A Kubernetes label selector.", stringParam}, {"owner", "Only the jobs of this owner (spec.owner).", stringParam}},
			status: 200, response: gridweaveList{}, errors: []int{503}},
		"GET /v1/crd/jobs/{name}": {id: "getJob", tag: "crd", summary: "Read a GridweaveJob",
			status: 200, response: gridweaveObject, errors: []int{404, 503}},
		"PATCH /v1/crd/jobs/{name}": {id: "patchJob", tag: "crd", summary: "Merge-patch a GridweaveJob",
			description: "A JSON merge patch. With metadata.resourceVersion in it the write is conditional: 409 when the object changed since.",
			request:     anyObject, status: 200, response: gridweaveObject, errors: []int{404, 409, 422, 503}},
		"PATCH /v1/crd/jobs/{name}/status": {id: "patchJobStatus", tag: "crd", summary: "Merge-patch a GridweaveJob's status",
			request: anyObject, status: 200, response: gridweaveObject, errors: []int{404, 409, 422, 503}},
		"DELETE /v1/crd/jobs/{name}": {id: "deleteJob", tag: "crd", summary: "Delete a GridweaveJob",
			status: 200, response: deleted, errors: []int{404, 503}},
		"POST /v1/crd/endpoints": {id: "createEndpoint", tag: "crd", summary: "Create a GridweaveEndpoint",
			request: gridweaveObject, status: 201, response: gridweaveObject, errors: []int{409, 422, 503}},
		"GET /v1/crd/endpoints": {id: "listEndpoints", tag: "crd", summary: "List GridweaveEndpoints",
			query:  []param{{"label_selector", "A Kubernetes label selector.", stringParam}, {"owner", "Only the endpoints of this owner (spec.owner).", stringParam}},
			status: 200, response: gridweaveList{}, errors: []int{503}},
		"GET /v1/crd/endpoints/by-name/{name}": {id: "getEndpointByName", tag: "crd", summary: "Read the GridweaveEndpoint whose spec.name is {name}",
			status: 200, response: gridweaveObject, errors: []int{404, 503}},
		"GET /v1/crd/endpoints/{name}": {id: "getEndpoint", tag: "crd", summary: "Read a GridweaveEndpoint",
			status: 200, response: gridweaveObject, errors: []int{404, 503}},
		"PATCH /v1/crd/endpoints/{name}": {id: "patchEndpoint", tag: "crd", summary: "Merge-patch a GridweaveEndpoint (a new spec.hardware moves its workers)",
			description: "A JSON merge patch. A change of spec.hardware swaps the endpoint's worker group on its RayCluster for one on the new hardware in one update (head and other groups untouched) before answering, and records the new group in the status.",
			request:     anyObject, status: 200, response: gridweaveObject, errors: []int{404, 409, 422, 502, 503}},
		"PATCH /v1/crd/endpoints/{name}/status": {id: "patchEndpointStatus", tag: "crd", summary: "Merge-patch a GridweaveEndpoint's status",
			request: anyObject, status: 200, response: gridweaveObject, errors: []int{404, 409, 422, 503}},
		"DELETE /v1/crd/endpoints/{name}": {id: "deleteEndpoint", tag: "crd", summary: "Delete a GridweaveEndpoint",
			status: 200, response: deleted, errors: []int{404, 503}},
		"GET /v1/ray/serve/statuses": {id: "serveStatuses", tag: "ray", summary: "Ray Serve applications and their deployments' statuses",
			status: 200, response: api.ServeStatuses{}, errors: []int{502, 503, 504}},
		"DELETE /v1/ray/serve/applications/{app}": {id: "deleteServeApplication", tag: "ray", summary: "Remove one Serve application, keeping the others",
			description: "Ray has no per-application DELETE: the declarative config is read and PUT back without this application. Refused (409) when Serve runs applications deployed imperatively, which the PUT would remove.",
			status:      200, response: deleted, errors: []int{404, 409, 502, 503, 504}},
		"POST /v1/kubetorch/sync": {id: "syncBundle", tag: "kubetorch", summary: "Upload a code bundle (tar.gz or zip)",
			description: "The body is the archive (`Content-Type: application/gzip` for a tar.gz, `application/zip`), or the multipart field `bundle`. " +
				"Every entry is checked: nothing escaping the root (`..`, absolute paths, links pointing out), no device files, no duplicate paths, " +
				"at most 10,000 entries and 512 MiB expanded, at most 100:1 compression; a refused entry is a 400 naming it. " +
				"Stored content-addressed (the same bytes are one bundle); `url` serves it, without credentials, on the VPN listener, as the zip Ray's working_dir takes.",
			status: 201, response: api.BundleSynced{}, errors: []int{400, 413, 415}},
		"GET /v1/kubetorch/bundles/{file}": {id: "getBundle", tag: "kubetorch", summary: "A bundle's zip, at its unguessable URL (<sha256>.zip)",
			description: "Served on the VPN listener (MASTER_VPN_IP:VPN_HTTP_PORT, through the tunnels) and the internal listener; the public listener answers 404.",
			status:      200, responseType: "application/zip", response: binaryDoc{}, errors: []int{404}},
		"POST /v1/kubetorch/train": {id: "train", tag: "kubetorch", summary: "Launch distributed training on a cluster's GPU workers",
			description: "A Ray job through the dashboard Jobs API: the bundle as runtime_env.working_dir, the command run on every GPU (Ray Train's torch backend sets MASTER_ADDR, RANK, WORLD_SIZE, LOCAL_RANK as torchrun does), nodes and GPUs per node from the cluster's ready GPU workers unless given. Recorded as a GridweaveJob owned by `owner` (default the caller's sub).",
			request:     api.TrainRequest{}, status: 201, response: api.TrainResponse{}, errors: []int{404, 409, 502, 503, 504}},
		"GET /v1/kubetorch/health": {id: "kubetorchHealth", tag: "kubetorch", summary: "The dashboard reachable, a cluster's GPU workers ready, per group",
			query: []param{{"cluster", "The RayCluster.", stringParam}}, status: 200, response: api.KubeTorchHealth{}, errors: []int{404}},
		"GET /v1/kubetorch/jobs": {id: "kubetorchJobs", tag: "kubetorch", summary: "The caller's KubeTorch jobs, newest first (an admin sees every job)",
			description: "What the server last followed of each job; GET /v1/kubetorch/jobs/{id} asks Ray now and adds the logs.",
			status:      200, response: api.KubeTorchJobList{}, errors: []int{503}},
		"GET /v1/kubetorch/jobs/{id}": {id: "kubetorchJob", tag: "kubetorch", summary: "A KubeTorch job's status and last log lines (a user sees only their own)",
			status: 200, response: api.KubeTorchJob{}, errors: []int{404, 502, 503, 504}},
		"POST /v1/kuberay/clusters/{name}/replace-worker-groups": {id: "replaceWorkerGroups", tag: "clusters", summary: "Replace all worker groups in one update",
			request: clusterapi.ReplaceRequest{}, status: 200, response: rayCluster, errors: []int{404, 409, 422}},
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
