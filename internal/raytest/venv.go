package raytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"gridweave.dev/deploy/rayimage"
	"gridweave.dev/internal/testcluster"
)

// Requirements is the pip requirements file the environment is built from.
//
//go:embed requirements.txt
var Requirements string

// Constraints pins every package the requirements resolve to: the same
// pins the Ray images are built with.
var Constraints = rayimage.Constraints

// RayVersion is the Ray release the environment holds.
const RayVersion = "2.54.0"

// CacheDirEnv overrides the directory under which environments are kept.
const CacheDirEnv = "GRIDWEAVE_RAY_CACHE"

// PythonEnv names the Python interpreter the environment is created with
// (default python3 on PATH).
const PythonEnv = "GRIDWEAVE_PYTHON"

// Venv is a ready virtual environment.
type Venv struct {
	Dir    string // the environment's root
	Python string // its interpreter
	Ray    string // its `ray` command
}

// DefaultCacheRoot is $GRIDWEAVE_RAY_CACHE if set, else
// <user cache dir>/gridweave/ray.
func DefaultCacheRoot() (string, error) {
	if dir := os.Getenv(CacheDirEnv); dir != "" {
		return filepath.Abs(dir)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find user cache dir (set %s): %w", CacheDirEnv, err)
	}
	return filepath.Join(base, "gridweave", "ray"), nil
}

func basePython() string {
	if p := os.Getenv(PythonEnv); p != "" {
		return p
	}
	return "python3"
}

// venvKey names one environment: Ray's version for a reader, then a digest
// of the interpreter's version and the requirements.
func venvKey(ctx context.Context, python string) (string, error) {
	out, err := exec.CommandContext(ctx, python, "-c", "import sys, platform; print(sys.version, platform.machine())").Output()
	if err != nil {
		return "", fmt.Errorf("run %s (set %s to a Python 3.10 to 3.13 interpreter): %w", python, PythonEnv, err)
	}
	h := sha256.New()
	h.Write(out)
	h.Write([]byte(Requirements))
	h.Write([]byte(Constraints))
	return fmt.Sprintf("ray-%s_%s", RayVersion, hex.EncodeToString(h.Sum(nil))[:12]), nil
}

const completeMarker = ".complete"

func venvIn(dir string) *Venv {
	return &Venv{Dir: dir, Python: filepath.Join(dir, "bin", "python"), Ray: filepath.Join(dir, "bin", "ray")}
}

// EnsureVenv returns the environment, creating it under cacheRoot with
// `python -m venv` and pip the first time. A file lock makes parallel
// callers (several test packages) wait for one install. progress, if not
// nil, receives pip's output.
func EnsureVenv(ctx context.Context, cacheRoot string, progress io.Writer) (*Venv, error) {
	if progress == nil {
		progress = io.Discard
	}
	python := basePython()
	key, err := venvKey(ctx, python)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cacheRoot, 0o755); err != nil {
		return nil, err
	}
	dir := filepath.Join(cacheRoot, key)
	if _, err := os.Stat(filepath.Join(dir, completeMarker)); err == nil {
		return venvIn(dir), nil
	}
	unlock, err := testcluster.LockFile(ctx, dir+".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, completeMarker)); err == nil {
		return venvIn(dir), nil
	}
	// A virtual environment records its own path in its scripts, so it is
	// built in place; a directory without the marker is an aborted build.
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	start := time.Now()
	fmt.Fprintf(progress, "raytest: creating %s (Ray %s, torch; several GB from PyPI the first time)\n", dir, RayVersion)
	if err := run(ctx, progress, python, "-m", "venv", dir); err != nil {
		return nil, err
	}
	venv := venvIn(dir)
	req, constraints := filepath.Join(dir, "requirements.txt"), filepath.Join(dir, "constraints.txt")
	if err := os.WriteFile(req, []byte(Requirements), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(constraints, []byte(Constraints), 0o644); err != nil {
		return nil, err
	}
	if err := run(ctx, progress, venv.Python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--progress-bar", "off", "-r", req, "-c", constraints); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, completeMarker), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "raytest: environment ready in %s\n", time.Since(start).Round(time.Second))
	return venv, nil
}

func run(ctx context.Context, progress io.Writer, name string, args ...string) error {
	var tail bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = io.MultiWriter(progress, &tail)
	cmd.Stderr = cmd.Stdout
	cmd.Env = append(os.Environ(), "PIP_NO_CACHE_DIR=1")
	if err := cmd.Run(); err != nil {
		out := tail.String()
		if len(out) > 4096 {
			out = out[len(out)-4096:]
		}
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return nil
}
