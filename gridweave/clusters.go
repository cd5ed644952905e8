package gridweave

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"github.com/swaggest/jsonschema-go"
	"k8s.io/apimachinery/pkg/util/validation"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/api/clusterapi"
	"gridweave.dev/rayctl"
)

// The clusters API: RayClusters in Config.Namespace over rayctl. Bodies
// are decoded strictly (400 naming the field); KubeRay's own rules and
// the API server's refusals are 422; a missing cluster or group 404; a
// write that kept conflicting 409.

// clusterName returns the {name} (or {group}) path value if it can name a
// RayCluster (or a worker group).
func clusterName(r *http.Request, param string) (string, error) {
	name := r.PathValue(param)
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return "", badField(param, "%q is not a valid name: %s", name, errs[0])
	}
	return name, nil
}

// clusterPath checks the route's {name}, before its body.
func clusterPath(r *http.Request) error {
	_, err := clusterName(r, "name")
	return err
}

func summarize(rc *rayv1.RayCluster) api.ClusterSummary {
	//lint:ignore SA1019 KubeRay v1.6.0 still reports State beside its Conditions, and it is the one-word summary a list wants.
	state := string(rc.Status.State)
	s := api.ClusterSummary{Name: rc.Name, Namespace: rc.Namespace, State: state,
		DesiredWorkers: rc.Status.DesiredWorkerReplicas, ReadyWorkers: rc.Status.ReadyWorkerReplicas,
		HeadPodIP: rc.Status.Head.PodIP, HeadServiceName: rc.Status.Head.ServiceName, CreatedAt: rc.CreationTimestamp.Time,
		WorkerGroups: []string{}}
	for _, g := range rc.Spec.WorkerGroupSpecs {
		s.WorkerGroups = append(s.WorkerGroups, g.GroupName)
	}
	return s
}

// handleCreateCluster takes a typed spec ({"name", "head", "worker_groups"…},
// rayctl.ClusterSpec) or a whole RayCluster ({"apiVersion", "kind", …}).
func (c *clusterRoutes) handleCreateCluster(w http.ResponseWriter, r *http.Request) {
	data, err := readBody(r)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		c.writeError(w, r, jsonError(err))
		return
	}
	var rc *rayv1.RayCluster
	if _, full := probe["kind"]; full {
		var obj rayv1.RayCluster
		if err := decodeStrict(data, &obj); err != nil {
			c.writeError(w, r, err)
			return
		}
		if obj.Kind != "RayCluster" || obj.APIVersion != rayv1.GroupVersion.String() {
			c.writeError(w, r, badField("kind", "a full object must be apiVersion %s, kind RayCluster; got %s %s", rayv1.GroupVersion, obj.APIVersion, obj.Kind))
			return
		}
		rc = &obj
	} else {
		var spec rayctl.ClusterSpec
		if err := decodeStrict(data, &spec); err != nil {
			c.writeError(w, r, err)
			return
		}
		if spec.Namespace != "" && spec.Namespace != c.cfg.Namespace {
			c.writeError(w, r, badField("namespace", "this service manages RayClusters in %q only", c.cfg.Namespace))
			return
		}
		spec.Namespace = c.cfg.Namespace
		if spec.Image == "" {
			spec.Image = c.cfg.RayImage
		}
		if rc, err = spec.Build(); err != nil {
			c.writeError(w, r, err)
			return
		}
	}
	if rc.Namespace != "" && rc.Namespace != c.cfg.Namespace {
		c.writeError(w, r, badField("metadata.namespace", "this service manages RayClusters in %q only", c.cfg.Namespace))
		return
	}
	rc.Namespace = c.cfg.Namespace
	created, err := c.ray.CreateRayCluster(r.Context(), rc)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, withTypeMeta(created))
}

// clusterRoutes serve the RayClusters of Config.Namespace over rayctl.
type clusterRoutes struct {
	responder
	cfg *Config
	ray *rayctl.Client
}

func (c *clusterRoutes) list(r *http.Request, _ noBody) (api.ClusterList, error) {
	list, err := c.ray.ListClusters(r.Context(), rayctl.ListOptions{Namespace: c.cfg.Namespace, LabelSelector: r.URL.Query().Get("label_selector")})
	if err != nil {
		return api.ClusterList{}, err
	}
	out := make([]api.ClusterSummary, len(list))
	for i := range list {
		out[i] = summarize(&list[i])
	}
	return api.ClusterList{Clusters: out}, nil
}

func (c *clusterRoutes) get(r *http.Request, _ noBody) (*rayv1.RayCluster, error) {
	name, err := clusterName(r, "name")
	if err != nil {
		return nil, err
	}
	return whole(c.ray.GetCluster(r.Context(), c.cfg.Namespace, name))
}

