package gridweave

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/kubetorch"
	"gridweave.dev/rayctl"
)

// KubeTorch (/v1/kubetorch): sync a code bundle, train on a cluster's GPU
// workers (a Ray job through the dashboard, recorded as a GridweaveJob),
// report health and a job's status.

const kubetorchSyncPath = "/v1/kubetorch/sync"

// kubetorchRoutes serve KubeTorch: its bundle store and trainer, made once
// from the configuration.
type kubetorchRoutes struct {
	responder
	cfg     *Config
	bundles *kubetorch.Store
	trainer *kubetorch.Trainer
}

func newKubetorchRoutes(a responder, cfg *Config, ray *rayctl.Client, dyn dynamic.Interface) *kubetorchRoutes {
	bundles := &kubetorch.Store{Dir: cfg.KubeTorchBundleDir(), Limits: kubetorch.Limits{MaxUpload: cfg.KubeTorchMaxBundle,
		MaxExpanded: cfg.KubeTorchMaxExpanded, MaxEntries: cfg.KubeTorchMaxEntries, MaxRatio: int64(cfg.KubeTorchMaxRatio)}}
	t := &kubetorch.Trainer{Bundles: bundles, Ray: ray, Namespace: cfg.Namespace, DashboardURL: cfg.RayDashboardURL,
		Timeout: rayTimeout(cfg), Logger: a.log}
	if dyn != nil {
		t.Jobs = kubetorch.NewJobs(dyn, cfg.Namespace)
	}
	return &kubetorchRoutes{responder: a, cfg: cfg, bundles: bundles, trainer: t}
}

// bundleURL is where Ray workers fetch bundle id.
func (k *kubetorchRoutes) bundleURL(id string) string {
	base := k.cfg.KubeTorchBaseURL
	if base == "" {
		base = k.cfg.VPNURL
	}
	if base == "" {
		base = "http://" + net.JoinHostPort(k.cfg.MasterVPNIP.String(), strconv.Itoa(k.cfg.VPNHTTPPort))
	}
	return base + "/v1/kubetorch/bundles/" + id + ".zip"
}

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

