package testcluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// Versions of the real components, pinned. The Kubernetes and etcd versions
// are also pinned in tools/go.mod; the test in binaries_test.go keeps the two
// in step.
const (
	KubernetesVersion = "v1.35.4"
	EtcdVersion       = "v3.6.8"
	KwokVersion       = "v0.8.0"
	KubeRayVersion    = "v1.6.0"

	kwokModule    = "sigs.k8s.io/kwok"
	kubeRayModule = "github.com/ray-project/kuberay/ray-operator"
)

// CacheDirEnv names the environment variable that overrides where built
// binaries are cached. Tests read it; the library proper never does.
const CacheDirEnv = "GRIDWEAVE_TESTCLUSTER_CACHE"

// Binaries are the paths of the built control-plane programs and the data
// files that go with them, all inside one versioned cache directory.
type Binaries struct {
	Dir                   string
	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	Kwok                  string
	KubeRayOperator       string
	// KwokStages is a kwok configuration file holding the node and pod stages.
	KwokStages string
	// KubeRayCRDs is the directory of KubeRay's CRD manifests at KubeRayVersion.
	KubeRayCRDs string
}

// buildRecipeVersion changes whenever the way binaries are built or laid out
// changes, so that old cache entries are not reused.
const buildRecipeVersion = "1"

// DefaultCacheRoot returns the directory under which versioned binary sets
// are kept: $GRIDWEAVE_TESTCLUSTER_CACHE if set, else
// <user cache dir>/gridweave/testcluster.
func DefaultCacheRoot() (string, error) {
	if dir := os.Getenv(CacheDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find user cache dir (set %s): %w", CacheDirEnv, err)
	}
	return filepath.Join(base, "gridweave", "testcluster"), nil
}

// toolsModuleDir is the directory of the separate tools module that pins
// k8s.io/kubernetes and etcd. It sits beside this file in the source tree.
func toolsModuleDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("locate tools module: runtime.Caller failed")
	}
	dir := filepath.Join(filepath.Dir(file), "tools")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("locate tools module: %w", err)
	}
	return dir, nil
}

