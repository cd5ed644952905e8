package rayimage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"gridweave.dev/deploy/rayimage"
)

func requireBuilder(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a Debian root filesystem and installs Ray; run make test")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the Ray images are built as root (mmdebstrap's root mode): run the tests as root")
	}
}

// entries reads a root filesystem's tar: each entry's header, and the
// content of the files wanted.
func entries(t *testing.T, path string, wanted ...string) (map[string]*tar.Header, map[string][]byte) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	headers, contents := map[string]*tar.Header{}, map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers, contents
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[h.Name] = h
		if slices.Contains(wanted, h.Name) {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			contents[h.Name] = data
		}
	}
}

// TestTheRayImages builds both images (the root filesystem from the
// shared cache when a build made it before) and checks what KubeRay's pods
// need is in them: bash, wget, curl, python on PATH, ray, the user ray
// (1000:100, home /home/ray) the images run as, the dashboard's modules
// given 120 s to start; Python's bytecode with hash-based invalidation; no
// device node, log or apt list; every timestamp the epoch. A root
// filesystem built afresh gives the same digest as the cached one
// whenever Debian's packages are the same.
func TestTheRayImages(t *testing.T) {
	requireBuilder(t)
	ctx := context.Background()
	var progress bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("build output (tail):\n%s", tail(progress.String(), 4000))
		}
	})
	dir := t.TempDir()
	headTar, workerTar := filepath.Join(dir, "head.tar"), filepath.Join(dir, "worker.tar")
	headDigest, err := rayimage.Build(ctx, rayimage.Options{Kind: rayimage.Head, Progress: &progress}, headTar, "")
	if err != nil {
		t.Fatal(err)
	}
	workerDigest, err := rayimage.Build(ctx, rayimage.Options{Kind: rayimage.Worker, Progress: &progress}, workerTar, "")
	if err != nil {
		t.Fatal(err)
	}
	if headDigest == workerDigest {
		t.Error("the head and worker images have the same digest (the worker's configuration differs)")
	}
	for _, c := range []struct {
		path, tag string
		digest    v1.Hash
		gpuEnv    bool
	}{{headTar, rayimage.HeadTag, headDigest, false}, {workerTar, rayimage.WorkerTag, workerDigest, true}} {
		img, err := tarball.ImageFromPath(c.path, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.tag, err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != "1000:100" || cfg.Config.WorkingDir != "/home/ray" {
			t.Errorf("%s runs as %q in %q, want 1000:100 in /home/ray", c.tag, cfg.Config.User, cfg.Config.WorkingDir)
		}
		if !slices.ContainsFunc(cfg.Config.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") && strings.Contains(e, "/usr/local/bin") }) {
			t.Errorf("%s: PATH lacks /usr/local/bin (ray): %v", c.tag, cfg.Config.Env)
		}
		if !slices.Contains(cfg.Config.Env, "RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT=120") {
			t.Errorf("%s: its environment does not give the dashboard's modules 120 s to start: %v", c.tag, cfg.Config.Env)
		}
		if got := slices.Contains(cfg.Config.Env, "NVIDIA_VISIBLE_DEVICES=all"); got != c.gpuEnv {
			t.Errorf("%s: NVIDIA_VISIBLE_DEVICES=all in its environment is %v, want %v", c.tag, got, c.gpuEnv)
		}
		if cfg.Config.Labels["dev.gridweave.ray.version"] != rayimage.RayVersion || cfg.Architecture == "" {
			t.Errorf("%s: labels %v, architecture %q", c.tag, cfg.Config.Labels, cfg.Architecture)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%s: %d layers, %v; want one", c.tag, len(layers), err)
		}
		size, _ := layers[0].Size()
		id, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s %s (image ID %s): one layer of %.0f MB compressed", c.tag, c.digest, id, float64(size)/1e6)
	}

	rootfs, err := rayimage.RootFS(ctx, rayimage.Options{Kind: rayimage.Head})
	if err != nil {
		t.Fatal(err)
	}
	const pyc = "usr/local/lib/python3.11/dist-packages/ray/__pycache__/__init__.cpython-311.pyc"
	headers, contents := entries(t, rootfs, "etc/passwd", pyc, "var/lib/dpkg/status")
	for _, want := range []string{"usr/bin/bash", "usr/bin/wget", "usr/bin/curl", "usr/bin/python", "usr/bin/python3", "usr/local/bin/ray", "usr/local/lib/python3.11/dist-packages/ray/dashboard/dashboard.py", "etc/ssl/certs/ca-certificates.crt", "home/ray/"} {
		if headers[want] == nil {
			t.Errorf("the root filesystem lacks %s", want)
		}
	}
	if h := headers["usr/bin/python"]; h != nil && (h.Typeflag != tar.TypeSymlink || h.Linkname != "python3") {
		t.Errorf("usr/bin/python: %c -> %q, want a link to python3", h.Typeflag, h.Linkname)
	}
	if h := headers["home/ray/"]; h != nil && (h.Uid != 1000 || h.Gid != 100) {
		t.Errorf("home/ray/ owned by %d:%d, want 1000:100", h.Uid, h.Gid)
	}
	if !bytes.Contains(contents["etc/passwd"], []byte("\nray:x:1000:100::/home/ray:/bin/bash\n")) {
		t.Errorf("etc/passwd has no ray user 1000:100 at /home/ray:\n%s", contents["etc/passwd"])
	}
	// A pyc's flags (bytes 4-8): 1 is hash-based, not checked against the
	// source's timestamp, which the layer does not keep.
	if b := contents[pyc]; len(b) < 16 || binary.LittleEndian.Uint32(b[4:8]) != 1 {
		t.Errorf("%s: not compiled with hash-based invalidation (%d bytes)", pyc, len(b))
	}
	for name, h := range headers {
		if !h.ModTime.Equal(epochTime) || h.Typeflag == tar.TypeChar || h.Typeflag == tar.TypeBlock ||
			h.Typeflag != tar.TypeDir && (strings.HasPrefix(name, "var/log/") || strings.HasPrefix(name, "var/lib/apt/lists/") || strings.HasPrefix(name, "dev/")) {
			t.Errorf("%s: type %c, time %v: not what the layer keeps", name, h.Typeflag, h.ModTime)
		}
	}

	// Built afresh, into a cache of its own: the same digest. When
	// Debian's archive moved on since the cached build (another dpkg
	// status), a second fresh build is what the first must equal.
	fresh := rayimage.Options{Kind: rayimage.Head, CacheDir: t.TempDir(), Progress: &progress}
	img, err := rayimage.Image(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	want, wantRootfs, wantHeaders, wantStatus := headDigest, rootfs, headers, contents["var/lib/dpkg/status"]
	freshRootfs, err := rayimage.RootFS(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	freshHeaders, freshContents := entries(t, freshRootfs, "var/lib/dpkg/status")
	if !bytes.Equal(freshContents["var/lib/dpkg/status"], wantStatus) {
		t.Logf("Debian's packages changed since the cached root filesystem was built: a second fresh build is the reference")
		again := rayimage.Options{Kind: rayimage.Head, CacheDir: t.TempDir(), Progress: &progress}
		againImg, err := rayimage.Image(ctx, again)
		if err != nil {
			t.Fatal(err)
		}
		want = digestOf(t, againImg)
		if wantRootfs, err = rayimage.RootFS(ctx, again); err != nil {
			t.Fatal(err)
		}
		wantHeaders, _ = entries(t, wantRootfs)
	}
	if got := digestOf(t, img); got != want {
		var differ []string
		for name, h := range freshHeaders {
			if o := wantHeaders[name]; o == nil || o.Size != h.Size || o.Mode != h.Mode || o.Linkname != h.Linkname || o.Uid != h.Uid {
				differ = append(differ, name)
			}
		}
		for name := range wantHeaders {
			if freshHeaders[name] == nil {
				differ = append(differ, name+" (only in the first)")
			}
		}
		slices.Sort(differ)
		t.Errorf("the same inputs built again gave %s, not %s; entries that differ in size, mode, owner or link (%d): %.20v", got, want, len(differ), differ)
	}
}

var epochTime = time.Unix(0, 0)

func digestOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