func (k *kubetorchRoutes) handleSync(w http.ResponseWriter, r *http.Request) {
	body, format := io.Reader(r.Body), ""
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "multipart/form-data" {
		mr, err := r.MultipartReader()
		if err != nil {
			k.writeError(w, r, badField("bundle", "a multipart body that cannot be read: %v", err))
			return
		}
		for {
			part, err := mr.NextPart()
			if err != nil {
				k.writeError(w, r, badField("bundle", "the multipart body has no field \"bundle\""))
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
		k.writeError(w, r, &apiError{code: api.CodeUnsupportedMediaType,
			message: "send the bundle as application/gzip (a tar.gz), application/zip, or the multipart field \"bundle\""})
		return
	}
	b, err := k.bundles.Put(body, format)
	var ee *kubetorch.EntryError
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		k.writeError(w, r, &apiError{code: api.CodeInvalidBundle, field: "bundle", message: err.Error()})
		return
	case errors.Is(err, kubetorch.ErrTooLarge), errors.As(err, &tooBig):
		k.writeError(w, r, &apiError{code: api.CodeBodyTooLarge, message: fmt.Sprintf("the bundle is larger than %s (%d bytes)", k.cfg.Name("KubeTorchMaxBundle"), k.cfg.KubeTorchMaxBundle)})
		return
	default:
		k.writeError(w, r, err)
		return
	}
	// The id is the bundle's address: the log keeps a prefix to match.
	k.log.InfoContext(r.Context(), "bundle synced", "id_prefix", b.ID[:12], "size", b.Size, "files", b.Files)
	writeJSON(w, http.StatusCreated, api.BundleSynced{ID: b.ID, URL: k.bundleURL(b.ID), Size: b.Size, Files: b.Files})
}

// peek returns the first n bytes of r and a reader of all of r.
func peek(r io.Reader, n int) (io.Reader, []byte) {
	head := make([]byte, n)
	got, _ := io.ReadFull(r, head)
	head = head[:got]
	return io.MultiReader(bytes.NewReader(head), r), head
}

// handleBundle serves a bundle's zip at its unguessable URL.
func (k *kubetorchRoutes) handleBundle(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutSuffix(r.PathValue("file"), ".zip")
	f, err := k.bundles.Open(id)
	if !ok || err != nil {
		k.writeError(w, r, &apiError{code: api.CodeNotFound, message: "no such bundle"})
		return
	}
	defer f.Close()
	fi, _ := f.Stat()
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	http.ServeContent(w, r, id+".zip", fi.ModTime(), f)
}

// FollowKubeTorchJobs brings every unfinished KubeTorch GridweaveJob's
// status in step with its Ray job (Run calls it every
// KubeTorchSyncInterval); it returns how many it read.
func (s *Server) FollowKubeTorchJobs(ctx context.Context) (int, error) {
	return s.kubetorch.trainer.FollowJobs(ctx)
}

func (k *kubetorchRoutes) train(r *http.Request, req api.TrainRequest) (api.TrainResponse, error) {
	if req.Owner == "" {
		p, _ := PrincipalFrom(r.Context())
		req.Owner = p.Subject
	}
	return k.trainer.Train(r.Context(), req)
}

// health: the dashboard reachable, the GPU workers of a cluster ready, per
// group.
func (k *kubetorchRoutes) health(r *http.Request, _ noBody) (api.KubeTorchHealth, error) {
	cluster := r.URL.Query().Get("cluster")
	if cluster == "" {
		return api.KubeTorchHealth{}, badField("cluster", "cluster is required: ?cluster=<RayCluster>")
	}
	if errs := validation.IsDNS1123Label(cluster); len(errs) > 0 {
		return api.KubeTorchHealth{}, badField("cluster", "%q is not a valid RayCluster name: %s", cluster, errs[0])
	}
	return k.trainer.Health(r.Context(), cluster)
}

// job answers a job's status and last log lines; a user sees only their
// own jobs (others are 404). The GridweaveJob's status follows the Ray
// job's.
func (k *kubetorchRoutes) job(r *http.Request, _ noBody) (api.KubeTorchJob, error) {
	p, _ := PrincipalFrom(r.Context())
	return k.trainer.Job(r.Context(), r.PathValue("id"), func(owner string) bool { return p.Role == RoleAdmin || p.Subject == owner })
}

// jobs lists the caller's KubeTorch jobs (an admin's:
// all), newest first.
func (k *kubetorchRoutes) jobs(r *http.Request, _ noBody) (api.KubeTorchJobList, error) {
	jobs := k.trainer.Jobs
	if jobs == nil {
		return api.KubeTorchJobList{}, kubetorch.ErrNoJobRecord
	}
	list, err := jobs.List(r.Context())
	if err != nil {
		return api.KubeTorchJobList{}, err
	}
	p, _ := PrincipalFrom(r.Context())
	out := api.KubeTorchJobList{Jobs: []api.KubeTorchJobSummary{}}
	for _, job := range list {
		if p.Role != RoleAdmin && p.Subject != job.Spec.Owner {
			continue
		}
		out.Jobs = append(out.Jobs, api.KubeTorchJobSummary{ID: job.Name, Owner: job.Spec.Owner, Cluster: job.Spec.Cluster,
			Phase: job.Status.Phase, Message: job.Status.Message, CreatedAt: job.CreationTimestamp.Time.UTC()})
	}
	slices.SortFunc(out.Jobs, func(a, b api.KubeTorchJobSummary) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// routes are the kubetorchRoutes routes.
func (k *kubetorchRoutes) routes() []route {
	return []route{
		{pattern: "POST /v1/kubetorch/sync", auth: authAdmin, on: onPublic, handler: k.handleSync,
			doc: operation{id: "syncBundle", tag: "kubetorch", summary: "Upload a code bundle (tar.gz or zip)",
				description: "The body is the archive (`Content-Type: application/gzip` for a tar.gz, `application/zip`), or the multipart field `bundle`. " +
					"Every entry is checked: nothing escaping the root (`..`, absolute paths, links pointing out), no device files, no duplicate paths, " +
					"at most 10,000 entries and 512 MiB expanded, at most 100:1 compression; a refused entry is a 400 naming it. " +
					"Stored content-addressed (the same bytes are one bundle); `url` serves it, without credentials, on the VPN listener, as the zip Ray's working_dir takes.",
				status: 201, response: api.BundleSynced{}, codes: []string{api.CodeInvalidField, api.CodeInvalidBundle, api.CodeBodyTooLarge, api.CodeUnsupportedMediaType}}},
		{pattern: "GET /v1/kubetorch/bundles/{file}", auth: authNone, on: onVPN | onInternal, handler: k.handleBundle,
			doc: operation{id: "getBundle", tag: "kubetorch", summary: "A bundle's zip, at its unguessable URL (<sha256>.zip)",
				description: "Served on the VPN listener (on the master's VPN address, through the tunnels) and the internal listener; the public listener answers 404.",
				status:      200, responseType: "application/zip", response: binaryDoc{}, codes: []string{api.CodeNotFound}}},
		jsonRoute(k.responder, route{pattern: "POST /v1/kubetorch/train", auth: authAdmin, on: onPublic,
			doc: operation{id: "train", tag: "kubetorch", summary: "Launch distributed training on a cluster's GPU workers",
				description: "A Ray job through the dashboard Jobs API: the bundle as runtime_env.working_dir, the command run on every GPU (Ray Train's torch backend sets MASTER_ADDR, RANK, WORLD_SIZE, LOCAL_RANK as torchrun does), nodes and GPUs per node from the cluster's ready GPU workers unless given. Recorded as a GridweaveJob owned by `owner` (default the caller's sub).",
				codes:       kubetorchCodes}}, http.StatusCreated, k.train),
		jsonRoute(k.responder, route{pattern: "GET /v1/kubetorch/health", auth: authAdmin, on: onPublic,
			doc: operation{id: "kubetorchHealth", tag: "kubetorch", summary: "The dashboard reachable, a cluster's GPU workers ready, per group",
				query: []param{{"cluster", "The RayCluster.", stringParam}}, codes: kubetorchCodes}}, http.StatusOK, k.health),
		jsonRoute(k.responder, route{pattern: "GET /v1/kubetorch/jobs", auth: authUser, on: onPublic,
			doc: operation{id: "kubetorchJobs", tag: "kubetorch", summary: "The caller's KubeTorch jobs, newest first (an admin sees every job)",
				description: "What the server last followed of each job; GET /v1/kubetorch/jobs/{id} asks Ray now and adds the logs.",
				codes:       kubetorchCodes}}, http.StatusOK, k.jobs),
		jsonRoute(k.responder, route{pattern: "GET /v1/kubetorch/jobs/{id}", auth: authUser, on: onPublic,
			doc: operation{id: "kubetorchJob", tag: "kubetorch", summary: "A KubeTorch job's status and last log lines (a user sees only their own)",
				codes: kubetorchCodes}}, http.StatusOK, k.job),
	}
}