// cacheKey names one set of binaries: the component versions for a reader,
// then a digest of everything that influences the build.
func cacheKey(toolsDir string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s/%s\n", buildRecipeVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, name := range []string{"go.mod", "go.sum", "etcd/main.go"} {
		data, err := os.ReadFile(filepath.Join(toolsDir, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	fmt.Fprintf(h, "kwok %s\nkuberay %s\n", KwokVersion, KubeRayVersion)
	return fmt.Sprintf("k8s-%s_kuberay-%s_%s", KubernetesVersion, KubeRayVersion, hex.EncodeToString(h.Sum(nil))[:12]), nil
}

func binariesIn(dir string) *Binaries {
	return &Binaries{
		Dir:                   dir,
		Etcd:                  filepath.Join(dir, "etcd"),
		KubeAPIServer:         filepath.Join(dir, "kube-apiserver"),
		KubeControllerManager: filepath.Join(dir, "kube-controller-manager"),
		KubeScheduler:         filepath.Join(dir, "kube-scheduler"),
		Kwok:                  filepath.Join(dir, "kwok"),
		KubeRayOperator:       filepath.Join(dir, "kuberay-operator"),
		KwokStages:            filepath.Join(dir, "kwok-stages.yaml"),
		KubeRayCRDs:           filepath.Join(dir, "crds"),
	}
}

// completeMarker is written last; a directory without it is an aborted build.
const completeMarker = ".complete"

// EnsureBinaries returns the control-plane binaries, building them from the
// Go module proxy into cacheRoot the first time. A file lock makes parallel
// callers (several test packages at once) wait for one build instead of
// building twice. progress, if not nil, receives one line per build step.
func EnsureBinaries(ctx context.Context, cacheRoot string, progress io.Writer) (*Binaries, error) {
	if progress == nil {
		progress = io.Discard
	}
	toolsDir, err := toolsModuleDir()
	if err != nil {
		return nil, err
	}
	key, err := cacheKey(toolsDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		return nil, err
	}
	final := filepath.Join(cacheRoot, key)
	if _, err := os.Stat(filepath.Join(final, completeMarker)); err == nil {
		return binariesIn(final), nil
	}

	unlock, err := LockFile(ctx, filepath.Join(cacheRoot, key+".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another process may have finished the build while we waited.
	if _, err := os.Stat(filepath.Join(final, completeMarker)); err == nil {
		return binariesIn(final), nil
	}

	staging := final + ".building"
	if err := os.RemoveAll(staging); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := buildAll(ctx, toolsDir, binariesIn(staging), progress); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(staging, completeMarker), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(final); err != nil {
		return nil, err
	}
	if err := os.Rename(staging, final); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "testcluster: binaries ready in %s (%s)\n", final, time.Since(start).Round(time.Second))
	return binariesIn(final), nil
}

// LockFile takes an exclusive flock on path, polling so that ctx can cancel
// the wait; other processes (test packages) wait for it. The returned
// function releases it.
func LockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for lock %s: %w", path, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func buildAll(ctx context.Context, toolsDir string, out *Binaries, progress io.Writer) error {
	step := func(what string) { fmt.Fprintf(progress, "testcluster: building %s\n", what) }

	step("etcd " + EtcdVersion + ", kube-apiserver, kube-controller-manager, kube-scheduler " + KubernetesVersion)
	if err := goCommand(ctx, toolsDir, "build", "-trimpath", "-o", out.Dir+"/",
		"./etcd",
		"k8s.io/kubernetes/cmd/kube-apiserver",
		"k8s.io/kubernetes/cmd/kube-controller-manager",
		"k8s.io/kubernetes/cmd/kube-scheduler",
	); err != nil {
		return err
	}

	// kwok and the KubeRay operator are built inside their own modules, with
	// their own go.sum, exactly as their releases are.
	kwokDir, err := downloadModule(ctx, toolsDir, kwokModule, KwokVersion)
	if err != nil {
		return err
	}
	step("kwok " + KwokVersion)
	if err := goCommand(ctx, kwokDir, "build", "-trimpath", "-o", out.Kwok, "./cmd/kwok"); err != nil {
		return err
	}
	var stages bytes.Buffer
	for _, name := range []string{
		"kustomize/stage/node/fast/node-initialize.yaml",
		"kustomize/stage/pod/fast/pod-ready.yaml",
		"kustomize/stage/pod/fast/pod-complete.yaml",
		"kustomize/stage/pod/fast/pod-delete.yaml",
	} {
		data, err := os.ReadFile(filepath.Join(kwokDir, name))
		if err != nil {
			return fmt.Errorf("read kwok stage: %w", err)
		}
		stages.WriteString("---\n")
		stages.Write(data)
		if !bytes.HasSuffix(data, []byte("\n")) {
			stages.WriteByte('\n')
		}
	}
	if err := os.WriteFile(out.KwokStages, stages.Bytes(), 0o644); err != nil {
		return err
	}

	kuberayDir, err := downloadModule(ctx, toolsDir, kubeRayModule, KubeRayVersion)
	if err != nil {
		return err
	}
	step("kuberay-operator " + KubeRayVersion)
	if err := goCommand(ctx, kuberayDir, "build", "-trimpath", "-o", out.KubeRayOperator, "."); err != nil {
		return err
	}
	if err := os.MkdirAll(out.KubeRayCRDs, 0o755); err != nil {
		return err
	}
	crdFiles, err := filepath.Glob(filepath.Join(kuberayDir, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		return err
	}
	if len(crdFiles) == 0 {
		return fmt.Errorf("no CRDs found in %s", kuberayDir)
	}
	for _, src := range crdFiles {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out.KubeRayCRDs, filepath.Base(src)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// downloadModule fetches module@version into the module cache and returns
// its directory there.
func downloadModule(ctx context.Context, workDir, module, version string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = workDir
	cmd.Env = goEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w\n%s%s", module, version, err, out, stderr.Bytes())
	}
	var info struct {
		Dir   string
		Error string
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", module, version, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: %s", module, version, info.Error)
	}
	return info.Dir, nil
}

func goCommand(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), dir, err, out)
	}
	return nil
}

// goEnv is the environment for building third-party modules: no workspace,
// read-only module files, cgo off (none of these programs need it).
func goEnv() []string {
	env := make([]string, 0, len(os.Environ())+3)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GOFLAGS=") || strings.HasPrefix(kv, "GOWORK=") || strings.HasPrefix(kv, "CGO_ENABLED=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=0")
}
