package gridweave

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/crd/v1alpha1"
	"gridweave.dev/gridweave/kubetorch"
	"gridweave.dev/internal/randhex"
	"gridweave.dev/rayctl/dashboard"
)

// KubeTorch (/v1/kubetorch): sync a code bundle, train on a cluster's GPU
// workers (a Ray job through the dashboard, recorded as a GridweaveJob),
// report health and a job's status.

const kubetorchSyncPath = "/v1/kubetorch/sync"

func (s *Server) bundles() *kubetorch.Store {
	return &kubetorch.Store{Dir: s.cfg.KubeTorchDir, Limits: kubetorch.Limits{MaxUpload: s.cfg.KubeTorchMaxBundle,
		MaxExpanded: s.cfg.KubeTorchMaxExpanded, MaxEntries: s.cfg.KubeTorchMaxEntries, MaxRatio: int64(s.cfg.KubeTorchMaxRatio)}}
}

// bundleURL is where Ray workers fetch bundle id.
func (s *Server) bundleURL(id string) string {
	base := s.cfg.KubeTorchBaseURL
	if base == "" {
		base = s.cfg.VPNURL
	}
	if base == "" {
		base = "http://" + net.JoinHostPort(s.cfg.MasterVPNIP.String(), strconv.Itoa(s.cfg.VPNHTTPPort))
	}
	return base + "/v1/kubetorch/bundles/" + id + ".zip"
}

// sendBundle makes the bundle a package of the Ray cluster, sent once
// (content-addressed), and returns its URI for runtime_env.working_dir.
// Ray takes http(s) working dirs only over HTTPS it can verify, which the
// master's internal listener is not; a package the cluster holds is
// fetched by every node from Ray itself, as `ray job submit
// --working-dir` does.
func (s *Server) sendBundle(ctx context.Context, d *dashboard.Client, id string) (string, error) {
	uri := kubetorch.PackageURI(id)
	held, err := d.PackageExists(ctx, uri)
	if err != nil {
		return "", s.dashboardError(err)
	}
	if held {
		return uri, nil
	}
	f, err := s.bundles().Open(id)
	if err != nil {
		return "", badField("bundle", "no bundle %s: sync it first", id)
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return "", err
	}
	// The package streams from the bundle to Ray, never whole in memory;
	// past Ray's limit the upload stops and the answer names the bundle.
	pr, pw := io.Pipe()
	limited := &capWriter{w: pw, max: rayMaxPackage}
	written := make(chan error, 1)
	go func() {
		err := s.bundles().WritePackage(id, limited)
		pw.CloseWithError(err)
		written <- err
	}()
	// The upload gets time by its size (at least 10 MB/s) beyond the
	// bound of an ordinary dashboard call, and finishes even if the caller
	// goes (the package is content-addressed: a retry finds it).
	upload, err := dashboard.New(s.cfg.RayDashboardURL, &dashboard.Options{HTTPClient: &http.Client{Timeout: s.rayTimeout() + time.Duration(fi.Size()/(10<<20))*time.Second}})
	if err != nil {
		pr.Close()
		<-written
		return "", err
	}
	uploadErr := upload.UploadPackageFrom(context.WithoutCancel(ctx), uri, pr)
	pr.CloseWithError(io.ErrClosedPipe) // the writer stops if the upload ended first
	writeErr := <-written
	switch {
	case errors.Is(writeErr, errPackageTooLarge):
		return "", badField("bundle", "bundle %s is larger than %d bytes as a Ray package, the most Ray holds: sync a smaller bundle (keep data out of it)", id, rayMaxPackage)
	case writeErr != nil && !errors.Is(writeErr, io.ErrClosedPipe):
		return "", writeErr
	case uploadErr != nil:
		return "", s.dashboardError(uploadErr)
	}
	return uri, nil
}

var errPackageTooLarge = errors.New("package too large for Ray")

// capWriter passes at most max bytes to w, then fails with
// errPackageTooLarge.
type capWriter struct {
	w       io.Writer
	max, at int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.at+int64(len(p)) >= c.max {
		return 0, errPackageTooLarge
	}
	n, err := c.w.Write(p)
	c.at += int64(n)
	return n, err
}

