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
	"slices"
	"sort"
	"strings"
	"time"

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
// and the GPU workers', built by deploy/rayimage with the extras given
// (as root, with mmdebstrap; cached there) and tagged RayImageTags. The
// tarball is cached beside ImageTarball's, by the sources and the Ray
// images' digests (one of other sources is removed after a day unused);
// the two Ray images share their one layer, stored once.
func RayImageTarball(ctx context.Context, moduleDir string, extras []string, progress io.Writer) (string, error) {
	pauseAndTest, err := ImageTarball(ctx, moduleDir)
	if err != nil {
		return "", err
	}
	tarballs := []string{pauseAndTest}
	h := sha256.New()
	fmt.Fprintln(h, filepath.Base(pauseAndTest))
	headTag, workerTag := RayImageTags(extras)
	for _, image := range []struct {
		kind rayimage.Kind
		tag  string
	}{{rayimage.Head, headTag}, {rayimage.Worker, workerTag}} {
		kind, tag := image.kind, image.tag
		cached, digest, err := rayimage.Cached(ctx, rayimage.Options{Kind: kind, Extras: extras, Progress: progress}, tag)
		if err != nil {
			return "", err
		}
		tarballs = append(tarballs, cached)
		fmt.Fprintln(h, kind, tag, digest)
	}
	variant := "default"
	if len(extras) > 0 {
		variant = strings.Join(slices.Compact(slices.Sorted(slices.Values(extras))), "-")
	}
	prefix := "pause-podnet-ray-" + variant + "-"
	dir := filepath.Dir(pauseAndTest)
	path := filepath.Join(dir, prefix+hex.EncodeToString(h.Sum(nil))[:16]+".tar")
	// A tarball there is marked in use, so that another checkout's build
	// keeps it (one it has just removed is written again).
	if now := time.Now(); os.Chtimes(path, now, now) == nil {
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
	// The tarballs of older sources or images (of these extras, or named
	// before the variant was in the name) go once no checkout has used
	// them for a day: another checkout of other sources may be importing
	// its own now.
	hash := strings.Repeat("[0-9a-f]", 16)
	for _, pattern := range []string{prefix + hash + ".tar", "pause-podnet-ray-" + hash + ".tar"} {
		older, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, old := range older {
			if info, err := os.Stat(old); err == nil && old != path && time.Since(info.ModTime()) > unusedTarballAge {
				_ = os.Remove(old)
			}
		}
	}
	return path, nil
}

// unusedTarballAge is how long RayImageTarball keeps an image tarball of
// other sources that no checkout has asked for.
const unusedTarballAge = 24 * time.Hour

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

// RayImageTags are the tags RayImageTarball gives the head's and the
// workers' images: rayimage.HeadTag and rayimage.WorkerTag, and with
// extras, gridweave-ray:<Ray>-py311-<extras> and
// gridweave-worker:<extras> (the extras sorted, joined by "-").
func RayImageTags(extras []string) (head, worker string) {
	if len(extras) == 0 {
		return rayimage.HeadTag, rayimage.WorkerTag
	}
	suffix := strings.Join(slices.Compact(slices.Sorted(slices.Values(extras))), "-")
	return rayimage.HeadTag + "-" + suffix, strings.Split(rayimage.WorkerTag, ":")[0] + ":" + suffix
}
