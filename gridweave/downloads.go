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

// downloadRoutes serve what a machine downloads to join: the join script,
// the join agent, k3s, the kubelet, the worker image, and their sums.
type downloadRoutes struct {
	responder
	cfg  *Config
	sums fileSums
}

func (d *downloadRoutes) handleJoinScript(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/x-shellscript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(joinscript.Render(d.cfg.Port, d.cfg.PublicPin != ""))
}

// agentFile returns the agent binary for the request's {os}/{arch}, or
// the answer to give.
func (d *downloadRoutes) agentFile(r *http.Request) (string, error) {
	goos, arch := r.PathValue("os"), r.PathValue("arch")
	if !agentPlatforms[goos][arch] {
		return "", &apiError{code: api.CodeNoAgent, message: "there is no join agent for " + goos + "/" + arch + "; agents exist for linux/amd64 and linux/arm64"}
	}
	if d.cfg.AgentDir == "" {
		return "", &apiError{code: api.CodeNoAgent, message: "this server has no join agent binaries: " + d.cfg.Name("AgentDir") + " is not set and the binary was built without them (make server-static builds them in)"}
	}
	path := filepath.Join(d.cfg.AgentDir, "join-node-"+goos+"-"+arch)
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return "", &apiError{code: api.CodeNoAgent, message: "this server has no join agent for " + goos + "/" + arch + " (no join-node-" + goos + "-" + arch + " in " + d.cfg.Name("AgentDir") + ")"}
	}
	return path, nil
}

func (d *downloadRoutes) handleAgent(w http.ResponseWriter, r *http.Request) {
	path, err := d.agentFile(r)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	d.serveChecked(w, r, path)
}

// workerImageFile returns the worker image tarball, or the answer to give.
func (d *downloadRoutes) workerImageFile() (string, error) {
	if d.cfg.WorkerImageTar == "" {
		return "", &apiError{code: api.CodeNoWorkerImage, message: "this server serves no worker image (" + d.cfg.Name("WorkerImageTar") + " is not set); nodes pull " + d.cfg.RayImageWorker + " themselves"}
	}
	if fi, err := os.Stat(d.cfg.WorkerImageTar); err != nil || !fi.Mode().IsRegular() {
		return "", &apiError{code: api.CodeNoWorkerImage, message: "the worker image tarball " + d.cfg.Name("WorkerImageTar") + " names is not there"}
	}
	return d.cfg.WorkerImageTar, nil
}

// handleWorkerImage serves the GPU worker image (Config.RayImageWorker) as the
// tarball a container runtime imports; X-Image-Name says its name.
func (d *downloadRoutes) handleWorkerImage(w http.ResponseWriter, r *http.Request) {
	path, err := d.workerImageFile()
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	w.Header().Set("X-Image-Name", d.cfg.RayImageWorker)
	d.serveChecked(w, r, path)
}

func (d *downloadRoutes) handleWorkerImageSum(w http.ResponseWriter, r *http.Request) {
	path, err := d.workerImageFile()
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	d.serveSum(w, r, path)
}

// serveChecked serves a file with its SHA-256 in X-Checksum-Sha256.
func (d *downloadRoutes) serveChecked(w http.ResponseWriter, r *http.Request, path string) {
	sum, err := d.sums.of(path)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	defer f.Close()
	fi, _ := f.Stat()
	w.Header().Set("X-Checksum-Sha256", sum)
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, filepath.Base(path), fi.ModTime(), f)
}

func (d *downloadRoutes) handleAgentSum(w http.ResponseWriter, r *http.Request) {
	path, err := d.agentFile(r)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	d.serveSum(w, r, path)
}

