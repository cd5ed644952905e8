package rayimage

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"gridweave.dev/deploy/image"
)

// Constraints pins every Python package Ray's requirements resolve to:
// the images and the real-Ray test environment are built with the same.
//
//go:embed constraints.txt
var Constraints string

// RayVersion is the Ray release in the images.
const RayVersion = "2.54.0"

// Suite is the Debian release of the root filesystem; its python3 is 3.11,
// so a head from another image must run Python 3.11 too (Ray refuses a
// node whose Python differs from the head's).
const Suite = "bookworm"

// PythonVersion is the Python of Suite.
const PythonVersion = "3.11"

// The images' tags.
const (
	WorkerTag = "gridweave-worker:latest"
	HeadTag   = "gridweave-ray:" + RayVersion + "-py311"
)

// DefaultMirror is the Debian archive the root filesystem comes from.
const DefaultMirror = "http://deb.debian.org/debian"

// Packages are the Debian packages of the root filesystem, beside
// bookworm's minimal base: Python with `python` on PATH and pip (Ray's
// runtime environments install with it), bash (KubeRay runs its commands
// with bash -lc), wget and curl (the probes of older Ray versions), CA
// certificates, passwd (the ray user), netbase and procps.
var Packages = []string{
	"bash", "ca-certificates", "curl", "netbase", "passwd", "procps",
	"python-is-python3", "python3", "python3-pip", "wget",
}

// An Extra is an optional addition to an image: Debian packages, pip
// requirements, extras of Ray's own package, and pins that replace
// Constraints' for the packages they name.
type Extra struct {
	Debian   []string
	Pip      []string
	RayExtra []string
	Pins     map[string]string
}

// Extras are the optional additions an image may take
// (WORKER_IMAGE_EXTRAS, RAY_IMAGE_EXTRAS), each pinned. Both give Ray
// Train (ray[train]) with torch, what KubeTorch's training runs:
//   - torch is PyPI's default build, with its CUDA libraries (several GB);
//   - torch-cpu is Debian's build of torch 1.13 for the CPU (a few hundred
//     MB), compiled against NumPy 1, so NumPy is pinned to the last 1.x
//     and pandas and pyarrow to releases that take it (pandas 2 adds
//     pytz, pinned too).
//
// Pins are keyed by the package's normalized name (PEP 503: lower case,
// runs of "-", "_" and "." one "-").
var Extras = map[string]Extra{
	"torch": {Pip: []string{"torch==2.9.1"}, RayExtra: []string{"train"}},
	"torch-cpu": {Debian: []string{"python3-torch"}, RayExtra: []string{"train"}, Pins: map[string]string{
		"numpy": "numpy==1.26.4", "pandas": "pandas==2.3.3", "pyarrow": "pyarrow==21.0.0", "pytz": "pytz==2026.6"}},
}

// exclusiveExtras are extras one image cannot take together.
var exclusiveExtras = [][2]string{{"torch", "torch-cpu"}}

// The user the images run as, KubeRay's convention.
const (
	UserID  = 1000
	GroupID = 100 // users
	Home    = "/home/ray"
)

// Kind is which image.
type Kind string

// The two images.
const (
	Head   Kind = "head"   // the head and CPU workers (RAY_IMAGE)
	Worker Kind = "worker" // the GPU workers (RAY_IMAGE_WORKER)
)

// Options say what to build.
type Options struct {
	Kind Kind
	// Extras name entries of Extras to add (torch, torch-cpu); none by
	// default.
	Extras []string
	// CacheDir keeps root filesystems and images; default
	// <user cache dir>/gridweave/rayimage.
	CacheDir string
	// Mirror is the Debian archive; default DefaultMirror (the security
	// archive is its sibling debian-security).
	Mirror string
	// CABundle is the CA bundle pip trusts while it installs (a proxy's CA
	// among them), copied in for the install and removed after; default
	// DebianCACerts.
	CABundle string
	// Progress receives mmdebstrap's and pip's output; nil discards it.
	Progress io.Writer
}

// DebianCACerts is where Debian's ca-certificates package puts its bundle.
const DebianCACerts = "/etc/ssl/certs/ca-certificates.crt"

// ErrNotRoot and ErrNoMmdebstrap say why a root filesystem cannot be
// built here.
var (
	ErrNotRoot      = errors.New("rayimage: building a root filesystem needs root (mmdebstrap's root mode)")
	ErrNoMmdebstrap = errors.New("rayimage: mmdebstrap is not installed (Debian and Ubuntu: apt-get install mmdebstrap)")
)

// builderVersion changes whenever what this package puts in a root
// filesystem changes, so an old cache entry is never taken for a new one.
const builderVersion = "2"

