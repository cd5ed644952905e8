package kubetorch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/crd/v1alpha1"
	"gridweave.dev/internal/randhex"
	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/dashboard"
)

// Errors a Trainer returns beside the dashboard's (*DashboardError), the
// Kubernetes API's and rayctl's.
var (
	// ErrNoDashboard: the Trainer has no dashboard to train through.
	ErrNoDashboard = errors.New("kubetorch: no Ray dashboard")
	// ErrNoGPUWorkers: the cluster has no ready GPU worker, and the
	// request did not say how many to use.
	ErrNoGPUWorkers = errors.New("kubetorch: no ready GPU workers")
	// ErrNoJobRecord: jobs cannot be read without Trainer.Jobs.
	ErrNoJobRecord = errors.New("kubetorch: no GridweaveJob client")
)

// A FieldError is a training request with a field that is missing or
// wrong.
type FieldError struct{ Field, Problem string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// A DashboardError is the Ray dashboard's failure to answer a call made
// with Timeout.
type DashboardError struct {
	Err     error
	Timeout time.Duration
}

func (e *DashboardError) Error() string { return "the Ray dashboard: " + e.Err.Error() }
func (e *DashboardError) Unwrap() error { return e.Err }

// Trainer trains on a RayCluster's GPU workers: the user's command runs
// on every GPU under Ray Train's torch backend, from a bundle (Store)
// sent to the cluster as a package, submitted as a Ray job through the
// dashboard and recorded as a GridweaveJob whose status follows the Ray
// job (FollowJobs).
type Trainer struct {
	// Bundles holds the code bundles. Required.
	Bundles *Store
	// Ray lists a cluster's worker groups. Required.
	Ray *rayctl.Client
	// Namespace holds the RayClusters.
	Namespace string
	// DashboardURL is the Ray head's dashboard; "" leaves training off
	// (ErrNoDashboard).
	DashboardURL string
	// Timeout bounds each dashboard call (an upload gets more by its
	// size). Default 15 s.
	Timeout time.Duration
	// Jobs records the trainings; nil records none, and Job and
	// FollowJobs then have nothing to read.
	Jobs *Jobs
	// Logger: submissions, and statuses that did not follow. Default
	// discards.
	Logger *slog.Logger
}

func (t *Trainer) timeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return 15 * time.Second
}

func (t *Trainer) log() *slog.Logger {
	if t.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return t.Logger
}

// Dashboard is a client of the dashboard, each call bounded by Timeout.
func (t *Trainer) Dashboard() (*dashboard.Client, error) {
	if t.DashboardURL == "" {
		return nil, ErrNoDashboard
	}
	return dashboard.New(t.DashboardURL, &dashboard.Options{HTTPClient: &http.Client{Timeout: t.timeout()}})
}

// The bounds of a training's request: a fleet's machines and a machine's
// GPUs, well beyond any real one, and the owner's length the job's
// record (GridweaveJob spec.owner) holds.
const (
	MaxTrainNodes  = 1 << 16
	MaxGPUsPerNode = 1 << 10
	maxOwnerLength = 253
)