// rayMaxPackage is the largest package Ray 2.54's GCS holds (its
// GCS_STORAGE_MAX_SIZE, 512 MiB); a larger one is refused with a 500.
const rayMaxPackage = 512 << 20

// uploadFormat is the bundle's format from a content type or file name.
func uploadFormat(contentType, filename string) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	switch {
	case mt == "application/gzip" || mt == "application/x-gzip" || mt == "application/x-tar+gzip" ||
		strings.HasSuffix(filename, ".tar.gz") || strings.HasSuffix(filename, ".tgz"):
		return kubetorch.FormatTarGz
	case mt == "application/zip" || mt == "application/x-zip-compressed" || strings.HasSuffix(filename, ".zip"):
		return kubetorch.FormatZip
	}
	return ""
}

func (s *Server) handleSync(w http.ResponseWriter, r *http.Request) {
	body, format := io.Reader(r.Body), ""
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		mr, err := r.MultipartReader()
		if err != nil {
			s.writeError(w, r, badField("bundle", "a multipart body that cannot be read: %v", err))
			return
		}
		for {
			part, err := mr.NextPart()
			if err != nil {
				s.writeError(w, r, badField("bundle", "the multipart body has no field \"bundle\""))
				return
			}
			if part.FormName() == "bundle" {
				body, format = part, uploadFormat(part.Header.Get("Content-Type"), part.FileName())
				break
			}
		}
	} else {
		format = uploadFormat(r.Header.Get("Content-Type"), "")
	}
	if format == "" {
		// application/octet-stream, or nothing said: the first bytes tell.
		var sniffed []byte
		body, sniffed = peek(body, 4)
		switch {
		case bytes.HasPrefix(sniffed, []byte{0x1f, 0x8b}):
			format = kubetorch.FormatTarGz
		case bytes.HasPrefix(sniffed, []byte("PK\x03\x04")), bytes.HasPrefix(sniffed, []byte("PK\x05\x06")):
			format = kubetorch.FormatZip
		}
	}
	if format == "" {
		s.writeError(w, r, &apiError{code: api.CodeUnsupportedMediaType,
			message: "send the bundle as application/gzip (a tar.gz), application/zip, or the multipart field \"bundle\""})
		return
	}
	b, err := s.bundles().Put(body, format)
	var ee *kubetorch.EntryError
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		s.writeError(w, r, &apiError{code: api.CodeInvalidBundle, field: "bundle", message: err.Error()})
		return
	case errors.Is(err, kubetorch.ErrTooLarge), errors.As(err, &tooBig):
		s.writeError(w, r, &apiError{code: api.CodeBodyTooLarge, message: fmt.Sprintf("the bundle is larger than KUBETORCH_MAX_BUNDLE_BYTES (%d)", s.cfg.KubeTorchMaxBundle)})
		return
	default:
		s.writeError(w, r, err)
		return
	}
	// The id is the bundle's address: the log keeps a prefix to match.
	s.log.InfoContext(r.Context(), "bundle synced", "id_prefix", b.ID[:12], "size", b.Size, "files", b.Files)
	writeJSON(w, http.StatusCreated, api.BundleSynced{ID: b.ID, URL: s.bundleURL(b.ID), Size: b.Size, Files: b.Files})
}

// peek returns the first n bytes of r and a reader of all of r.
func peek(r io.Reader, n int) (io.Reader, []byte) {
	head := make([]byte, n)
	got, _ := io.ReadFull(r, head)
	head = head[:got]
	return io.MultiReader(bytes.NewReader(head), r), head
}

// handleBundle serves a bundle's zip at its unguessable URL.
func (s *Server) handleBundle(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutSuffix(r.PathValue("file"), ".zip")
	f, err := s.bundles().Open(id)
	if !ok || err != nil {
		s.writeError(w, r, &apiError{code: api.CodeNotFound, message: "no such bundle"})
		return
	}
	defer f.Close()
	fi, _ := f.Stat()
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	http.ServeContent(w, r, id+".zip", fi.ModTime(), f)
}