// imageVersion changes whenever what Image puts around a root filesystem
// (the image's configuration, the layer's compression) changes: a cached
// image is kept by both.
const imageVersion = "4"

// Tag is the image's default tag.
func (k Kind) Tag() string {
	if k == Worker {
		return WorkerTag
	}
	return HeadTag
}

func (o *Options) check() error {
	switch o.Kind {
	case Head, Worker:
	case "":
		return errors.New("rayimage: Kind is required (head or worker)")
	default:
		return fmt.Errorf("rayimage: Kind %q: want head or worker", o.Kind)
	}
	o.Extras = slices.Compact(slices.Sorted(slices.Values(o.Extras)))
	for _, e := range o.Extras {
		if _, ok := Extras[e]; !ok {
			known := make([]string, 0, len(Extras))
			for k := range Extras {
				known = append(known, k)
			}
			slices.Sort(known)
			return fmt.Errorf("rayimage: extra %q is not one of %s", e, strings.Join(known, ", "))
		}
	}
	for _, pair := range exclusiveExtras {
		if slices.Contains(o.Extras, pair[0]) && slices.Contains(o.Extras, pair[1]) {
			return fmt.Errorf("rayimage: extras %s and %s: one image takes one build of torch", pair[0], pair[1])
		}
	}
	if o.Mirror == "" {
		o.Mirror = DefaultMirror
	}
	if !mirrorPattern.MatchString(o.Mirror) {
		return fmt.Errorf("rayimage: Mirror %q: want an http(s) URL without spaces or quotes", o.Mirror)
	}
	if o.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("rayimage: no CacheDir and no user cache dir: %w", err)
		}
		o.CacheDir = filepath.Join(base, "gridweave", "rayimage")
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.CABundle == "" {
		o.CABundle = DebianCACerts
	}
	return nil
}

var mirrorPattern = regexp.MustCompile(`^https?://[A-Za-z0-9._~:/%+-]+$`)

// requirements is pip's requirements file for o: Ray with the dashboard
// and its agents (and the extras' extras of Ray), and the extras'
// packages.
func (o *Options) requirements() string {
	rayExtras := []string{"default"}
	var reqs []string
	for _, e := range o.Extras { // sorted and without repeats (check)
		rayExtras = append(rayExtras, Extras[e].RayExtra...)
		reqs = append(reqs, Extras[e].Pip...)
	}
	rayExtras = slices.Compact(slices.Sorted(slices.Values(rayExtras)))
	reqs = append([]string{"ray[" + strings.Join(rayExtras, ",") + "]==" + RayVersion}, reqs...)
	return strings.Join(reqs, "\n") + "\n"
}

// packages are the Debian packages of o's root filesystem: Packages,
// then the extras' that Packages does not hold, each once.
func (o *Options) packages() []string {
	packages := slices.Clone(Packages)
	for _, e := range o.Extras {
		for _, p := range Extras[e].Debian {
			if !slices.Contains(packages, p) {
				packages = append(packages, p)
			}
		}
	}
	return packages
}

// constraints are Constraints with the extras' pins in place of the
// lines for the packages they name.
func (o *Options) constraints() string {
	pins := map[string]string{}
	for _, e := range o.Extras {
		maps.Copy(pins, Extras[e].Pins)
	}
	if len(pins) == 0 {
		return Constraints
	}
	var b strings.Builder
	for line := range strings.Lines(Constraints) {
		if name, _, ok := pinnedName(line); ok {
			if pin, ok := pins[name]; ok {
				b.WriteString(pin + "\n")
				delete(pins, name)
				continue
			}
		}
		b.WriteString(line)
	}
	for _, name := range slices.Sorted(maps.Keys(pins)) {
		b.WriteString(pins[name] + "\n")
	}
	return b.String()
}

// pinnedName is the normalized name of the package a requirements or
// constraints line pins (name==version), and the version; false for
// comments, blank lines and other specifiers.
func pinnedName(line string) (name, version string, ok bool) {
	line, _, _ = strings.Cut(line, "#")
	line, _, _ = strings.Cut(line, ";") // an environment marker
	name, version, ok = strings.Cut(strings.TrimSpace(line), "==")
	if !ok {
		return "", "", false
	}
	name, _, _ = strings.Cut(name, "[")
	return normalizedName(strings.TrimSpace(name)), strings.TrimSpace(version), true
}

// normalizedName is a Python package's name as PEP 503 compares names.
func normalizedName(name string) string {
	return strings.ToLower(nameSeparators.ReplaceAllString(name, "-"))
}

var nameSeparators = regexp.MustCompile(`[-_.]+`)