// Train starts a training: req.Command on req.Nodes × req.GPUsPerNode
// GPU workers of req.Cluster (by default all its ready ones), from the
// bundle req.Bundle, for req.Owner. It answers once Ray accepted the job.
func (t *Trainer) Train(ctx context.Context, req api.TrainRequest) (api.TrainResponse, error) {
	switch {
	case req.Cluster == "":
		return api.TrainResponse{}, &FieldError{"cluster", "cluster is required: the RayCluster whose GPU workers train"}
	case len(req.Bundle) != 64 || strings.Trim(req.Bundle, "0123456789abcdef") != "":
		return api.TrainResponse{}, &FieldError{"bundle", "bundle must be the id POST /v1/kubetorch/sync answered (64 hex digits)"}
	case strings.TrimSpace(req.Command) == "":
		return api.TrainResponse{}, &FieldError{"command", "command is required, e.g. python train.py --epochs 3"}
	case len(validation.IsDNS1123Label(req.Cluster)) > 0:
		return api.TrainResponse{}, &FieldError{"cluster", fmt.Sprintf("%q is not a valid RayCluster name: %s", req.Cluster, validation.IsDNS1123Label(req.Cluster)[0])}
	case req.Nodes < 0 || req.Nodes > MaxTrainNodes:
		return api.TrainResponse{}, &FieldError{"nodes", fmt.Sprintf("nodes must be from 0 (every ready GPU worker) to %d, got %d", MaxTrainNodes, req.Nodes)}
	case req.GPUsPerNode < 0 || req.GPUsPerNode > MaxGPUsPerNode:
		return api.TrainResponse{}, &FieldError{"gpus_per_node", fmt.Sprintf("gpus_per_node must be from 0 (each worker's) to %d, got %d", MaxGPUsPerNode, req.GPUsPerNode)}
	case utf8.RuneCountInString(req.Owner) > maxOwnerLength:
		return api.TrainResponse{}, &FieldError{"owner", fmt.Sprintf("owner must be at most %d characters, got %d", maxOwnerLength, utf8.RuneCountInString(req.Owner))}
	}
	if f, err := t.Bundles.Open(req.Bundle); err != nil {
		return api.TrainResponse{}, &FieldError{"bundle", fmt.Sprintf("no bundle %s: sync it first", req.Bundle)}
	} else {
		f.Close()
	}
	nodes, perNode, err := t.gpuWorkers(ctx, req.Cluster)
	if err != nil {
		return api.TrainResponse{}, err
	}
	if req.Nodes > 0 {
		nodes = req.Nodes
	}
	if req.GPUsPerNode > 0 {
		perNode = req.GPUsPerNode
	}
	if nodes == 0 || perNode == 0 {
		return api.TrainResponse{}, fmt.Errorf("%w: RayCluster %s has none; wait for them or give nodes and gpus_per_node", ErrNoGPUWorkers, req.Cluster)
	}
	d, err := t.Dashboard()
	if err != nil {
		return api.TrainResponse{}, err
	}
	id := "kubetorch-" + randhex.String(6)
	entry := fmt.Sprintf("python -c %s %d %d %s", shellWord(trainScript), nodes, perNode, shellWord(req.Command))
	pkg, err := t.SendBundle(ctx, d, req.Bundle)
	if err != nil {
		return api.TrainResponse{}, err
	}
	// From the submission on, the job may run: what follows does not
	// end with the caller's request, so that the job is recorded or
	// stopped, never left running unlisted.
	submitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.timeout())
	defer cancel()
	runtimeEnv := map[string]any{"working_dir": pkg, "env_vars": req.Env}
	if _, err := d.SubmitJob(submitCtx, dashboard.SubmitRequest{Entrypoint: entry, SubmissionID: id, RuntimeEnv: runtimeEnv,
		Metadata: map[string]string{"owner": req.Owner, "gridweave": "kubetorch"}}); err != nil {
		// An answer lost after Ray took the job leaves it running:
		// it is stopped by its id (Ray's own refusal took nothing).
		var refused *dashboard.APIError
		if !errors.As(err, &refused) {
			t.stopUnrecorded(ctx, d, id)
		}
		return api.TrainResponse{}, &DashboardError{err, t.timeout()}
	}
	if t.Jobs != nil {
		env, err := json.Marshal(runtimeEnv)
		if err != nil {
			return api.TrainResponse{}, err
		}
		job := &v1alpha1.GridweaveJob{
			ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: t.Namespace, Labels: map[string]string{Label: "true"}},
			Spec: v1alpha1.GridweaveJobSpec{Owner: req.Owner, Cluster: req.Cluster, Entrypoint: entry, SubmissionID: id,
				RuntimeEnv: &runtime.RawExtension{Raw: env}, Resources: &v1alpha1.JobResources{Workers: int32(nodes)}},
		}
		// The job runs from here on: it is recorded also when the
		// caller stops waiting, and stopped when it cannot be recorded,
		// so that no job runs that the jobs list does not show.
		recordCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.timeout())
		defer cancel()
		if _, err := t.Jobs.Create(recordCtx, job); err != nil {
			t.stopUnrecorded(ctx, d, id)
			return api.TrainResponse{}, err
		}
	}
	t.log().InfoContext(ctx, "kubetorch job submitted", "id", id, "owner", req.Owner, "cluster", req.Cluster, "nodes", nodes, "gpus_per_node", perNode)
	return api.TrainResponse{ID: id, SubmissionID: id, Owner: req.Owner, Nodes: nodes, GPUsPerNode: perNode, Entrypoint: entry}, nil
}