// trainScript runs the user's command on every GPU worker under Ray
// Train's torch backend (which sets MASTER_ADDR, MASTER_PORT, RANK,
// WORLD_SIZE and LOCAL_RANK, as torchrun does): one Ray Train worker per
// GPU, nodes x GPUs per node of them.
//
// Two things make a user's own torch.distributed.init_process_group work
// inside it. Ray Train's process group already holds MASTER_PORT on rank
// 0 (its TCPStore listens there), so rank 0 picks a free port and sends
// it to the others over that group, and the command's ranks meet there.
// And Ray Train's backend for GPU workers is NCCL, which needs CUDA:
// where the GPUs Ray was told about have no CUDA (a node that declares
// GPUs it cannot drive), the backend is gloo, so training runs instead of
// failing in NCCL's setup. The command runs in the bundle's directory:
// Ray Train would otherwise move each worker into its run's storage
// directory first (RAY_CHDIR_TO_TRIAL_DIR=0 keeps the working_dir).
const trainScript = `import os, socket, subprocess, sys
import ray
from ray.train import ScalingConfig
from ray.train.torch import TorchConfig, TorchTrainer
nodes, per_node, command = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
os.environ.setdefault("RAY_CHDIR_TO_TRIAL_DIR", "0")
@ray.remote(num_gpus=1)
def cuda_available():
    import torch
    return torch.cuda.is_available()
backend = "nccl" if ray.get(cuda_available.remote()) else "gloo"
print(f"kubetorch: {nodes * per_node} workers, torch.distributed backend {backend}", flush=True)
def run(_):
    import ray.train, torch.distributed as dist
    ctx = ray.train.get_context()
    port = [0]
    if ctx.get_world_rank() == 0:
        with socket.socket() as s:
            s.bind(("", 0))
            port[0] = s.getsockname()[1]
    dist.broadcast_object_list(port, src=0)
    env = dict(os.environ, MASTER_PORT=str(port[0]), RANK=str(ctx.get_world_rank()), WORLD_SIZE=str(ctx.get_world_size()), LOCAL_RANK=str(ctx.get_local_rank()), LOCAL_WORLD_SIZE=str(ctx.get_local_world_size()), NODE_RANK=str(ctx.get_node_rank()))
    subprocess.run(command, shell=True, check=True, env=env)
TorchTrainer(run, torch_config=TorchConfig(backend=backend), scaling_config=ScalingConfig(num_workers=nodes * per_node, use_gpu=True, resources_per_worker={"GPU": 1})).fit()
`

func (s *Server) handleTrain(w http.ResponseWriter, r *http.Request) {
	var req api.TrainRequest
	err := decodeJSON(r, &req)
	switch {
	case err != nil:
	case req.Cluster == "":
		err = badField("cluster", "cluster is required: the RayCluster whose GPU workers train")
	case len(req.Bundle) != 64 || strings.Trim(req.Bundle, "0123456789abcdef") != "":
		err = badField("bundle", "bundle must be the id POST /v1/kubetorch/sync answered (64 hex digits)")
	case strings.TrimSpace(req.Command) == "":
		err = badField("command", "command is required, e.g. python train.py --epochs 3")
	case req.Nodes < 0 || req.GPUsPerNode < 0:
		err = badField("nodes", "nodes and gpus_per_node must not be negative")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if f, err := s.bundles().Open(req.Bundle); err != nil {
		s.writeError(w, r, badField("bundle", "no bundle %s: sync it first", req.Bundle))
		return
	} else {
		f.Close()
	}
	if req.Owner == "" {
		p, _ := PrincipalFrom(r.Context())
		req.Owner = p.Subject
	}
	nodes, perNode, err := s.gpuWorkers(r.Context(), req.Cluster)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Nodes > 0 {
		nodes = req.Nodes
	}
	if req.GPUsPerNode > 0 {
		perNode = req.GPUsPerNode
	}
	if nodes == 0 || perNode == 0 {
		s.writeError(w, r, &apiError{code: api.CodeNoGPUWorkers, message: "RayCluster " + req.Cluster + " has no ready GPU workers; wait for them or give nodes and gpus_per_node"})
		return
	}
	d, err := s.dashboardClient()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := "kubetorch-" + randhex.String(6)
	entry := fmt.Sprintf("python -c %s %d %d %s", shellWord(trainScript), nodes, perNode, shellWord(req.Command))
	pkg, err := s.sendBundle(r.Context(), d, req.Bundle)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.rayTimeout())
	defer cancel()
	runtimeEnv := map[string]any{"working_dir": pkg, "env_vars": req.Env}
	if _, err := d.SubmitJob(ctx, dashboard.SubmitRequest{Entrypoint: entry, SubmissionID: id, RuntimeEnv: runtimeEnv,
		Metadata: map[string]string{"owner": req.Owner, "gridweave": "kubetorch"}}); err != nil {
		s.writeError(w, r, s.dashboardError(err))
		return
	}
	if s.dynamic != nil {
		env, _ := json.Marshal(runtimeEnv)
		var envObj map[string]any
		_ = json.Unmarshal(env, &envObj)
		job := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(), "kind": "GridweaveJob",
			"metadata": map[string]any{"name": id, "namespace": s.cfg.Namespace, "labels": map[string]any{"gridweave.dev/kubetorch": "true"}},
			"spec": map[string]any{"owner": req.Owner, "cluster": req.Cluster, "entrypoint": entry, "submissionId": id, "runtimeEnv": envObj,
				"resources": map[string]any{"workers": int64(nodes)}},
		}}
		if _, err := s.dynamic.Resource(jobKind.gvr).Namespace(s.cfg.Namespace).Create(r.Context(), job, metav1.CreateOptions{FieldManager: "gridweave"}); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	s.log.InfoContext(r.Context(), "kubetorch job submitted", "id", id, "owner", req.Owner, "cluster", req.Cluster, "nodes", nodes, "gpus_per_node", perNode)
	writeJSON(w, http.StatusCreated, api.TrainResponse{ID: id, SubmissionID: id, Owner: req.Owner, Nodes: nodes, GPUsPerNode: perNode, Entrypoint: entry})
}