// checkPinned says which packages pip installed in a root filesystem
// (their dist-info directories in its tar) that pins (the requirements
// and the constraints) do not pin at the version installed: each would
// be whatever PyPI offers on the day of the build.
func checkPinned(rootfs, pins string) error {
	pinned := map[string]string{}
	for line := range strings.Lines(pins) {
		if name, version, ok := pinnedName(line); ok {
			pinned[name] = version
		}
	}
	f, err := os.Open(rootfs)
	if err != nil {
		return err
	}
	defer f.Close()
	site := "usr/local/lib/python" + PythonVersion + "/dist-packages/"
	var unpinned []string
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("rayimage: read %s: %w", rootfs, err)
		}
		dir, ok := strings.CutPrefix(strings.TrimSuffix(hdr.Name, "/"), site)
		if !ok || hdr.Typeflag != tar.TypeDir || strings.Contains(dir, "/") || !strings.HasSuffix(dir, ".dist-info") {
			continue
		}
		// (Wheels write "-" in a name as "_": the last "-" ends it.)
		nameVersion := strings.TrimSuffix(dir, ".dist-info")
		cut := strings.LastIndex(nameVersion, "-")
		if cut < 0 {
			continue
		}
		name, version := nameVersion[:cut], nameVersion[cut+1:]
		if pinned[normalizedName(name)] != version {
			unpinned = append(unpinned, name+"=="+version)
		}
	}
	if len(unpinned) > 0 {
		return fmt.Errorf("rayimage: pip installed packages the constraints do not pin (pin them in constraints.txt or the extra's Pins): %s", strings.Join(unpinned, ", "))
	}
	return nil
}

