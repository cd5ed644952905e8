package rayctltest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Dashboard is a fake Ray dashboard (port 8265 API) on an httptest server.
// It reproduces the documented request and response shapes of Serve's
// /api/serve/applications/ and the Jobs API, including their errors:
// PUT is declarative and strict about fields, DELETE removes everything,
// a reused submission_id is a 500 with Ray's text, an unknown job a 404.
type Dashboard struct {
	*httptest.Server
	token string

	mu       sync.Mutex
	apps     map[string]map[string]any // name → deployed_app_config
	status   map[string]string         // name → application status
	source   map[string]string
	jobs     map[string]*fakeJob
	order    []string
	requests []string
	puts     int
	packages map[string][]byte // package URI → zip
}

type fakeJob struct {
	details map[string]any
	logs    string
}

// NewDashboard starts a fake dashboard, closed at cleanup. If token is not
// empty, every request must carry x-ray-authorization: Bearer <token>.
func NewDashboard(t testing.TB, token string) *Dashboard {
	d := &Dashboard{token: token, apps: map[string]map[string]any{}, status: map[string]string{}, source: map[string]string{}, jobs: map[string]*fakeJob{}, packages: map[string][]byte{}}
	d.Server = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.Close)
	return d
}

// DeployApp adds a running declarative application, as if a PUT had
// deployed it.
func (d *Dashboard) DeployApp(name, routePrefix, importPath string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.apps[name] = map[string]any{"name": name, "route_prefix": routePrefix, "import_path": importPath,
		"deployments": []any{map[string]any{"name": "Model", "num_replicas": 1}}}
	d.status[name] = "RUNNING"
	d.source[name] = "declarative"
}

// MarkImperative marks an application as deployed through serve.run.
func (d *Dashboard) MarkImperative(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.source[name] = "imperative"
}

// Apps returns the names of the running applications, sorted.
func (d *Dashboard) Apps() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var names []string
	for n := range d.apps {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Puts returns how many PUTs were accepted.
func (d *Dashboard) Puts() int { d.mu.Lock(); defer d.mu.Unlock(); return d.puts }

// SetJobStatus moves a job to status (e.g. SUCCEEDED) and appends to its log.
func (d *Dashboard) SetJobStatus(id, status, logLine string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if j, ok := d.jobs[id]; ok {
		j.details["status"] = status
		j.logs += logLine
	}
}

// Requests returns "METHOD /path" of every request served.
func (d *Dashboard) Requests() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.requests)
}

// pkg serves GET (200 when present, 404 not) and PUT (store the zip) of
// /api/packages/{protocol}/{package_name}, as Ray's job head does.
func (d *Dashboard) pkg(w http.ResponseWriter, r *http.Request, rest string) {
	protocol, name, ok := strings.Cut(rest, "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		http.NotFound(w, r)
		return
	}
	uri := protocol + "://" + name
	switch r.Method {
	case http.MethodGet:
		if _, ok := d.packages[uri]; !ok {
			http.Error(w, "Package "+uri+" does not exist", http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusOK)
	case http.MethodPut:
		data, err := io.ReadAll(r.Body)
		if err != nil || len(data) == 0 {
			http.Error(w, "Failed to upload package "+uri, http.StatusInternalServerError)
			return
		}
		d.packages[uri] = data
		w.WriteHeader(http.StatusOK)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// Packages returns the uploaded packages by URI.
func (d *Dashboard) Packages() map[string][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string][]byte, len(d.packages))
	for k, v := range d.packages {
		out[k] = v
	}
	return out
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (d *Dashboard) serve(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.requests = append(d.requests, r.Method+" "+r.URL.Path)
	if d.token != "" && r.Header.Get("x-ray-authorization") != "Bearer "+d.token {
		http.Error(w, "Unauthorized: missing or invalid authentication token", http.StatusUnauthorized)
		return
	}
	path := r.URL.Path
	switch {
	case path == "/api/version" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]string{"version": "4", "ray_version": "2.54.0", "ray_commit": "0123abcd"})
	case path == "/api/serve/applications/":
		d.serveApplications(w, r)
	case path == "/api/jobs/":
		d.jobsCollection(w, r)
	case strings.HasPrefix(path, "/api/jobs/"):
		d.job(w, r, strings.TrimPrefix(path, "/api/jobs/"))
	case strings.HasPrefix(path, "/api/packages/"):
		d.pkg(w, r, strings.TrimPrefix(path, "/api/packages/"))
	default:
		http.NotFound(w, r)
	}
}

