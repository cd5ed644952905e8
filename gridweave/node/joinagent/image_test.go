package joinagent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gridweave.dev/gridweave"
	"gridweave.dev/gridweave/node/gpus"
	"gridweave.dev/gridweave/node/joinagent"
)

// fakeRuntime is a container runtime that remembers what it imported.
type fakeRuntime struct {
	mu       sync.Mutex
	images   map[string]bool
	imported []string // the SHA-256 of each imported tarball
	name     string   // what an import makes present
}

func (f *fakeRuntime) Has(_ context.Context, name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.images[name], nil
}

func (f *fakeRuntime) Import(_ context.Context, tarball string) error {
	raw, err := os.ReadFile(tarball)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imported = append(f.imported, hex.EncodeToString(sum[:]))
	f.images[f.name] = true
	return nil
}

// TestWorkerImageIsImportedOnce: the first join downloads the master's
// worker image and imports it; a re-run skips it while the runtime has it;
// an image removed from the runtime, or a new tarball on the master, is
// imported again; a tarball that does not match the announced SHA-256 is
// never imported; a master without an image is no error.
func TestWorkerImageIsImportedOnce(t *testing.T) {
	ctx := context.Background()
	tarball := filepath.Join(t.TempDir(), "worker.tar")
	if err := os.WriteFile(tarball, []byte("an OCI tarball, version 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	base, _, _ := masterWith(t, func(c *gridweave.Config) { c.WorkerImageTar, c.RayImageWorker = tarball, "gridweave-worker:2.54.0" })
	runtime := &fakeRuntime{images: map[string]bool{}, name: "gridweave-worker:2.54.0"}
	opts := joinagent.Options{Master: base, StateDir: t.TempDir(), Key: mintKey(t, base), Hostname: "img-box", Version: "1.2.3",
		Tunnel: &fakeTunnel{}, Images: runtime, DetectGPUs: func(context.Context) ([]gpus.GPU, error) { return nil, nil }}
	sumOf := func(content string) string { s := sha256.Sum256([]byte(content)); return hex.EncodeToString(s[:]) }
	join := func(what string) {
		t.Helper()
		if _, err := joinagent.Join(ctx, opts); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		opts.Key = ""
	}

	join("first join")
	if len(runtime.imported) != 1 || runtime.imported[0] != sumOf("an OCI tarball, version 1") {
		t.Fatalf("first join imported %v", runtime.imported)
	}
	join("second join")
	if len(runtime.imported) != 1 {
		t.Errorf("a re-run imported again: %v", runtime.imported)
	}
	delete(runtime.images, "gridweave-worker:2.54.0") // someone pruned the runtime's images
	join("after a prune")
	if len(runtime.imported) != 2 {
		t.Errorf("the pruned image was not imported again: %v", runtime.imported)
	}
	later := time.Now().Add(time.Minute)
	if err := os.WriteFile(tarball, []byte("an OCI tarball, version 2"), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Chtimes(tarball, later, later)
	join("after a new image")
	if len(runtime.imported) != 3 || runtime.imported[2] != sumOf("an OCI tarball, version 2") {
		t.Errorf("the new image was not imported: %v", runtime.imported)
	}

	// A master whose tarball is altered on the way: refused, nothing imported.
	target, _ := url.Parse(base)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method == http.MethodGet && r.Request.URL.Path == "/v1/nodes/worker-image" {
			r.Body = io.NopCloser(strings.NewReader("a tampered tarball"))
			r.ContentLength = -1
			r.Header.Del("Content-Length")
		}
		return nil
	}
	tampering := httptest.NewServer(proxy)
	defer tampering.Close()
	delete(runtime.images, "gridweave-worker:2.54.0")
	bad := opts
	bad.Master = tampering.URL
	_, err := joinagent.Join(ctx, bad)
	if err == nil || !strings.Contains(err.Error(), "not importing it") || len(runtime.imported) != 3 {
		t.Errorf("a tampered tarball: %v; imported %v", err, runtime.imported)
	}
	if left, _ := filepath.Glob(filepath.Join(opts.StateDir, ".worker-image-*")); len(left) != 0 {
		t.Errorf("downloads left behind: %v", left)
	}

	// A master without an image: the step is skipped.
	plain, _, _ := master(t)
	none := joinagent.Options{Master: plain, StateDir: t.TempDir(), Key: mintKey(t, plain), Hostname: "img-box", Version: "1.2.3",
		Tunnel: &fakeTunnel{}, Images: runtime, DetectGPUs: func(context.Context) ([]gpus.GPU, error) { return nil, nil }}
	if _, err := joinagent.Join(ctx, none); err != nil {
		t.Errorf("a master without a worker image: %v", err)
	}
}