func (c *clusterRoutes) delete(r *http.Request, _ noBody) (api.ClusterDeleted, error) {
	name, err := clusterName(r, "name")
	if err != nil {
		return api.ClusterDeleted{}, err
	}
	if err := c.ray.DeleteCluster(r.Context(), c.cfg.Namespace, name, rayctl.DeleteOptions{}); err != nil {
		return api.ClusterDeleted{}, err
	}
	return api.ClusterDeleted{Name: name, Deleted: true}, nil
}

func (c *clusterRoutes) scale(r *http.Request, req clusterapi.ScaleRequest) (*rayv1.RayCluster, error) {
	name, err := clusterName(r, "name")
	if err != nil {
		return nil, err
	}
	if req.Group == "" {
		return nil, badField("group", "group is required: the worker group to scale")
	}
	return whole(c.ray.ScaleGroup(r.Context(), c.cfg.Namespace, name, req.Group, req.Scale))
}

func (c *clusterRoutes) addWorkerGroup(r *http.Request, g rayctl.WorkerGroup) (*rayv1.RayCluster, error) {
	name, err := clusterName(r, "name")
	if err != nil {
		return nil, err
	}
	return whole(c.ray.AddWorkerGroup(r.Context(), c.cfg.Namespace, name, g))
}

func (c *clusterRoutes) addWorkerGroupRaw(r *http.Request, spec rayv1.WorkerGroupSpec) (*rayv1.RayCluster, error) {
	name, err := clusterName(r, "name")
	if err != nil {
		return nil, err
	}
	if spec.RayStartParams == nil {
		spec.RayStartParams = map[string]string{}
	}
	return whole(c.ray.AddWorkerGroupSpec(r.Context(), c.cfg.Namespace, name, spec))
}

func (c *clusterRoutes) listWorkers(r *http.Request, _ noBody) (clusterapi.WorkerList, error) {
	name, err := clusterName(r, "name")
	if err != nil {
		return clusterapi.WorkerList{}, err
	}
	workers, err := c.ray.ListWorkers(r.Context(), c.cfg.Namespace, name, r.URL.Query().Get("group"))
	if workers == nil {
		workers = []rayctl.Worker{}
	}
	return clusterapi.WorkerList{Workers: workers}, err
}

func (c *clusterRoutes) listWorkerGroups(r *http.Request, _ noBody) (clusterapi.GroupList, error) {
	name, err := clusterName(r, "name")
	if err != nil {
		return clusterapi.GroupList{}, err
	}
	groups, err := c.ray.ListWorkerGroups(r.Context(), c.cfg.Namespace, name)
	if groups == nil {
		groups = []rayctl.GroupStatus{}
	}
	return clusterapi.GroupList{WorkerGroups: groups}, err
}

// handleGroupLogs streams the group's pods' logs as text, each line
// prefixed by its pod: ?tail=N, ?since=10m, ?follow=true.
func (c *clusterRoutes) handleGroupLogs(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	var opts rayctl.LogOptions
	if v := q.Get("tail"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			c.writeError(w, r, badField("tail", "tail must be a non-negative whole number of lines, got %q", v))
			return
		}
		opts.TailLines = &n
	}
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			c.writeError(w, r, badField("since", "since must be a positive duration such as 10m, got %q", v))
			return
		}
		opts.Since = d
	}
	if v := q.Get("follow"); v != "" {
		f, err := strconv.ParseBool(v)
		if err != nil {
			c.writeError(w, r, badField("follow", "follow must be true or false, got %q", v))
			return
		}
		opts.Follow = f
	}
	group, err := clusterName(r, "group")
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	stream, err := c.ray.GroupLogs(r.Context(), c.cfg.Namespace, name, group, opts)
	if err != nil {
		c.writeError(w, r, err)
		return
	}
	defer stream.Close()
	lines := bufio.NewReader(stream)
	// Without follow the first line (or the error opening the first pod's
	// log, e.g. a 403) comes at once: read it before answering, so a
	// failure is an error status, not an empty 200.
	var first []byte
	if !opts.Follow {
		var err error
		first, err = lines.ReadBytes('\n')
		if err != nil && err != io.EOF {
			c.writeError(w, r, err)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	flush := http.NewResponseController(w)
	if len(first) > 0 {
		if _, err := w.Write(first); err != nil {
			return
		}
	}
	for {
		line, err := lines.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := w.Write(line); werr != nil {
				return
			}
			_ = flush.Flush()
		}
		if err != nil {
			if err != io.EOF {
				c.logFor(r).WarnContext(r.Context(), "log stream ended", "err", err)
			}
			return
		}
	}
}