// gpuWorkers counts a cluster's ready GPU worker pods and the GPUs of
// each (the fewest, when groups differ).
func (s *Server) gpuWorkers(ctx context.Context, cluster string) (nodes, perNode int, err error) {
	groups, err := s.ray.ListWorkerGroups(ctx, s.cfg.Namespace, cluster)
	if err != nil {
		return 0, 0, err
	}
	for _, g := range groups {
		if g.GPUsPerPod <= 0 || g.Ready == 0 {
			continue
		}
		nodes += g.Ready
		if perNode == 0 || int(g.GPUsPerPod) < perNode {
			perNode = int(g.GPUsPerPod)
		}
	}
	return nodes, perNode, nil
}

// handleKubeTorchHealth: the dashboard reachable, the GPU workers of a
// cluster ready, per group.
func (s *Server) handleKubeTorchHealth(w http.ResponseWriter, r *http.Request) {
	cluster := r.URL.Query().Get("cluster")
	if cluster == "" {
		s.writeError(w, r, badField("cluster", "cluster is required: ?cluster=<RayCluster>"))
		return
	}
	out := api.KubeTorchHealth{Cluster: cluster, Healthy: true, GPUGroups: []api.GPUGroupHealth{}}
	if d, err := s.dashboardClient(); err != nil {
		out.Dashboard.Error = err.Error()
		out.Healthy = false
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), s.rayTimeout())
		v, err := d.Version(ctx)
		cancel()
		if err != nil {
			out.Dashboard.Error = toAPIError(s.dashboardError(err)).Error()
			out.Healthy = false
		} else {
			out.Dashboard.Reachable, out.Dashboard.RayVersion = true, v.RayVersion
		}
	}
	groups, err := s.ray.ListWorkerGroups(r.Context(), s.cfg.Namespace, cluster)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, g := range groups {
		if g.GPUsPerPod <= 0 {
			continue
		}
		out.GPUGroups = append(out.GPUGroups, api.GPUGroupHealth{Group: g.Name, GPUsPerPod: g.GPUsPerPod, Pods: g.Pods, Ready: g.Ready, Replicas: g.Replicas})
		out.Healthy = out.Healthy && g.Ready > 0 && g.Ready == g.Pods
	}
	if len(out.GPUGroups) == 0 {
		out.Healthy = false
	}
	writeJSON(w, http.StatusOK, out)
}

// jobPhases maps Ray's job statuses onto GridweaveJob phases.
var jobPhases = map[string]string{"PENDING": v1alpha1.JobPending, "RUNNING": v1alpha1.JobRunning, "SUCCEEDED": v1alpha1.JobSucceeded,
	"FAILED": v1alpha1.JobFailed, "STOPPED": v1alpha1.JobStopped}