// rootfsKey names a root filesystem by everything that goes into it.
func (o *Options) rootfsKey() string {
	h := sha256.New()
	for _, part := range []string{builderVersion, Suite, o.Mirror, strings.Join(o.packages(), ","), o.requirements(), o.constraints()} {
		fmt.Fprintf(h, "%d:%s\n", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Build makes the image (its root filesystem from the cache when built
// before) and writes it at path as a tarball tagged tag (Kind.Tag() when
// empty); it returns the image's digest. The same inputs give the same
// digest.
func Build(ctx context.Context, o Options, path, tag string) (v1.Hash, error) {
	cached, digest, err := Cached(ctx, o, tag)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := copyFile(cached, path); err != nil {
		return v1.Hash{}, fmt.Errorf("rayimage: %w", err)
	}
	return digest, nil
}

// Cached is Build without the copy: the path of the image's tarball in
// the cache (built first when it is not there) and its digest. The file
// is the cache's: read it, never change it.
func Cached(ctx context.Context, o Options, tag string) (string, v1.Hash, error) {
	if err := o.check(); err != nil {
		return "", v1.Hash{}, err
	}
	if tag == "" {
		tag = o.Kind.Tag()
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return "", v1.Hash{}, fmt.Errorf("rayimage: tag %q: %w", tag, err)
	}
	if _, err := RootFS(ctx, o); err != nil {
		return "", v1.Hash{}, err
	}
	// The tarball of one root filesystem, image configuration, kind and
	// tag is kept with its digest.
	entryName := o.rootfsKey() + "-" + imageVersion + "-" + string(o.Kind) + "-" + strings.NewReplacer("/", "_", ":", "_").Replace(tag)
	entry := filepath.Join(o.CacheDir, "images", entryName)
	cached, digestFile := entry+".tar", entry+".digest"
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		return "", v1.Hash{}, err
	}
	unlock, err := lockFile(entry + ".lock")
	if err != nil {
		return "", v1.Hash{}, err
	}
	defer unlock()
	digest, err := readDigest(digestFile)
	if _, statErr := os.Stat(cached); err != nil || statErr != nil {
		img, err := Image(ctx, o)
		if err != nil {
			return "", v1.Hash{}, err
		}
		if digest, err = img.Digest(); err != nil {
			return "", v1.Hash{}, err
		}
		partial := cached + ".partial"
		if err := tarball.WriteToFile(partial, ref, img); err != nil {
			_ = os.Remove(partial)
			return "", v1.Hash{}, fmt.Errorf("rayimage: write %s: %w", partial, err)
		}
		if err := os.Rename(partial, cached); err != nil {
			return "", v1.Hash{}, fmt.Errorf("rayimage: %w", err)
		}
		if err := os.WriteFile(digestFile, []byte(digest.String()+"\n"), 0o644); err != nil {
			return "", v1.Hash{}, fmt.Errorf("rayimage: %w", err)
		}
	} else {
		markUsed(cached, time.Now())
	}
	// The cache keeps what was used lately; the rest of it goes. An
	// error there does not fail the build.
	if err := pruneCache(o.CacheDir, map[string]bool{o.rootfsKey(): true, entryName: true}, time.Now(), o.Progress); err != nil {
		fmt.Fprintf(o.Progress, "rayimage: pruning the cache: %v\n", err)
	}
	return cached, digest, nil
}

// readDigest reads a digest Build kept beside an image tarball.
func readDigest(path string) (v1.Hash, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return v1.Hash{}, err
	}
	return v1.NewHash(strings.TrimSpace(string(raw)))
}

// Image is the image of o, its root filesystem built or taken from the
// cache.
func Image(ctx context.Context, o Options) (v1.Image, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	rootfs, err := RootFS(ctx, o)
	if err != nil {
		return nil, err
	}
	// zstd at its fastest level: a smaller layer than gzip's, which a
	// machine's containerd unpacks several times faster.
	layer, err := tarball.LayerFromFile(rootfs, tarball.WithMediaType(types.OCILayerZStd), tarball.WithCompression(compression.ZStd), tarball.WithCompressionLevel(1))
	if err != nil {
		return nil, err
	}
	img, cfg, err := image.FromLayer(layer, "gridweave deploy/rayimage: Debian "+Suite+" (mmdebstrap), "+strings.TrimSpace(strings.ReplaceAll(o.requirements(), "\n", " "))+" (pip)")
	if err != nil {
		return nil, err
	}
	cfg.Config.User = fmt.Sprintf("%d:%d", UserID, GroupID)
	cfg.Config.WorkingDir = Home
	cfg.Config.Cmd = []string{"bash"}
	cfg.Config.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"LANG=C.UTF-8",
		"HOME=" + Home,
		// Ray refuses a node or driver whose Python differs from the
		// cluster's down to the patch release unless told the minor
		// release is enough: Debian's 3.11 and another image's 3.11 then
		// form one cluster.
		"RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor",
		// The head's dashboard gives each of its modules this long to
		// start, 30 s by default, and the head exits when one is late:
		// on a small machine that starts the cluster's other pods at
		// the same time, a module can be.
		"RAY_DASHBOARD_SUBPROCESS_MODULE_WAIT_READY_TIMEOUT=120",
	}
	title, description := "gridweave-ray", "Ray "+RayVersion+" (Python "+PythonVersion+") for the head and CPU workers of a Gridweave cluster"
	if o.Kind == Worker {
		title, description = "gridweave-worker", "Ray "+RayVersion+" (Python "+PythonVersion+") for the GPU workers of a Gridweave cluster"
		// What the NVIDIA container runtime reads to hand the GPUs in.
		cfg.Config.Env = append(cfg.Config.Env, "NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility")
	}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": description,
		"org.opencontainers.image.version":     RayVersion,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.source":      "https://gridweave.dev",
		"org.opencontainers.image.base.name":   "debian:" + Suite,
		"dev.gridweave.ray.version":            RayVersion,
		"dev.gridweave.python.version":         PythonVersion,
	}
	if len(o.Extras) > 0 {
		cfg.Config.Labels["dev.gridweave.extras"] = strings.Join(o.Extras, ",")
	}
	return mutate.ConfigFile(img, cfg)
}