func (d *Dashboard) serveApplications(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		apps := map[string]any{}
		for name, cfg := range d.apps {
			apps[name] = map[string]any{
				"name": name, "route_prefix": cfg["route_prefix"], "docs_path": nil,
				"status": d.status[name], "message": "", "last_deployed_time_s": 1694042836.19,
				"deployed_app_config": cfg, "source": d.source[name],
				"deployments": map[string]any{"Model": map[string]any{
					"name": "Model", "status": "HEALTHY", "status_trigger": "CONFIG_UPDATE_COMPLETED", "message": "",
					"deployment_config":   map[string]any{"name": "Model", "num_replicas": 1, "max_ongoing_requests": 100},
					"target_num_replicas": 1, "required_resources": map[string]any{"CPU": 1},
					"replicas": []any{map[string]any{"replica_id": name + "#Model#abc", "state": "RUNNING", "pid": 29892,
						"node_id": "n1", "node_ip": "198.18.0.10", "actor_id": "a1", "start_time_s": 1694042840.57}},
				}},
			}
		}
		writeJSON(w, 200, map[string]any{
			"controller_info": map[string]any{"node_id": "n1", "node_ip": "198.18.0.10", "actor_id": "c1", "actor_name": "SERVE_CONTROLLER_ACTOR"},
			"proxy_location":  "EveryNode",
			"http_options":    map[string]any{"host": "0.0.0.0", "port": 8000, "root_path": "", "request_timeout_s": nil, "keep_alive_timeout_s": 5},
			"grpc_options":    map[string]any{"port": 9000, "grpc_servicer_functions": []any{}},
			"proxies":         map[string]any{"n1": map[string]any{"node_id": "n1", "node_ip": "198.18.0.10", "actor_id": "p1", "status": "HEALTHY"}},
			"target_capacity": nil,
			"applications":    apps,
		})
	case http.MethodPut:
		body, _ := io.ReadAll(r.Body)
		var cfg map[string]json.RawMessage
		dec := json.NewDecoder(bytes.NewReader(body))
		if err := dec.Decode(&cfg); err != nil {
			http.Error(w, "Invalid JSON: "+err.Error(), http.StatusBadRequest)
			return
		}
		// Ray 2.54 ignores top-level fields it does not know.
		var apps []map[string]any
		if err := json.Unmarshal(cfg["applications"], &apps); err != nil && cfg["applications"] != nil {
			http.Error(w, "applications must be a list", http.StatusBadRequest)
			return
		}
		next := map[string]map[string]any{}
		for i, app := range apps {
			name, _ := app["name"].(string)
			if name == "" {
				name = "default"
			}
			if _, ok := app["import_path"].(string); !ok {
				http.Error(w, fmt.Sprintf("applications -> %d -> import_path\n  field required", i), http.StatusBadRequest)
				return
			}
			if _, dup := next[name]; dup {
				http.Error(w, "application names must be unique", http.StatusBadRequest)
				return
			}
			next[name] = app
		}
		for name := range d.apps {
			if _, kept := next[name]; !kept {
				delete(d.status, name)
				delete(d.source, name)
			}
		}
		for name := range next {
			if _, had := d.apps[name]; !had {
				d.status[name] = "RUNNING"
				d.source[name] = "declarative"
			}
		}
		d.apps = next
		d.puts++
		w.WriteHeader(http.StatusOK)
	case http.MethodDelete:
		d.apps, d.status, d.source = map[string]map[string]any{}, map[string]string{}, map[string]string{}
		w.WriteHeader(http.StatusOK)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (d *Dashboard) jobsCollection(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, "Failed to parse request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		// Ray requires the field but accepts an empty command.
		entrypoint, ok := req["entrypoint"].(string)
		if !ok {
			http.Error(w, "TypeError: __init__() missing 1 required positional argument: 'entrypoint'", http.StatusBadRequest)
			return
		}
		id, _ := req["submission_id"].(string)
		if id == "" {
			id = fmt.Sprintf("raysubmit_%06d", len(d.jobs)+1)
		}
		if _, dup := d.jobs[id]; dup {
			http.Error(w, fmt.Sprintf("Traceback (most recent call last):\nValueError: Job with submission_id %s already exists. Please use a different submission_id.", id), http.StatusInternalServerError)
			return
		}
		jobID := fmt.Sprintf("%02x000000", len(d.jobs)+1)
		d.jobs[id] = &fakeJob{details: map[string]any{
			"type": "SUBMISSION", "entrypoint": entrypoint, "job_id": jobID, "submission_id": id,
			"status": "PENDING", "message": "Job has not started yet.", "error_type": nil,
			"start_time": 1694042836190, "end_time": nil, "metadata": req["metadata"], "runtime_env": req["runtime_env"],
			"driver_info": nil,
		}}
		d.order = append(d.order, id)
		writeJSON(w, 200, map[string]string{"job_id": jobID, "submission_id": id})
	case http.MethodGet:
		out := []any{}
		for _, id := range d.order {
			if j, ok := d.jobs[id]; ok {
				out = append(out, j.details)
			}
		}
		writeJSON(w, 200, out)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func (d *Dashboard) job(w http.ResponseWriter, r *http.Request, rest string) {
	id, action, _ := strings.Cut(rest, "/")
	j, ok := d.jobs[id]
	if !ok {
		http.Error(w, fmt.Sprintf("Job %s does not exist", id), http.StatusNotFound)
		return
	}
	terminal := func() bool {
		s := j.details["status"]
		return s == "STOPPED" || s == "SUCCEEDED" || s == "FAILED"
	}
	switch {
	case action == "" && r.Method == http.MethodGet:
		writeJSON(w, 200, j.details)
	case action == "logs" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]string{"logs": j.logs})
	case action == "stop" && r.Method == http.MethodPost:
		if terminal() {
			writeJSON(w, 200, map[string]bool{"stopped": false})
			return
		}
		j.details["status"] = "STOPPED"
		writeJSON(w, 200, map[string]bool{"stopped": true})
	case action == "" && r.Method == http.MethodDelete:
		if !terminal() {
			http.Error(w, fmt.Sprintf("Attempted to delete job with submission_id %s, but it is in a non-terminal state %s.", id, j.details["status"]), http.StatusInternalServerError)
			return
		}
		delete(d.jobs, id)
		writeJSON(w, 200, map[string]bool{"deleted": true})
	default:
		http.NotFound(w, r)
	}
}