func (c *clusterRoutes) removeWorkerGroup(r *http.Request, _ noBody) (*rayv1.RayCluster, error) {
	name, err := clusterName(r, "name")
	if err != nil {
		return nil, err
	}
	var opts rayctl.RemoveOptions
	if v := r.URL.Query().Get("immediate"); v != "" {
		if opts.Immediate, err = strconv.ParseBool(v); err != nil {
			return nil, badField("immediate", "immediate must be true or false, got %q", v)
		}
	}
	group, err := clusterName(r, "group")
	if err != nil {
		return nil, err
	}
	return whole(c.ray.RemoveWorkerGroup(r.Context(), c.cfg.Namespace, name, group, opts))
}

func (c *clusterRoutes) deleteGroupPods(r *http.Request, _ noBody) (api.PodsDeleted, error) {
	name, err := clusterName(r, "name")
	if err != nil {
		return api.PodsDeleted{}, err
	}
	group, err := clusterName(r, "group")
	if err != nil {
		return api.PodsDeleted{}, err
	}
	if err := c.ray.DeleteGroupPods(r.Context(), c.cfg.Namespace, name, group); err != nil {
		return api.PodsDeleted{}, err
	}
	return api.PodsDeleted{Cluster: name, Group: group, PodsDeleted: true}, nil
}

func (c *clusterRoutes) swapWorkerGroups(r *http.Request, req clusterapi.SwapRequest) (*rayv1.RayCluster, error) {
	name, err := clusterName(r, "name")
	if err != nil {
		return nil, err
	}
	if req.OldGroup == "" {
		return nil, badField("old_group", "old_group is required: the group to replace")
	}
	if req.NewGroup.RayStartParams == nil {
		req.NewGroup.RayStartParams = map[string]string{}
	}
	return whole(c.ray.SwapWorkerGroup(r.Context(), c.cfg.Namespace, name, req.OldGroup, req.NewGroup))
}

func (c *clusterRoutes) replaceWorkerGroups(r *http.Request, req clusterapi.ReplaceRequest) (*rayv1.RayCluster, error) {
	name, err := clusterName(r, "name")
	if err != nil {
		return nil, err
	}
	for i := range req.WorkerGroups {
		if req.WorkerGroups[i].RayStartParams == nil {
			req.WorkerGroups[i].RayStartParams = map[string]string{}
		}
	}
	return whole(c.ray.ReplaceWorkerGroups(r.Context(), c.cfg.Namespace, name, req.WorkerGroups))
}

// whole is rayctl's answer with its apiVersion and kind (withTypeMeta).
func whole(rc *rayv1.RayCluster, err error) (*rayv1.RayCluster, error) {
	if err != nil {
		return nil, err
	}
	return withTypeMeta(rc), nil
}

// withTypeMeta is rc with its apiVersion and kind, which typed clients
// leave empty on the objects they return: an answer is a whole object.
func withTypeMeta(rc *rayv1.RayCluster) *rayv1.RayCluster {
	out := *rc
	out.APIVersion, out.Kind = rayv1.GroupVersion.String(), "RayCluster"
	return &out
}