// RootFS is the path of o's root filesystem as a normalized tar, built by
// mmdebstrap and pip unless the cache holds it.
func RootFS(ctx context.Context, o Options) (string, error) {
	if err := o.check(); err != nil {
		return "", err
	}
	dir := filepath.Join(o.CacheDir, "rootfs-"+o.rootfsKey())
	final := filepath.Join(dir, "rootfs.tar")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// One build at a time per root filesystem: a second builder (another
	// test package, another make) waits, then finds it in the cache. A
	// use takes the lock too, so that no prune removes what it marks
	// used.
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(final); err == nil {
		markUsed(final, time.Now())
		return final, nil
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return "", ErrNoMmdebstrap
	}
	if os.Geteuid() != 0 {
		return "", ErrNotRoot
	}
	// The staging directory of a build that died is removed here, under
	// the lock.
	work := filepath.Join(dir, "build")
	if err := os.RemoveAll(work); err != nil {
		return "", fmt.Errorf("rayimage: %w", err)
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return "", fmt.Errorf("rayimage: %w", err)
	}
	defer os.RemoveAll(work)
	for file, content := range map[string]string{"requirements.txt": o.requirements(), "constraints.txt": o.constraints()} {
		if err := os.WriteFile(filepath.Join(work, file), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if err := copyFile(o.CABundle, filepath.Join(work, "host-ca.crt")); err != nil {
		return "", fmt.Errorf("rayimage: this machine's CA bundle (for pip in the root filesystem): %w", err)
	}
	raw := filepath.Join(work, "raw.tar")
	cmd := exec.CommandContext(ctx, "mmdebstrap", o.mmdebstrapArgs(work, raw)...)
	cmd.Env = append(os.Environ(),
		"SOURCE_DATE_EPOCH=0",
		// Python's sets of constants are ordered by string hashes: a fixed
		// seed gives the same bytecode on every build.
		"PYTHONHASHSEED=0",
		"LC_ALL=C.UTF-8",
	)
	cmd.Stdout, cmd.Stderr = o.Progress, o.Progress
	// Cancelled, mmdebstrap is asked to stop, so it unmounts what it
	// mounted in its temporary root; killed only if it does not.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("rayimage: mmdebstrap: %w (run with progress to see its output)", err)
	}
	normalized := filepath.Join(work, "rootfs.tar")
	if err := normalizeFile(raw, normalized); err != nil {
		return "", err
	}
	if err := checkPinned(normalized, o.requirements()+o.constraints()); err != nil {
		return "", err
	}
	if err := os.Rename(normalized, final); err != nil {
		return "", fmt.Errorf("rayimage: %w", err)
	}
	return final, nil
}

// mmdebstrapArgs: a minimal bookworm with Packages, the ray user, Ray
// from PyPI, and Python's bytecode compiled once, in a fixed order, with
// hash-based invalidation (no timestamps in it).
func (o *Options) mmdebstrapArgs(work, out string) []string {
	security := strings.TrimSuffix(o.Mirror, "/") + "-security"
	// Commands in the root filesystem get an environment of their own,
	// not this process's (whose pip or Python settings would change what
	// is installed): a fixed one, this machine's proxies, and for pip the
	// CA bundle it trusts, copied in for the install and removed after.
	chrootEnv := "chroot \"$1\" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8" +
		" SOURCE_DATE_EPOCH=0 PYTHONHASHSEED=0" +
		` http_proxy="${http_proxy:-}" https_proxy="${https_proxy:-}" no_proxy="${no_proxy:-}"` +
		` HTTP_PROXY="${HTTP_PROXY:-}" HTTPS_PROXY="${HTTPS_PROXY:-}" NO_PROXY="${NO_PROXY:-}"`
	pip := chrootEnv + " PIP_CERT=/tmp/host-ca.crt REQUESTS_CA_BUNDLE=/tmp/host-ca.crt SSL_CERT_FILE=/tmp/host-ca.crt python3 -m pip install" +
		" --break-system-packages --no-compile --no-cache-dir --no-input --progress-bar off --disable-pip-version-check" +
		" -r /tmp/requirements.txt -c /tmp/constraints.txt"
	return []string{
		"--mode=root", "--variant=minbase", "--format=tar",
		"--include=" + strings.Join(o.packages(), ","),
		"--aptopt=Acquire::Retries \"3\"",
		"--customize-hook=copy-in " + filepath.Join(work, "requirements.txt") + " " + filepath.Join(work, "constraints.txt") + " " + filepath.Join(work, "host-ca.crt") + " /tmp",
		fmt.Sprintf("--customize-hook=chroot \"$1\" useradd --uid %d --gid %d --create-home --home-dir %s --shell /bin/bash ray", UserID, GroupID, Home),
		"--customize-hook=" + pip,
		"--customize-hook=rm -f \"$1\"/tmp/requirements.txt \"$1\"/tmp/constraints.txt \"$1\"/tmp/host-ca.crt",
		"--customize-hook=find \"$1\" -xdev -name __pycache__ -type d -prune -exec rm -rf {} +",
		// A few files in packages are not Python 3 on purpose (test data);
		// compileall says so and goes on.
		"--customize-hook=" + chrootEnv + " python3 -m compileall -q -j 1 --invalidation-mode unchecked-hash /usr/lib/python3 /usr/lib/python" + PythonVersion + " /usr/local/lib/python" + PythonVersion + " >/dev/null || true",
		// Ray itself must have compiled: the rest may not have.
		"--customize-hook=test -f \"$1\"/usr/local/lib/python" + PythonVersion + "/dist-packages/ray/__pycache__/__init__.cpython-" + strings.ReplaceAll(PythonVersion, ".", "") + ".pyc",
		Suite, out,
		"deb " + o.Mirror + " " + Suite + " main",
		"deb " + o.Mirror + " " + Suite + "-updates main",
		"deb " + security + " " + Suite + "-security main",
	}
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if dir := filepath.Dir(to); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