// handleKubeTorchJob answers a job's status and last log lines; a user
// sees only their own jobs (others are 404). The GridweaveJob's status
// follows the Ray job's.
func (s *Server) handleKubeTorchJob(w http.ResponseWriter, r *http.Request) {
	ri, err := s.crdClient(jobKind)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	notFound := &apiError{code: api.CodeNotFound, message: "no KubeTorch job " + r.PathValue("id")}
	obj, err := ri.Get(r.Context(), r.PathValue("id"), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			s.writeError(w, r, notFound)
			return
		}
		s.writeError(w, r, err)
		return
	}
	owner, _, _ := unstructured.NestedString(obj.Object, "spec", "owner")
	submission, _, _ := unstructured.NestedString(obj.Object, "spec", "submissionId")
	if p, _ := PrincipalFrom(r.Context()); p.Role != RoleAdmin && p.Subject != owner {
		s.writeError(w, r, notFound)
		return
	}
	d, err := s.dashboardClient()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.rayTimeout())
	defer cancel()
	job, err := s.followJob(ctx, d, obj)
	if err != nil {
		s.writeError(w, r, s.dashboardError(err))
		return
	}
	logs, err := d.JobLogs(ctx, submission)
	if err != nil {
		s.writeError(w, r, s.dashboardError(err))
		return
	}
	lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	if len(lines) == 1 && lines[0] == "" {
		lines = []string{}
	}
	message := ""
	if job.Message != nil {
		message = *job.Message
	}
	phase := jobPhases[job.Status]
	writeJSON(w, http.StatusOK, api.KubeTorchJob{ID: obj.GetName(), Owner: owner, Status: string(job.Status), Phase: phase, Message: message, Logs: lines})
}

// followJob reads a GridweaveJob's Ray job from the dashboard and brings
// the GridweaveJob's status in step with it.
func (s *Server) followJob(ctx context.Context, d *dashboard.Client, obj *unstructured.Unstructured) (dashboard.JobDetails, error) {
	submission, _, _ := unstructured.NestedString(obj.Object, "spec", "submissionId")
	job, err := d.GetJob(ctx, submission)
	if err != nil {
		return job, err
	}
	phase := jobPhases[job.Status]
	if phase == "" {
		return job, nil
	}
	status := map[string]any{"phase": phase, "message": ""}
	if job.Message != nil {
		status["message"] = *job.Message
	}
	if job.StartTime != nil {
		status["startTime"] = time.UnixMilli(*job.StartTime).UTC().Format(time.RFC3339)
	}
	if job.EndTime != nil {
		status["endTime"] = time.UnixMilli(*job.EndTime).UTC().Format(time.RFC3339)
	}
	if old, _, _ := unstructured.NestedMap(obj.Object, "status"); old != nil && old["phase"] == status["phase"] && old["message"] == status["message"] {
		return job, nil
	}
	patch, _ := json.Marshal(map[string]any{"status": status})
	ri, err := s.crdClient(jobKind)
	if err != nil {
		return job, err
	}
	if _, err := ri.Patch(ctx, obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "gridweave"}, "status"); err != nil {
		s.log.WarnContext(ctx, "kubetorch: the GridweaveJob's status did not follow the Ray job", "id", obj.GetName(), "err", err)
	}
	return job, nil
}

// FollowKubeTorchJobs brings every unfinished KubeTorch GridweaveJob's
// status in step with its Ray job (Run calls it every
// KubeTorchSyncInterval); it returns how many it read.
func (s *Server) FollowKubeTorchJobs(ctx context.Context) (int, error) {
	if s.dynamic == nil || s.cfg.RayDashboardURL == "" {
		return 0, nil
	}
	d, err := s.dashboardClient()
	if err != nil {
		return 0, err
	}
	list, err := s.dynamic.Resource(jobKind.gvr).Namespace(s.cfg.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "gridweave.dev/kubetorch=true"})
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range list.Items {
		phase, _, _ := unstructured.NestedString(list.Items[i].Object, "status", "phase")
		if phase == v1alpha1.JobSucceeded || phase == v1alpha1.JobFailed || phase == v1alpha1.JobStopped {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.rayTimeout())
		_, err := s.followJob(cctx, d, &list.Items[i])
		cancel()
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// shellWord quotes s for sh.
func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
