package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PauseImage is the tag of the pause image a machine imports: the one
// containerd's CRI plugin asks for by default (sandbox_image), so pods
// start without a registry.
const PauseImage = "registry.k8s.io/pause:3.10.1"

// File is one file of a small image: its path inside, mode and content.
type File struct {
	Path string
	Mode int64
	Data []byte
}

// Small assembles a one-layer image of files, with no base, running
// entrypoint as user (uid:gid): every timestamp is the epoch and the files
// are in path order, so the same files give the same digest.
func Small(files []File, entrypoint []string, user string, labels map[string]string) (v1.Image, error) {
	layerTar, err := tarOf(files)
	if err != nil {
		return nil, err
	}
	img, cfg, err := oneLayer(layerTar, "gridweave deploy/image")
	if err != nil {
		return nil, err
	}
	cfg.Config.Entrypoint = entrypoint
	cfg.Config.User = user
	cfg.Config.Labels = labels
	return mutate.ConfigFile(img, cfg)
}

// tarOf is a layer of files, with their parent directories, in path order.
func tarOf(files []File) ([]byte, error) {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "." && d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	var names []string
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	sorted := append([]File(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range names {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, f := range sorted {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, Size: int64(len(f.Data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// BuildPause builds the pause command of the module in moduleDir (static,
// reproducible) and packs it as the pause image: /pause as uid 65535, as
// Kubernetes' own.
func BuildPause(ctx context.Context, moduleDir string) (v1.Image, error) {
	return BuildCommand(ctx, moduleDir, "./deploy/image/pause", "/pause", "65535:65535")
}

// BuildCommand builds the Go command pkg of the module in moduleDir
// (static, reproducible: no paths, build id or VCS stamp) and packs it as
// a one-file image running it at path as user: the same source gives the
// same digest.
func BuildCommand(ctx context.Context, moduleDir, pkg, path, user string) (v1.Image, error) {
	dir, err := os.MkdirTemp("", "gridweave-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "command")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid=", "-o", bin, pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("image: build %s: %v: %s", pkg, err, out)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	return Small([]File{{Path: path, Mode: 0o755, Data: data}}, []string{path}, user,
		map[string]string{"org.opencontainers.image.title": filepath.Base(path), "org.opencontainers.image.source": "https://gridweave.dev"})
}

// WriteTarballs writes several images, each under its tag, as one
// tarball a container runtime imports at once (ctr images import).
func WriteTarballs(images map[string]v1.Image, path string) error {
	refs := make(map[name.Reference]v1.Image, len(images))
	for tag, img := range images {
		ref, err := name.NewTag(tag)
		if err != nil {
			return fmt.Errorf("image: the tag %q: %w", tag, err)
		}
		refs[ref] = img
	}
	return tarball.MultiRefWriteToFile(path, refs)
}
