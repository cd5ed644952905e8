package launch

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/dashboard"
)

// Package is one runtime-env package of local code: content-addressed, so
// an unchanged one is never sent twice.
type Package struct {
	// URI names it in the runtime env: gcs://_ray_pkg_<sha256 prefix>.zip.
	URI string
	// Module is the Python package's name for a py_modules package, empty
	// for the working_dir package.
	Module string
	Files  int
	Zip    []byte
}

// skipped are never packaged: version control, caches, environments.
var skipped = map[string]bool{".git": true, "__pycache__": true, ".venv": true, "venv": true, ".mypy_cache": true, ".pytest_cache": true, "node_modules": true}

// secretPatterns are names never sent: the code goes to storage every job
// on the cluster can read, and these are where credentials live.
var secretPatterns = []string{".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ed25519*", "id_ecdsa*", "id_dsa*",
	".netrc", ".pypirc", ".npmrc", ".aws", ".ssh", ".kube", ".gnupg", ".docker", "kubeconfig", "*.kubeconfig", "credentials.json", "*.secret", "secrets.*"}

// LooksSecret says whether a file or directory name is one PackageDir
// never sends (secretPatterns).
func LooksSecret(name string) bool {
	for _, p := range secretPatterns {
		if ok, _ := filepath.Match(p, name); ok {
			return true
		}
	}
	return false
}

// ignored reads dir/.rayignore (one pattern per line, # comments; a
// pattern matches a name at any depth, or a path relative to dir).
func ignored(dir string) func(rel, name string) bool {
	raw, _ := os.ReadFile(filepath.Join(dir, ".rayignore"))
	var patterns []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.TrimSuffix(strings.TrimPrefix(line, "/"), "/"))
		}
	}
	return func(rel, name string) bool {
		for _, p := range patterns {
			if ok, _ := filepath.Match(p, name); ok {
				return true
			}
			if ok, _ := filepath.Match(p, rel); ok {
				return true
			}
		}
		return false
	}
}

// PackageDir splits a local directory into Ray runtime-env packages, the
// finest split Ray allows: each top-level Python package (a directory
// with __init__.py) becomes a py_modules package of its own, the rest the
// working_dir package; so an edit re-sends only the package it touches.
// The zips are reproducible (sorted, fixed times), so the same files give
// the same URIs. Names that hold credentials (LooksSecret) and what
// .rayignore lists are left out.
func PackageDir(dir string) (workingDir *Package, modules []*Package, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	ignore := ignored(dir)
	var rest []string
	for _, e := range entries {
		if skipped[e.Name()] || LooksSecret(e.Name()) || ignore(e.Name(), e.Name()) {
			continue
		}
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "__init__.py")); err == nil {
				m, err := zipPackage(dir, []string{e.Name()}, ignore)
				if err != nil {
					return nil, nil, err
				}
				m.Module = e.Name()
				modules = append(modules, m)
				continue
			}
		}
		rest = append(rest, e.Name())
	}
	workingDir, err = zipPackage(dir, rest, ignore)
	return workingDir, modules, err
}

// zipPackage zips the named top-level entries of dir (recursively).
func zipPackage(dir string, roots []string, ignore func(rel, name string) bool) (*Package, error) {
	var files []string
	for _, root := range roots {
		err := filepath.WalkDir(filepath.Join(dir, root), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, path)
			rel = filepath.ToSlash(rel)
			leaveOut := skipped[d.Name()] || LooksSecret(d.Name()) || ignore(rel, d.Name())
			if d.IsDir() && leaveOut {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() && !leaveOut && !strings.HasSuffix(d.Name(), ".pyc") {
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	sum := sha256.New()
	epoch := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(sum, "%s\x00%d\x00", name, len(data))
		sum.Write(data)
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: zip.Deflate, Modified: epoch})
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return &Package{URI: "gcs://_ray_pkg_" + hex.EncodeToString(sum.Sum(nil))[:16] + ".zip", Files: len(files), Zip: buf.Bytes()}, nil
}

// DevOptions tune Dev.
type DevOptions struct {
	// Dir is the local code; default ".".
	Dir string
	// DashboardURL reaches the Ray dashboard; default the service proxy.
	DashboardURL string
	// Timeout bounds bringing the cluster up; default 15 minutes.
	Timeout time.Duration
}

// DevResult is what one Dev did.
type DevResult struct {
	BroughtUp    bool     // the cluster was brought up by this call
	Uploaded     []string // package URIs sent
	Reused       []string // package URIs the cluster already had
	SubmissionID string
}

// Dev brings the plan's RayCluster up if it is not running (the plan must
// be a bringup plan: Prepare with Mode bringup), then sends the local code
// as the job's runtime env (only the packages the cluster lacks) and
// submits the recipe's entrypoint. Run it again after an edit: the
// cluster stays, only what changed is sent.
func (s *Session) Dev(ctx context.Context, p *Plan, opts DevOptions) (DevResult, error) {
	var res DevResult
	dir := opts.Dir
	if dir == "" {
		dir = "."
	}
	rc, err := s.Ray.RayV1().RayClusters(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || (err == nil && !rayctl.ClusterReady(rc)):
		res.BroughtUp = apierrors.IsNotFound(err)
		if _, err := s.Run(ctx, p, RunOptions{Timeout: opts.Timeout}); err != nil {
			return res, err
		}
	case err != nil:
		return res, err
	default:
		s.say("RayCluster %s/%s is running; not touching it", p.Namespace, p.Name)
	}
	d, err := s.Dashboard(ctx, p.Namespace, p.Name, opts.DashboardURL)
	if err != nil {
		return res, err
	}
	code, err := s.sendCode(ctx, d, dir)
	if err != nil {
		return res, err
	}
	res.Uploaded, res.Reused = code.uploaded, code.reused
	env := runtimeEnv(p)
	code.into(env)
	resp, err := d.SubmitJob(ctx, dashboard.SubmitRequest{Entrypoint: entrypoint(p), RuntimeEnv: env})
	if err != nil {
		return res, fmt.Errorf("submit to RayCluster %s/%s: %w", p.Namespace, p.Name, err)
	}
	res.SubmissionID = resp.SubmissionID
	s.say("submitted job %s; follow it with: launcher job logs %s --cluster %s -n %s", resp.SubmissionID, resp.SubmissionID, p.Name, p.Namespace)
	return res, nil
}
