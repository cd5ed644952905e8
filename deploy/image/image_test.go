package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"gridweave.dev/deploy/image"
)

// TestServerImage builds the server statically, twice (the same bytes),
// builds its image twice (the same digest), reads the written tarball back
// (entrypoint, non-root user, labels, the CA bundle of Debian's
// ca-certificates package), and runs the image's one binary with nothing
// else around it (chroot into the image's root filesystem): --version.
func TestServerImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the static server (minutes the first time); run make test")
	}
	ctx := context.Background()
	dir := t.TempDir()
	module, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	sum := func(path string) [32]byte {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(raw)
	}
	first, second := filepath.Join(dir, "server-1"), filepath.Join(dir, "server-2")
	for _, out := range []string{first, second} {
		if err := image.BuildStatic(ctx, module, out, "9.8.7"); err != nil {
			t.Fatal(err)
		}
	}
	if sum(first) != sum(second) {
		t.Error("two static builds of the same source differ")
	}
	f, err := elf.Open(first)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the server binary asks for a dynamic loader: not static")
		}
	}
	f.Close()

	img, err := image.Build(image.Options{Binary: first, Version: "9.8.7", Revision: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := image.Build(image.Options{Binary: second, Version: "9.8.7", Revision: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("the same inputs gave digests %s and %s", d1, d2)
	}
	t.Logf("image digest %s", d1)

	path := filepath.Join(dir, "image.tar")
	if err := image.WriteTarball(img, "gridweave/server:9.8.7", path); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("gridweave/server:9.8.7")
	read, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := read.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Entrypoint; len(got) != 1 || got[0] != image.Entrypoint {
		t.Errorf("entrypoint %v", got)
	}
	if cfg.Config.User != image.User || strings.HasPrefix(cfg.Config.User, "0") {
		t.Errorf("user %q, want the non-root %s", cfg.Config.User, image.User)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "9.8.7" || cfg.Config.Labels["org.opencontainers.image.revision"] != "abc123" {
		t.Errorf("labels %v", cfg.Config.Labels)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	layers, err := read.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v; want one on an empty base", len(layers), err)
	}

	// The root filesystem, unpacked: the binary runs there alone.
	root := filepath.Join(dir, "rootfs")
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, rc, root)
	for _, want := range []string{"gridweave-server", "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "data/"} {
		if !files[want] {
			t.Errorf("the image lacks /%s (has %v)", want, files)
		}
	}
	certs, _ := os.ReadFile(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt"))
	debian, _ := os.ReadFile(image.DebianCACerts)
	if len(certs) == 0 || !bytes.Equal(certs, debian) {
		t.Error("the CA bundle is not Debian's ca-certificates")
	}
	out, err := exec.Command("chroot", root, image.Entrypoint, "--version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "9.8.7" {
		t.Errorf("chroot rootfs %s --version: %v: %s", image.Entrypoint, err, out)
	}
	// The image holds everything the server runs: started inside it, it
	// serves the join agents it carries.
	servesItsAgents(t, []string{"chroot", root, image.Entrypoint}, "/data/kuberay.db")
}

// untar unpacks a layer into dir and returns the names it holds.
func untar(t *testing.T, r io.Reader, dir string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = true
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, os.FileMode(h.Mode)&os.ModePerm); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, data, os.FileMode(h.Mode)&os.ModePerm); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// servesItsAgents starts the static server (command: how to run it, here
// inside the image's root filesystem) with only the variables a first
// start needs (no AGENT_DIR, no kubeconfig, no WireGuard device, its
// ledger at db) and fetches each agent it carries: an ELF binary of that
// machine whose SHA-256 is the one the server announces.
func servesItsAgents(t *testing.T, command []string, db string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	cmd := exec.Command(command[0], append(command[1:], "--addr", "127.0.0.1:"+port)...)
	cmd.Env = []string{"ADMIN_TOKEN=agents-test-admin-token-0123456789", "JWT_SECRET=" + strings.Repeat("s", 40),
		"KUBERAY_DB=" + db, "KUBERAY_PORT=" + port, "MASTER_IP=198.18.0.9", "TLS=off", "WG_INTERFACE=none"}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://127.0.0.1:" + port
	get := func(path string) ([]byte, int) {
		resp, err := http.Get(base + path)
		if err != nil {
			return nil, 0
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return body, resp.StatusCode
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, status := get("/healthz"); status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the static server does not answer: %s", logs.String())
		}
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, p := range image.AgentPlatforms {
		agent, status := get("/v1/nodes/agent/" + p.OS + "/" + p.Arch)
		announced, sumStatus := get("/v1/nodes/agent/" + p.OS + "/" + p.Arch + "/sha256")
		if status != 200 || sumStatus != 200 {
			t.Fatalf("the %s/%s agent: %d, its sum %d: %s\n%s", p.OS, p.Arch, status, sumStatus, agent, logs.String())
		}
		sum := sha256.Sum256(agent)
		if strings.TrimSpace(string(announced)) != hex.EncodeToString(sum[:]) {
			t.Errorf("the %s/%s agent's SHA-256 is %x, the server announces %s", p.OS, p.Arch, sum, announced)
		}
		f, err := elf.NewFile(bytes.NewReader(agent))
		if err != nil {
			t.Fatalf("the %s/%s agent is not ELF: %v", p.OS, p.Arch, err)
		}
		if f.Machine != machines[p.Arch] {
			t.Errorf("the %s/%s agent is for %v", p.OS, p.Arch, f.Machine)
		}
	}
}

// TestSmallImagesAreReproducible: the pause image built twice from the
// same source has the same digest, names a platform (ctr import refuses
// an image that does not) and runs /pause as uid 65535.
func TestSmallImagesAreReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the pause command twice")
	}
	ctx := context.Background()
	var digests []string
	for range 2 {
		img, err := image.BuildPause(ctx, "../..")
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d.String())
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.OS != "linux" || cfg.Architecture == "" || cfg.Config.User != "65535:65535" || !slices.Equal(cfg.Config.Entrypoint, []string{"/pause"}) {
			t.Errorf("the pause image's config: os %q arch %q user %q entrypoint %v", cfg.OS, cfg.Architecture, cfg.Config.User, cfg.Config.Entrypoint)
		}
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of the pause image: %s, then %s", digests[0], digests[1])
	}
	t.Logf("pause image %s", digests[0])
}

// TestFromLayerNamesTheLayersCompression: the manifest of FromLayer's
// image gives its layer the layer's own media type, so that a zstd layer
// is not announced as gzip (a registry's clients decompress by it).
func TestFromLayerNamesTheLayersCompression(t *testing.T) {
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	if err := tw.WriteHeader(&tar.Header{Name: "hello", Mode: 0o644, Size: 5}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte("world"))
	tw.Close()
	for _, c := range []struct {
		opts []tarball.LayerOption
		want types.MediaType
	}{
		{[]tarball.LayerOption{tarball.WithMediaType(types.OCILayer)}, types.OCILayer},
		{[]tarball.LayerOption{tarball.WithMediaType(types.OCILayerZStd), tarball.WithCompression(compression.ZStd)}, types.OCILayerZStd},
	} {
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar.Bytes())), nil }, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		img, _, err := image.FromLayer(layer, "test")
		if err != nil {
			t.Fatal(err)
		}
		m, err := img.Manifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Layers) != 1 || m.Layers[0].MediaType != c.want {
			t.Errorf("a %s layer's manifest: %+v", c.want, m.Layers)
		}
	}
}
