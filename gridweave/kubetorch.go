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
	"strconv"
	"strings"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/kubetorch"
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

// kubetorch is the KubeTorch trainer over the server's backends.
func (s *Server) kubetorch() *kubetorch.Trainer {
	t := &kubetorch.Trainer{Bundles: s.bundles(), Ray: s.ray, Namespace: s.cfg.Namespace, DashboardURL: s.cfg.RayDashboardURL,
		Timeout: s.rayTimeout(), Logger: s.log}
	if s.dynamic != nil {
		t.Jobs = kubetorch.NewJobs(s.dynamic, s.cfg.Namespace)
	}
	return t
}

// FollowKubeTorchJobs brings every unfinished KubeTorch GridweaveJob's
// status in step with its Ray job (Run calls it every
// KubeTorchSyncInterval); it returns how many it read.
func (s *Server) FollowKubeTorchJobs(ctx context.Context) (int, error) {
	return s.kubetorch().FollowJobs(ctx)
}

func (s *Server) handleTrain(w http.ResponseWriter, r *http.Request) {
	var req api.TrainRequest
	if err := decodeJSON(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Owner == "" {
		p, _ := PrincipalFrom(r.Context())
		req.Owner = p.Subject
	}
	resp, err := s.kubetorch().Train(r.Context(), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, resp)
}

// handleKubeTorchHealth: the dashboard reachable, the GPU workers of a
// cluster ready, per group.
func (s *Server) handleKubeTorchHealth(w http.ResponseWriter, r *http.Request) {
	cluster := r.URL.Query().Get("cluster")
	if cluster == "" {
		s.writeError(w, r, badField("cluster", "cluster is required: ?cluster=<RayCluster>"))
		return
	}
	health, err := s.kubetorch().Health(r.Context(), cluster)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, health)
}

// handleKubeTorchJob answers a job's status and last log lines; a user
// sees only their own jobs (others are 404). The GridweaveJob's status
// follows the Ray job's.
func (s *Server) handleKubeTorchJob(w http.ResponseWriter, r *http.Request) {
	p, _ := PrincipalFrom(r.Context())
	job, err := s.kubetorch().Job(r.Context(), r.PathValue("id"), func(owner string) bool { return p.Role == RoleAdmin || p.Subject == owner })
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, job)
}
