package gridweave

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"gridweave.dev/gridweave/api"
	"gridweave.dev/gridweave/node/joinscript"
)

// The node side's downloads, open without credentials: join-node.sh, the
// join agent binaries from Config.AgentDir (named join-node-<os>-<arch>),
// and the GPU worker image as a tarball (Config.WorkerImageTar), each with
// its SHA-256 announced so the node checks what it runs.

var agentPlatforms = map[string]map[string]bool{"linux": {"amd64": true, "arm64": true}}

func (s *Server) handleJoinScript(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/x-shellscript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(joinscript.Render(s.cfg.Port, s.cfg.PublicPin != ""))
}

// agentFile returns the agent binary for the request's {os}/{arch}, or
// the answer to give.
func (s *Server) agentFile(r *http.Request) (string, error) {
	goos, arch := r.PathValue("os"), r.PathValue("arch")
	if !agentPlatforms[goos][arch] {
		return "", &apiError{code: api.CodeNoAgent, message: "there is no join agent for " + goos + "/" + arch + "; agents exist for linux/amd64 and linux/arm64"}
	}
	if s.cfg.AgentDir == "" {
		return "", &apiError{code: api.CodeNoAgent, message: "this server has no join agent binaries: AGENT_DIR is not set and the binary was built without them (make server-static builds them in)"}
	}
	path := filepath.Join(s.cfg.AgentDir, "join-node-"+goos+"-"+arch)
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return "", &apiError{code: api.CodeNoAgent, message: "this server has no join agent for " + goos + "/" + arch + " (no join-node-" + goos + "-" + arch + " in AGENT_DIR)"}
	}
	return path, nil
}

func (s *Server) handleAgent(w http.ResponseWriter, r *http.Request) {
	path, err := s.agentFile(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.serveChecked(w, r, path)
}

// workerImageFile returns the worker image tarball, or the answer to give.
func (s *Server) workerImageFile() (string, error) {
	if s.cfg.WorkerImageTar == "" {
		return "", &apiError{code: api.CodeNoWorkerImage, message: "this server serves no worker image (WORKER_IMAGE_TAR is not set); nodes pull " + s.cfg.RayImageWorker + " themselves"}
	}
	if fi, err := os.Stat(s.cfg.WorkerImageTar); err != nil || !fi.Mode().IsRegular() {
		return "", &apiError{code: api.CodeNoWorkerImage, message: "the worker image tarball WORKER_IMAGE_TAR names is not there"}
	}
	return s.cfg.WorkerImageTar, nil
}

// handleWorkerImage serves the GPU worker image (RAY_IMAGE_WORKER) as the
// tarball a container runtime imports; X-Image-Name says its name.
func (s *Server) handleWorkerImage(w http.ResponseWriter, r *http.Request) {
	path, err := s.workerImageFile()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("X-Image-Name", s.cfg.RayImageWorker)
	s.serveChecked(w, r, path)
}

func (s *Server) handleWorkerImageSum(w http.ResponseWriter, r *http.Request) {
	path, err := s.workerImageFile()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.serveSum(w, r, path)
}

// serveChecked serves a file with its SHA-256 in X-Checksum-Sha256.
func (s *Server) serveChecked(w http.ResponseWriter, r *http.Request, path string) {
	sum, err := s.sums.of(path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer f.Close()
	fi, _ := f.Stat()
	w.Header().Set("X-Checksum-Sha256", sum)
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, filepath.Base(path), fi.ModTime(), f)
}

func (s *Server) handleAgentSum(w http.ResponseWriter, r *http.Request) {
	path, err := s.agentFile(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.serveSum(w, r, path)
}

// serveSum answers a file's SHA-256 in hex.
func (s *Server) serveSum(w http.ResponseWriter, r *http.Request, path string) {
	sum, err := s.sums.of(path)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, sum+"\n")
}

// fileSums caches SHA-256 sums of files by path, size and modification time.
type fileSums struct {
	mu   sync.Mutex
	sums map[string]fileSum
}

type fileSum struct {
	size int64
	mod  time.Time
	hex  string
}

func (c *fileSums) of(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", &apiError{code: api.CodeNotFound, message: "the file went away"}
		}
		return "", err
	}
	c.mu.Lock()
	if s, ok := c.sums[path]; ok && s.size == fi.Size() && s.mod.Equal(fi.ModTime()) {
		c.mu.Unlock()
		return s.hex, nil
	}
	c.mu.Unlock()
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	c.mu.Lock()
	if c.sums == nil {
		c.sums = map[string]fileSum{}
	}
	c.sums[path] = fileSum{size: fi.Size(), mod: fi.ModTime(), hex: sum}
	c.mu.Unlock()
	return sum, nil
}

// k3sFile returns the master's k3s binary for the request's {os}/{arch},
// or the answer to give: only the master's own platform is served (it is
// the k3s the master runs).
func (s *Server) k3sFile(r *http.Request) (string, error) {
	goos, arch := r.PathValue("os"), r.PathValue("arch")
	if goos != runtime.GOOS || arch != runtime.GOARCH {
		return "", &apiError{code: api.CodeNoK3s, message: "this master serves the k3s it runs, for " + runtime.GOOS + "/" + runtime.GOARCH + "; install k3s on a " + goos + "/" + arch + " machine yourself"}
	}
	if fi, err := os.Stat(s.cfg.K3sBinary); s.cfg.K3sBinary == "" || err != nil || !fi.Mode().IsRegular() {
		return "", &apiError{code: api.CodeNoK3s, message: "this master serves no k3s binary (K3S_BINARY names none); install k3s on the machine yourself"}
	}
	return s.cfg.K3sBinary, nil
}

// handleK3s serves the k3s binary a machine without k3s installs.
func (s *Server) handleK3s(w http.ResponseWriter, r *http.Request) {
	path, err := s.k3sFile(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.serveChecked(w, r, path)
}

func (s *Server) handleK3sSum(w http.ResponseWriter, r *http.Request) {
	path, err := s.k3sFile(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.serveSum(w, r, path)
}

// kubeletFile returns the kubelet the master serves machines of the
// kubelet join mode, for the request's {os}/{arch}, or the answer to give.
func (s *Server) kubeletFile(r *http.Request) (string, error) {
	goos, arch := r.PathValue("os"), r.PathValue("arch")
	if goos != runtime.GOOS || arch != runtime.GOARCH {
		return "", &apiError{code: api.CodeNoKubelet, message: "this master serves a kubelet for " + runtime.GOOS + "/" + runtime.GOARCH + "; put the control plane's kubelet on a " + goos + "/" + arch + " machine yourself"}
	}
	if fi, err := os.Stat(s.cfg.KubeletBinary); s.cfg.KubeletBinary == "" || err != nil || !fi.Mode().IsRegular() {
		return "", &apiError{code: api.CodeNoKubelet, message: "this master serves no kubelet (KUBELET_BINARY names none); set KUBELET_BINARY to the control plane's kubelet"}
	}
	return s.cfg.KubeletBinary, nil
}

// handleKubelet serves the kubelet a machine of the kubelet join mode
// runs (the control plane's version).
func (s *Server) handleKubelet(w http.ResponseWriter, r *http.Request) {
	path, err := s.kubeletFile(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.serveChecked(w, r, path)
}

func (s *Server) handleKubeletSum(w http.ResponseWriter, r *http.Request) {
	path, err := s.kubeletFile(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.serveSum(w, r, path)
}