// serveSum answers a file's SHA-256 in hex.
func (d *downloadRoutes) serveSum(w http.ResponseWriter, r *http.Request, path string) {
	sum, err := d.sums.of(path)
	if err != nil {
		d.writeError(w, r, err)
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
func (d *downloadRoutes) k3sFile(r *http.Request) (string, error) {
	goos, arch := r.PathValue("os"), r.PathValue("arch")
	if goos != runtime.GOOS || arch != runtime.GOARCH {
		return "", &apiError{code: api.CodeNoK3s, message: "this master serves the k3s it runs, for " + runtime.GOOS + "/" + runtime.GOARCH + "; install k3s on a " + goos + "/" + arch + " machine yourself"}
	}
	if fi, err := os.Stat(d.cfg.K3sBinary); d.cfg.K3sBinary == "" || err != nil || !fi.Mode().IsRegular() {
		return "", &apiError{code: api.CodeNoK3s, message: "this master serves no k3s binary (" + d.cfg.Name("K3sBinary") + " names none); install k3s on the machine yourself"}
	}
	return d.cfg.K3sBinary, nil
}

// handleK3s serves the k3s binary a machine without k3s installs.
func (d *downloadRoutes) handleK3s(w http.ResponseWriter, r *http.Request) {
	path, err := d.k3sFile(r)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	d.serveChecked(w, r, path)
}

func (d *downloadRoutes) handleK3sSum(w http.ResponseWriter, r *http.Request) {
	path, err := d.k3sFile(r)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	d.serveSum(w, r, path)
}

// kubeletFile returns the kubelet the master serves machines of the
// kubelet join mode, for the request's {os}/{arch}, or the answer to give.
func (d *downloadRoutes) kubeletFile(r *http.Request) (string, error) {
	goos, arch := r.PathValue("os"), r.PathValue("arch")
	if goos != runtime.GOOS || arch != runtime.GOARCH {
		return "", &apiError{code: api.CodeNoKubelet, message: "this master serves a kubelet for " + runtime.GOOS + "/" + runtime.GOARCH + "; put the control plane's kubelet on a " + goos + "/" + arch + " machine yourself"}
	}
	if fi, err := os.Stat(d.cfg.KubeletBinary); d.cfg.KubeletBinary == "" || err != nil || !fi.Mode().IsRegular() {
		return "", &apiError{code: api.CodeNoKubelet, message: "this master serves no kubelet (" + d.cfg.Name("KubeletBinary") + " names none); set " + d.cfg.Name("KubeletBinary") + " to the control plane's kubelet"}
	}
	return d.cfg.KubeletBinary, nil
}

// handleKubelet serves the kubelet a machine of the kubelet join mode
// runs (the control plane's version).
func (d *downloadRoutes) handleKubelet(w http.ResponseWriter, r *http.Request) {
	path, err := d.kubeletFile(r)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	d.serveChecked(w, r, path)
}

func (d *downloadRoutes) handleKubeletSum(w http.ResponseWriter, r *http.Request) {
	path, err := d.kubeletFile(r)
	if err != nil {
		d.writeError(w, r, err)
		return
	}
	d.serveSum(w, r, path)
}

// routes are the downloadRoutes routes.
func (d *downloadRoutes) routes() []route {
	return []route{
		{pattern: "GET /join-node.sh", auth: authNone, on: onPublic, handler: d.handleJoinScript,
			doc: operation{id: "joinScript", tag: "nodes", summary: "The script the join command runs on a node",
				description: "Downloads the join agent for the node's OS and architecture, checks its SHA-256 against /v1/nodes/agent/{os}/{arch}/sha256, and runs it with the join key.",
				status:      200, responseType: "text/x-shellscript", response: ""}},
		{pattern: "GET /v1/nodes/agent/{os}/{arch}", auth: authNone, on: onPublic, handler: d.handleAgent,
			doc: operation{id: "joinAgent", tag: "nodes", summary: "The join agent binary for an OS and architecture",
				description: "From the server's agent directory (join-node-<os>-<arch>); the X-Checksum-Sha256 header announces its SHA-256.",
				status:      200, responseType: "application/octet-stream", response: binaryDoc{}, codes: []string{api.CodeNoAgent, api.CodeNotFound}}},
		{pattern: "GET /v1/nodes/agent/{os}/{arch}/sha256", auth: authNone, on: onPublic, handler: d.handleAgentSum,
			doc: operation{id: "joinAgentSum", tag: "nodes", summary: "The SHA-256 of the join agent binary, in hex",
				status: 200, responseType: "text/plain", response: "", codes: []string{api.CodeNoAgent, api.CodeNotFound}}},
		{pattern: "GET /v1/nodes/worker-image", auth: authNone, on: publicUntilVPN | onVPN, handler: d.handleWorkerImage,
			doc: operation{id: "workerImage", tag: "nodes", summary: "The GPU worker image as a tarball to import",
				description: "The worker image's tarball the server was given, of the image the workers run (X-Image-Name); X-Checksum-Sha256 announces its SHA-256.",
				status:      200, responseType: "application/octet-stream", response: binaryDoc{}, codes: []string{api.CodeNoWorkerImage, api.CodeNotFound}}},
		{pattern: "GET /v1/nodes/worker-image/sha256", auth: authNone, on: publicUntilVPN | onVPN, handler: d.handleWorkerImageSum,
			doc: operation{id: "workerImageSum", tag: "nodes", summary: "The SHA-256 of the worker image tarball, in hex",
				status: 200, responseType: "text/plain", response: "", codes: []string{api.CodeNoWorkerImage, api.CodeNotFound}}},
		{pattern: "GET /v1/nodes/agent/{os}/{arch}/k3s", auth: authNone, on: publicUntilVPN | onVPN, handler: d.handleK3s,
			doc: operation{id: "k3sBinary", tag: "nodes", summary: "The k3s binary the master runs, for a machine without k3s",
				description: "The k3s binary the server was given, for the master's own OS and architecture only (404 `no_k3s` otherwise, or when there is none); X-Checksum-Sha256 announces its SHA-256.",
				status:      200, responseType: "application/octet-stream", response: binaryDoc{}, codes: []string{api.CodeNoK3s, api.CodeNotFound}}},
		{pattern: "GET /v1/nodes/agent/{os}/{arch}/k3s/sha256", auth: authNone, on: publicUntilVPN | onVPN, handler: d.handleK3sSum,
			doc: operation{id: "k3sBinarySum", tag: "nodes", summary: "The SHA-256 of the k3s binary, in hex",
				status: 200, responseType: "text/plain", response: "", codes: []string{api.CodeNoK3s, api.CodeNotFound}}},
		{pattern: "GET /v1/nodes/agent/{os}/{arch}/kubelet", auth: authNone, on: publicUntilVPN | onVPN, handler: d.handleKubelet,
			doc: operation{id: "kubeletBinary", tag: "nodes", summary: "The kubelet a machine of the kubelet join mode runs",
				description: "The kubelet the server was given (the control plane's), for the master's own OS and architecture only (404 `no_kubelet` otherwise, or when there is none); X-Checksum-Sha256 announces its SHA-256. Served through the tunnels once the master has a VPN listener.",
				status:      200, responseType: "application/octet-stream", response: binaryDoc{}, codes: []string{api.CodeNoKubelet, api.CodeNotFound}}},
		{pattern: "GET /v1/nodes/agent/{os}/{arch}/kubelet/sha256", auth: authNone, on: publicUntilVPN | onVPN, handler: d.handleKubeletSum,
			doc: operation{id: "kubeletBinarySum", tag: "nodes", summary: "The SHA-256 of the kubelet, in hex",
				status: 200, responseType: "text/plain", response: "", codes: []string{api.CodeNoKubelet, api.CodeNotFound}}},
	}
}
