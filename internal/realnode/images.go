package realnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"gridweave.dev/deploy/image"
	"gridweave.dev/deploy/rayimage"
	"gridweave.dev/internal/testcluster"
)

// TestImage is the tag of the test image: podnet (./podnet) as its
// entrypoint, with "serve ADDR", "get URL" and "hold".
const TestImage = "gridweave.dev/podnet:test"

// imageSources are the packages the images are built from: their files
// and the Go version key the cached tarball.
var imageSources = []string{"deploy/image/pause", "internal/realnode/podnet"}

// ImageTarball returns a tarball of the pause image (image.PauseImage) and
// the test image (TestImage), for ctr images import: built from the
// module in moduleDir without Docker, reproducibly, and cached under the
// test control plane's cache directory by the hash of their sources.
func ImageTarball(ctx context.Context, moduleDir string) (string, error) {
	key, err := sourcesKey(moduleDir)
	if err != nil {
		return "", err
	}
	root, err := testcluster.DefaultCacheRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "images")
	path := filepath.Join(dir, "pause-podnet-"+key[:16]+".tar")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	pause, err := image.BuildPause(ctx, moduleDir)
	if err != nil {
		return "", err
	}
	podnet, err := image.BuildCommand(ctx, moduleDir, "./internal/realnode/podnet", "/podnet", "65534:65534")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := path + fmt.Sprintf(".%d.tmp", os.Getpid())
	if err := image.WriteTarballs(map[string]v1.Image{image.PauseImage: pause, TestImage: podnet}, tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// RayImageTarball is ImageTarball with the Ray images too: the head's
// (rayimage.HeadTag) and the GPU workers' (rayimage.WorkerTag), built by
// deploy/rayimage (as root, with mmdebstrap; cached there). The tarball is
// cached beside ImageTarball's, by the sources and the Ray images'
// digests (an older one is removed); the two Ray images share their one
// layer, stored once.
func RayImageTarball(ctx context.Context, moduleDir string, progress io.Writer) (string, error) {
	pauseAndTest, err := ImageTarball(ctx, moduleDir)
	if err != nil {
		return "", err
	}
	tarballs := []string{pauseAndTest}
	h := sha256.New()
	fmt.Fprintln(h, filepath.Base(pauseAndTest))
	for _, kind := range []rayimage.Kind{rayimage.Head, rayimage.Worker} {
		cached, digest, err := rayimage.Cached(ctx, rayimage.Options{Kind: kind, Progress: progress}, "")
		if err != nil {
			return "", err
		}
		tarballs = append(tarballs, cached)
		fmt.Fprintln(h, kind, digest)
	}
	const prefix = "pause-podnet-ray-"
	dir := filepath.Dir(pauseAndTest)
	path := filepath.Join(dir, prefix+hex.EncodeToString(h.Sum(nil))[:16]+".tar")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	images := map[string]v1.Image{}
	for _, from := range tarballs {
		manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(from) })
		if err != nil {
			return "", fmt.Errorf("realnode: %s: %w", from, err)
		}
		for _, entry := range manifest {
			for _, tag := range entry.RepoTags {
				ref, err := name.NewTag(tag)
				if err != nil {
					return "", err
				}
				if images[tag], err = tarball.ImageFromPath(from, &ref); err != nil {
					return "", fmt.Errorf("realnode: %s in %s: %w", tag, from, err)
				}
			}
		}
	}
	tmp := path + fmt.Sprintf(".%d.tmp", os.Getpid())
	if err := image.WriteTarballs(images, tmp); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	// The tarballs of older sources or images are not wanted again.
	older, _ := filepath.Glob(filepath.Join(dir, prefix+"*.tar"))
	for _, old := range older {
		if old != path {
			_ = os.Remove(old)
		}
	}
	return path, nil
}

func sourcesKey(moduleDir string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), runtime.GOARCH)
	for _, pkg := range imageSources {
		files, err := filepath.Glob(filepath.Join(moduleDir, pkg, "*.go"))
		if err != nil {
			return "", err
		}
		sort.Strings(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
			h.Write(data)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
