package testcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// kubeletToolsDir is the module that pins the kubelet the tests' machines
// run: beside the control plane's tools module, with a cache entry of its
// own, so neither build invalidates the other.
func kubeletToolsDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("locate the kubelet's tools module: runtime.Caller failed")
	}
	dir := filepath.Join(filepath.Dir(file), "kubelettools")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("locate the kubelet's tools module: %w", err)
	}
	return dir, nil
}

// EnsureKubelet returns the path of the kubelet at KubernetesVersion,
// building it from the Go module proxy into cacheRoot the first time
// (several minutes on two cores), under a file lock as EnsureBinaries.
func EnsureKubelet(ctx context.Context, cacheRoot string, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	dir, err := kubeletToolsDir()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s/%s\n", buildRecipeVersion, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	final := filepath.Join(cacheRoot, fmt.Sprintf("kubelet-%s_%s", KubernetesVersion, hex.EncodeToString(h.Sum(nil))[:12]))
	err = ensureBuilt(ctx, final, progress, "kubelet "+KubernetesVersion, func(staging string) error {
		// The version a Node reports (status.nodeInfo.kubeletVersion).
		ldflags := fmt.Sprintf("-X k8s.io/component-base/version.gitVersion=%s -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=35 -X k8s.io/component-base/version.gitTreeState=clean", KubernetesVersion)
		return goCommand(ctx, dir, "build", "-trimpath", "-ldflags", ldflags, "-o", filepath.Join(staging, "kubelet"), "k8s.io/kubernetes/cmd/kubelet")
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(final, "kubelet"), nil
}

// ensureBuilt makes the cache entry final with build (into a staging
// directory renamed into place once complete) unless it is complete
// already, under a file lock that makes parallel callers wait for one
// build.
func ensureBuilt(ctx context.Context, final string, progress io.Writer, what string, build func(staging string) error) error {
	if _, err := os.Stat(filepath.Join(final, completeMarker)); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return err
	}
	unlock, err := LockFile(ctx, final+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(final, completeMarker)); err == nil {
		return nil
	}
	staging := final + ".building"
	if err := os.RemoveAll(staging); err != nil {
		return err
	}
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(progress, "testcluster: building %s\n", what)
	if err := build(staging); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(staging, completeMarker), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.RemoveAll(final); err != nil {
		return err
	}
	if err := os.Rename(staging, final); err != nil {
		return err
	}
	fmt.Fprintf(progress, "testcluster: %s ready in %s (%s)\n", what, final, time.Since(start).Round(time.Second))
	return nil
}