// stopUnrecorded stops the Ray job id that Train could not record (or
// whose submission's answer it lost), with a time of its own.
func (t *Trainer) stopUnrecorded(ctx context.Context, d *dashboard.Client, id string) {
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.timeout())
	defer cancel()
	if _, err := d.StopJob(stopCtx, id); err != nil {
		t.log().ErrorContext(ctx, "stopping a kubetorch job that is not recorded", "id", id, "err", err)
	}
}

// gpuWorkers counts a cluster's ready GPU worker pods and the GPUs of
// each (the fewest, when groups differ).
func (t *Trainer) gpuWorkers(ctx context.Context, cluster string) (nodes, perNode int, err error) {
	groups, err := t.Ray.ListWorkerGroups(ctx, t.Namespace, cluster)
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

// ErrPackageTooLarge: a bundle larger as a Ray package than Ray holds.
var ErrPackageTooLarge = errors.New("kubetorch: the bundle is larger than a Ray package may be")

// rayMaxPackage is the largest package Ray 2.54's GCS holds (its
// GCS_STORAGE_MAX_SIZE, 512 MiB); a larger one is refused with a 500.
const rayMaxPackage = 512 << 20

// SendBundle makes bundle id a package of d's Ray cluster, sent once
// (content-addressed), and returns its URI for runtime_env.working_dir.
// Ray takes http(s) working dirs only over HTTPS it can verify, which the
// master's internal listener is not; a package the cluster holds is
// fetched by every node from Ray itself, as `ray job submit
// --working-dir` does.
func (t *Trainer) SendBundle(ctx context.Context, d *dashboard.Client, id string) (string, error) {
	uri := PackageURI(id)
	held, err := d.PackageExists(ctx, uri)
	if err != nil {
		return "", &DashboardError{err, t.timeout()}
	}
	if held {
		return uri, nil
	}
	f, err := t.Bundles.Open(id)
	if err != nil {
		return "", &FieldError{"bundle", fmt.Sprintf("no bundle %s: sync it first", id)}
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
		err := t.Bundles.WritePackage(id, limited)
		pw.CloseWithError(err)
		written <- err
	}()
	// The upload gets time by its size (at least 10 MB/s) beyond the
	// bound of an ordinary dashboard call, and finishes even if the caller
	// goes (the package is content-addressed: a retry finds it).
	upload, err := dashboard.New(t.DashboardURL, &dashboard.Options{HTTPClient: &http.Client{Timeout: t.timeout() + time.Duration(fi.Size()/(10<<20))*time.Second}})
	if err != nil {
		pr.Close()
		<-written
		return "", err
	}
	uploadErr := upload.UploadPackageFrom(context.WithoutCancel(ctx), uri, pr)
	pr.CloseWithError(io.ErrClosedPipe) // the writer stops if the upload ended first
	writeErr := <-written
	switch {
	case errors.Is(writeErr, ErrPackageTooLarge):
		return "", &FieldError{"bundle", fmt.Sprintf("bundle %s is larger than %d bytes as a Ray package, the most Ray holds: sync a smaller bundle (keep data out of it)", id, rayMaxPackage)}
	case writeErr != nil && !errors.Is(writeErr, io.ErrClosedPipe):
		return "", writeErr
	case uploadErr != nil:
		return "", &DashboardError{uploadErr, t.timeout()}
	}
	return uri, nil
}

// capWriter passes at most max bytes to w, then fails with
// ErrPackageTooLarge.
type capWriter struct {
	w       io.Writer
	max, at int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	if c.at+int64(len(p)) >= c.max {
		return 0, ErrPackageTooLarge
	}
	n, err := c.w.Write(p)
	c.at += int64(n)
	return n, err
}

// Health says whether a cluster can train: the dashboard reachable, and
// the GPU workers of each group ready.
func (t *Trainer) Health(ctx context.Context, cluster string) (api.KubeTorchHealth, error) {
	out := api.KubeTorchHealth{Cluster: cluster, Healthy: true, GPUGroups: []api.GPUGroupHealth{}}
	if d, err := t.Dashboard(); err != nil {
		out.Dashboard.Error = err.Error()
		out.Healthy = false
	} else {
		vctx, cancel := context.WithTimeout(ctx, t.timeout())
		v, err := d.Version(vctx)
		cancel()
		if err != nil {
			out.Dashboard.Error = (&DashboardError{err, t.timeout()}).Error()
			out.Healthy = false
		} else {
			out.Dashboard.Reachable, out.Dashboard.RayVersion = true, v.RayVersion
		}
	}
	groups, err := t.Ray.ListWorkerGroups(ctx, t.Namespace, cluster)
	if err != nil {
		return api.KubeTorchHealth{}, err
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
	return out, nil
}

// jobPhases maps Ray's job statuses onto GridweaveJob phases.
var jobPhases = map[string]string{"PENDING": v1alpha1.JobPending, "RUNNING": v1alpha1.JobRunning, "SUCCEEDED": v1alpha1.JobSucceeded,
	"FAILED": v1alpha1.JobFailed, "STOPPED": v1alpha1.JobStopped}

// Job is a training's status and its last log lines, the GridweaveJob's
// status brought in step with the Ray job's; visible says whether the
// caller may see a job of that owner (others are ErrJobNotFound).
func (t *Trainer) Job(ctx context.Context, id string, visible func(owner string) bool) (api.KubeTorchJob, error) {
	if len(validation.IsDNS1123Subdomain(id)) > 0 {
		return api.KubeTorchJob{}, fmt.Errorf("%w: %q", ErrJobNotFound, id) // no job is named so
	}
	if t.Jobs == nil {
		return api.KubeTorchJob{}, ErrNoJobRecord
	}
	job, err := t.Jobs.Get(ctx, id)
	if err != nil {
		return api.KubeTorchJob{}, err
	}
	if !visible(job.Spec.Owner) {
		return api.KubeTorchJob{}, fmt.Errorf("%w: %s", ErrJobNotFound, id)
	}
	d, err := t.Dashboard()
	if err != nil {
		return api.KubeTorchJob{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, t.timeout())
	defer cancel()
	details, err := t.follow(ctx, d, job)
	if err != nil {
		return api.KubeTorchJob{}, &DashboardError{err, t.timeout()}
	}
	logs, err := d.JobLogs(ctx, job.Spec.SubmissionID)
	if err != nil {
		return api.KubeTorchJob{}, &DashboardError{err, t.timeout()}
	}
	lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	if len(lines) == 1 && lines[0] == "" {
		lines = []string{}
	}
	message := ""
	if details.Message != nil {
		message = *details.Message
	}
	return api.KubeTorchJob{ID: job.Name, Owner: job.Spec.Owner, Status: string(details.Status), Phase: jobPhases[details.Status], Message: message, Logs: lines}, nil
}

// follow reads a GridweaveJob's Ray job from the dashboard and brings
// the GridweaveJob's status in step with it.
func (t *Trainer) follow(ctx context.Context, d *dashboard.Client, job *v1alpha1.GridweaveJob) (dashboard.JobDetails, error) {
	details, err := d.GetJob(ctx, job.Spec.SubmissionID)
	if err != nil {
		return details, err
	}
	phase := jobPhases[details.Status]
	if phase == "" {
		return details, nil
	}
	status := v1alpha1.GridweaveJobStatus{Phase: phase}
	if details.Message != nil {
		status.Message = *details.Message
	}
	if details.StartTime != nil {
		at := metav1.NewTime(time.UnixMilli(*details.StartTime).UTC())
		status.StartTime = &at
	}
	if details.EndTime != nil {
		at := metav1.NewTime(time.UnixMilli(*details.EndTime).UTC())
		status.EndTime = &at
	}
	if job.Status.Phase == status.Phase && job.Status.Message == status.Message {
		return details, nil
	}
	if err := t.Jobs.SetStatus(ctx, job.Name, status); err != nil {
		t.log().WarnContext(ctx, "kubetorch: the GridweaveJob's status did not follow the Ray job", "id", job.Name, "err", err)
	}
	return details, nil
}

// FollowJobs brings every unfinished training's GridweaveJob status in
// step with its Ray job; it returns how many it read. Without a
// dashboard or a job client there is nothing to follow.
func (t *Trainer) FollowJobs(ctx context.Context) (int, error) {
	if t.Jobs == nil || t.DashboardURL == "" {
		return 0, nil
	}
	d, err := t.Dashboard()
	if err != nil {
		return 0, err
	}
	jobs, err := t.Jobs.List(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for i := range jobs {
		switch jobs[i].Status.Phase {
		case v1alpha1.JobSucceeded, v1alpha1.JobFailed, v1alpha1.JobStopped:
			continue
		}
		fctx, cancel := context.WithTimeout(ctx, t.timeout())
		_, err := t.follow(fctx, d, &jobs[i])
		cancel()
		if err != nil {
			return n, &DashboardError{err, t.timeout()}
		}
		n++
	}
	return n, nil
}

// shellWord quotes s for sh.
func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