// routes are the clusterRoutes routes.
func (c *clusterRoutes) routes() []route {
	rayCluster := rayv1.RayCluster{}
	return []route{
		{pattern: "POST /v1/kuberay/clusters", auth: authAdmin, on: onPublic, handler: c.handleCreateCluster,
			doc: operation{id: "createCluster", tag: "clusters", summary: "Create a RayCluster",
				description: "The body is either a typed spec (`name`, `head`, `worker_groups`, …) or a whole `ray.io/v1` RayCluster object (it has `kind`). " +
					"The cluster goes into the service's namespace.",
				request: jsonschema.OneOf(rayctl.ClusterSpec{}, rayCluster), status: 201, response: rayCluster, codes: rayctlCodes}},
		jsonRoute(c.responder, route{pattern: "GET /v1/kuberay/clusters", auth: authAdmin, on: onPublic,
			doc: operation{id: "listClusters", tag: "clusters", summary: "List RayClusters",
				query: []param{{"label_selector", "A Kubernetes label selector, e.g. `team=ml`.", stringParam}}, codes: rayctlCodes}}, http.StatusOK, c.list),
		jsonRoute(c.responder, route{pattern: "GET /v1/kuberay/clusters/{name}", auth: authAdmin, on: onPublic,
			doc: operation{id: "getCluster", tag: "clusters", summary: "Get a RayCluster",
				codes: rayctlCodes}}, http.StatusOK, c.get),
		jsonRoute(c.responder, route{pattern: "DELETE /v1/kuberay/clusters/{name}", auth: authAdmin, on: onPublic,
			doc: operation{id: "deleteCluster", tag: "clusters", summary: "Delete a RayCluster",
				codes: rayctlCodes}}, http.StatusOK, c.delete),
		jsonRoute(c.responder, route{pattern: "PATCH /v1/kuberay/clusters/{name}/scale", auth: authAdmin, on: onPublic, pathFirst: clusterPath,
			doc: operation{id: "scaleWorkerGroup", tag: "clusters", summary: "Scale a worker group (replicas, min, max in one update)",
				codes: rayctlCodes}}, http.StatusOK, c.scale),
		jsonRoute(c.responder, route{pattern: "POST /v1/kuberay/clusters/{name}/worker-groups", auth: authAdmin, on: onPublic, pathFirst: clusterPath,
			doc: operation{id: "addWorkerGroup", tag: "clusters", summary: "Add a worker group (typed)",
				codes: rayctlCodes}}, http.StatusCreated, c.addWorkerGroup),
		jsonRoute(c.responder, route{pattern: "POST /v1/kuberay/clusters/{name}/worker-groups-raw", auth: authAdmin, on: onPublic, pathFirst: clusterPath,
			doc: operation{id: "addWorkerGroupRaw", tag: "clusters", summary: "Add a worker group (a KubeRay WorkerGroupSpec as it is)",
				codes: rayctlCodes}}, http.StatusCreated, c.addWorkerGroupRaw),
		jsonRoute(c.responder, route{pattern: "GET /v1/kuberay/clusters/{name}/workers", auth: authAdmin, on: onPublic,
			doc: operation{id: "listWorkers", tag: "clusters", summary: "List worker pods",
				query: []param{{"group", "Only this worker group's pods.", stringParam}},
				codes: rayctlCodes}}, http.StatusOK, c.listWorkers),
		jsonRoute(c.responder, route{pattern: "GET /v1/kuberay/clusters/{name}/worker-groups", auth: authAdmin, on: onPublic,
			doc: operation{id: "listWorkerGroups", tag: "clusters", summary: "List worker groups with their pod counts",
				codes: rayctlCodes}}, http.StatusOK, c.listWorkerGroups),
		{pattern: "GET /v1/kuberay/clusters/{name}/worker-groups/{group}/logs", auth: authAdmin, on: onPublic, handler: c.handleGroupLogs,
			doc: operation{id: "workerGroupLogs", tag: "clusters", summary: "Stream a worker group's logs",
				description: "Plain text, each line prefixed with its pod.",
				query: []param{
					{"tail", "Only the last N lines of each pod.", intParam},
					{"since", "Only lines newer than this Go duration, e.g. `10m`.", stringParam},
					{"follow", "Keep streaming.", boolParam},
				},
				status: 200, responseType: "text/plain", response: "", codes: rayctlCodes}},
		jsonRoute(c.responder, route{pattern: "DELETE /v1/kuberay/clusters/{name}/worker-groups/{group}", auth: authAdmin, on: onPublic,
			doc: operation{id: "removeWorkerGroup", tag: "clusters", summary: "Remove a worker group (drains first)",
				description: "Scales the group to 0, waits for its pods to go, then removes it; with `immediate=true` removes it and deletes its pods at once.",
				query:       []param{{"immediate", "Do not drain first.", boolParam}},
				codes:       rayctlCodes}}, http.StatusOK, c.removeWorkerGroup),
		jsonRoute(c.responder, route{pattern: "DELETE /v1/kuberay/clusters/{name}/worker-groups/{group}/pods", auth: authAdmin, on: onPublic,
			doc: operation{id: "deleteWorkerGroupPods", tag: "clusters", summary: "Delete a worker group's pods (KubeRay recreates them)",
				codes: rayctlCodes}}, http.StatusOK, c.deleteGroupPods),
		jsonRoute(c.responder, route{pattern: "POST /v1/kuberay/clusters/{name}/swap-worker-groups", auth: authAdmin, on: onPublic, pathFirst: clusterPath,
			doc: operation{id: "swapWorkerGroup", tag: "clusters", summary: "Replace one worker group by another in one update",
				codes: rayctlCodes}}, http.StatusOK, c.swapWorkerGroups),
		jsonRoute(c.responder, route{pattern: "POST /v1/kuberay/clusters/{name}/replace-worker-groups", auth: authAdmin, on: onPublic, pathFirst: clusterPath,
			doc: operation{id: "replaceWorkerGroups", tag: "clusters", summary: "Replace all worker groups in one update",
				codes: rayctlCodes}}, http.StatusOK, c.replaceWorkerGroups),
	}
}
