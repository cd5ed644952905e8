package gridweave

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
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
func (s *Server) handleCreateCluster(w http.ResponseWriter, r *http.Request) {
	data, err := readBody(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(data, &probe); err != nil {
		s.writeError(w, r, jsonError(err))
		return
	}
	var rc *rayv1.RayCluster
	if _, full := probe["kind"]; full {
		var obj rayv1.RayCluster
		if err := decodeStrict(data, &obj); err != nil {
			s.writeError(w, r, err)
			return
		}
		if obj.Kind != "RayCluster" || obj.APIVersion != rayv1.GroupVersion.String() {
			s.writeError(w, r, badField("kind", "a full object must be apiVersion %s, kind RayCluster; got %s %s", rayv1.GroupVersion, obj.APIVersion, obj.Kind))
			return
		}
		rc = &obj
	} else {
		var spec rayctl.ClusterSpec
		if err := decodeStrict(data, &spec); err != nil {
			s.writeError(w, r, err)
			return
		}
		if spec.Namespace != "" && spec.Namespace != s.cfg.Namespace {
			s.writeError(w, r, badField("namespace", "this service manages RayClusters in %q only", s.cfg.Namespace))
			return
		}
		spec.Namespace = s.cfg.Namespace
		if spec.Image == "" {
			spec.Image = s.cfg.RayImage
		}
		if rc, err = spec.Build(); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if rc.Namespace != "" && rc.Namespace != s.cfg.Namespace {
		s.writeError(w, r, badField("metadata.namespace", "this service manages RayClusters in %q only", s.cfg.Namespace))
		return
	}
	rc.Namespace = s.cfg.Namespace
	created, err := s.ray.CreateRayCluster(r.Context(), rc)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, withTypeMeta(created))
}

func (s *Server) handleListClusters(w http.ResponseWriter, r *http.Request) {
	list, err := s.ray.ListClusters(r.Context(), rayctl.ListOptions{Namespace: s.cfg.Namespace, LabelSelector: r.URL.Query().Get("label_selector")})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]api.ClusterSummary, len(list))
	for i := range list {
		out[i] = summarize(&list[i])
	}
	writeJSON(w, http.StatusOK, api.ClusterList{Clusters: out})
}

func (s *Server) handleGetCluster(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rc, err := s.ray.GetCluster(r.Context(), s.cfg.Namespace, name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, withTypeMeta(rc))
}

func (s *Server) handleDeleteCluster(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.ray.DeleteCluster(r.Context(), s.cfg.Namespace, name, rayctl.DeleteOptions{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.ClusterDeleted{Name: name, Deleted: true})
}

func (s *Server) handleScale(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	var req clusterapi.ScaleRequest
	if err == nil {
		err = decodeJSON(r, &req)
	}
	if err == nil && req.Group == "" {
		err = badField("group", "group is required: the worker group to scale")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rc, err := s.ray.ScaleGroup(r.Context(), s.cfg.Namespace, name, req.Group, req.Scale)
	s.writeCluster(w, r, http.StatusOK, rc, err)
}

func (s *Server) handleAddWorkerGroup(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	var g rayctl.WorkerGroup
	if err == nil {
		err = decodeJSON(r, &g)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rc, err := s.ray.AddWorkerGroup(r.Context(), s.cfg.Namespace, name, g)
	s.writeCluster(w, r, http.StatusCreated, rc, err)
}

func (s *Server) handleAddWorkerGroupRaw(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	var spec rayv1.WorkerGroupSpec
	if err == nil {
		err = decodeJSON(r, &spec)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if spec.RayStartParams == nil {
		spec.RayStartParams = map[string]string{}
	}
	rc, err := s.ray.AddWorkerGroupSpec(r.Context(), s.cfg.Namespace, name, spec)
	s.writeCluster(w, r, http.StatusCreated, rc, err)
}

func (s *Server) handleListWorkers(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	workers, err := s.ray.ListWorkers(r.Context(), s.cfg.Namespace, name, r.URL.Query().Get("group"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if workers == nil {
		workers = []rayctl.Worker{}
	}
	writeJSON(w, http.StatusOK, clusterapi.WorkerList{Workers: workers})
}

func (s *Server) handleListWorkerGroups(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	groups, err := s.ray.ListWorkerGroups(r.Context(), s.cfg.Namespace, name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if groups == nil {
		groups = []rayctl.GroupStatus{}
	}
	writeJSON(w, http.StatusOK, clusterapi.GroupList{WorkerGroups: groups})
}

// handleGroupLogs streams the group's pods' logs as text, each line
// prefixed by its pod: ?tail=N, ?since=10m, ?follow=true.
func (s *Server) handleGroupLogs(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	var opts rayctl.LogOptions
	if v := q.Get("tail"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			s.writeError(w, r, badField("tail", "tail must be a non-negative whole number of lines, got %q", v))
			return
		}
		opts.TailLines = &n
	}
	if v := q.Get("since"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			s.writeError(w, r, badField("since", "since must be a positive duration such as 10m, got %q", v))
			return
		}
		opts.Since = d
	}
	if v := q.Get("follow"); v != "" {
		f, err := strconv.ParseBool(v)
		if err != nil {
			s.writeError(w, r, badField("follow", "follow must be true or false, got %q", v))
			return
		}
		opts.Follow = f
	}
	group, err := clusterName(r, "group")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	stream, err := s.ray.GroupLogs(r.Context(), s.cfg.Namespace, name, group, opts)
	if err != nil {
		s.writeError(w, r, err)
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
			s.writeError(w, r, err)
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
				s.logFor(r).WarnContext(r.Context(), "log stream ended", "err", err)
			}
			return
		}
	}
}

func (s *Server) handleRemoveWorkerGroup(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var opts rayctl.RemoveOptions
	if v := r.URL.Query().Get("immediate"); v != "" {
		if opts.Immediate, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, r, badField("immediate", "immediate must be true or false, got %q", v))
			return
		}
	}
	group, err := clusterName(r, "group")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	rc, err := s.ray.RemoveWorkerGroup(r.Context(), s.cfg.Namespace, name, group, opts)
	s.writeCluster(w, r, http.StatusOK, rc, err)
}

func (s *Server) handleDeleteGroupPods(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	group, err := clusterName(r, "group")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.ray.DeleteGroupPods(r.Context(), s.cfg.Namespace, name, group); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, api.PodsDeleted{Cluster: name, Group: group, PodsDeleted: true})
}

func (s *Server) handleSwapWorkerGroups(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	var req clusterapi.SwapRequest
	if err == nil {
		err = decodeJSON(r, &req)
	}
	if err == nil && req.OldGroup == "" {
		err = badField("old_group", "old_group is required: the group to replace")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.NewGroup.RayStartParams == nil {
		req.NewGroup.RayStartParams = map[string]string{}
	}
	rc, err := s.ray.SwapWorkerGroup(r.Context(), s.cfg.Namespace, name, req.OldGroup, req.NewGroup)
	s.writeCluster(w, r, http.StatusOK, rc, err)
}

func (s *Server) handleReplaceWorkerGroups(w http.ResponseWriter, r *http.Request) {
	name, err := clusterName(r, "name")
	var req clusterapi.ReplaceRequest
	if err == nil {
		err = decodeJSON(r, &req)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for i := range req.WorkerGroups {
		if req.WorkerGroups[i].RayStartParams == nil {
			req.WorkerGroups[i].RayStartParams = map[string]string{}
		}
	}
	rc, err := s.ray.ReplaceWorkerGroups(r.Context(), s.cfg.Namespace, name, req.WorkerGroups)
	s.writeCluster(w, r, http.StatusOK, rc, err)
}

func (s *Server) writeCluster(w http.ResponseWriter, r *http.Request, status int, rc *rayv1.RayCluster, err error) {
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, status, withTypeMeta(rc))
}

// withTypeMeta is rc with its apiVersion and kind, which typed clients
// leave empty on the objects they return: an answer is a whole object.
func withTypeMeta(rc *rayv1.RayCluster) *rayv1.RayCluster {
	out := *rc
	out.APIVersion, out.Kind = rayv1.GroupVersion.String(), "RayCluster"
	return &out
}
