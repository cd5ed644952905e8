package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"gridweave.dev/rayctl/dashboard"
)

// SubmitOptions are a job for SubmitJob, as `ray job submit` takes them.
type SubmitOptions struct {
	// Entrypoint is the job's shell command (e.g. python train.py).
	Entrypoint string
	// Dir, when set, is local code sent as the job's working_dir (its
	// local Python packages as py_modules) as Dev sends it: only what the
	// cluster does not hold yet.
	Dir string
	// RuntimeEnv is the job's runtime env; Dir's packages take its
	// working_dir and py_modules.
	RuntimeEnv map[string]any
	// SubmissionID names the job; default Ray's (raysubmit_…).
	SubmissionID string
	// EntrypointNumCPUs and EntrypointNumGPUs reserve resources for the
	// driver (and so pick a node that has them).
	EntrypointNumCPUs float64
	EntrypointNumGPUs float64
}

// SubmitResult is what SubmitJob did.
type SubmitResult struct {
	Uploaded     []string // package URIs sent
	Reused       []string // package URIs the cluster already had
	SubmissionID string
}

// SubmitJob submits a job to the Ray dashboard d, sending opts.Dir first.
func (s *Session) SubmitJob(ctx context.Context, d *dashboard.Client, opts SubmitOptions) (SubmitResult, error) {
	var res SubmitResult
	if strings.TrimSpace(opts.Entrypoint) == "" {
		return res, fmt.Errorf("launch: the job's entrypoint is empty: give the command after --, e.g. -- python train.py")
	}
	env := maps.Clone(opts.RuntimeEnv)
	if env == nil {
		env = map[string]any{}
	}
	// Local paths in the runtime env are sent as ray job submit sends
	// them: the working dir, here like --working-dir; local py_modules
	// belong inside it (its packages are sent as py_modules).
	if wd, ok := env["working_dir"].(string); ok && !strings.Contains(wd, "://") {
		if opts.Dir != "" && opts.Dir != wd {
			return res, fmt.Errorf("launch: two working dirs, %s and the runtime env's %s: give one", opts.Dir, wd)
		}
		opts.Dir = wd
		delete(env, "working_dir")
	}
	if mods, ok := env["py_modules"].([]any); ok {
		for _, m := range mods {
			if path, ok := m.(string); ok && !strings.Contains(path, "://") {
				return res, fmt.Errorf("launch: py_modules %q is a local path: put the package in the working dir (its packages are sent as py_modules), or give a URI", path)
			}
		}
	}
	if opts.Dir != "" {
		code, err := s.sendCode(ctx, d, opts.Dir)
		if err != nil {
			return res, err
		}
		res.Uploaded, res.Reused = code.uploaded, code.reused
		code.into(env)
	}
	resp, err := d.SubmitJob(ctx, dashboard.SubmitRequest{Entrypoint: opts.Entrypoint, SubmissionID: opts.SubmissionID, RuntimeEnv: env,
		EntrypointNumCPUs: opts.EntrypointNumCPUs, EntrypointNumGPUs: opts.EntrypointNumGPUs})
	if err != nil {
		return res, fmt.Errorf("submit: %w", err)
	}
	res.SubmissionID = resp.SubmissionID
	return res, nil
}

// sentCode is local code a job runs: the working dir's package and its
// modules', and which were sent.
type sentCode struct {
	workingDir       string
	modules          []string
	uploaded, reused []string
}

// into sets the runtime env's working_dir, and adds the code's local
// modules to its py_modules.
func (c sentCode) into(env map[string]any) {
	env["working_dir"] = c.workingDir
	if len(c.modules) == 0 {
		return
	}
	var mods []any
	switch have := env["py_modules"].(type) {
	case []any:
		mods = append(mods, have...)
	case []string:
		for _, m := range have {
			mods = append(mods, m)
		}
	}
	for _, m := range c.modules {
		mods = append(mods, m)
	}
	env["py_modules"] = mods
}

// sendCode packages dir (PackageDir) and uploads the packages the
// cluster lacks.
func (s *Session) sendCode(ctx context.Context, d *dashboard.Client, dir string) (sentCode, error) {
	var out sentCode
	workingDir, modules, err := PackageDir(dir)
	if err != nil {
		return out, fmt.Errorf("package %s: %w", dir, err)
	}
	for _, pkg := range append([]*Package{workingDir}, modules...) {
		what := "working dir"
		if pkg.Module != "" {
			what = "module " + pkg.Module
			out.modules = append(out.modules, pkg.URI)
		}
		exists, err := d.PackageExists(ctx, pkg.URI)
		if err != nil {
			return out, err
		}
		if exists {
			out.reused = append(out.reused, pkg.URI)
			s.say("%s unchanged (%s)", what, pkg.URI)
			continue
		}
		if err := d.UploadPackage(ctx, pkg.URI, pkg.Zip); err != nil {
			return out, fmt.Errorf("upload %s: %w", what, err)
		}
		out.uploaded = append(out.uploaded, pkg.URI)
		s.say("sent %s: %d files, %d KiB (%s)", what, pkg.Files, (len(pkg.Zip)+1023)/1024, pkg.URI)
	}
	out.workingDir = workingDir.URI
	return out, nil
}

// FollowJob writes job id's log to w as it grows, until the job has
// finished (SUCCEEDED, FAILED or STOPPED), and returns its last state.
// every is the polling interval (default one second). A dashboard that
// fails to answer is asked again; only failures for a minute on end (or
// ctx) end the following, the job running on.
func FollowJob(ctx context.Context, d *dashboard.Client, id string, w io.Writer, every time.Duration) (dashboard.JobDetails, error) {
	if every <= 0 {
		every = time.Second
	}
	written := 0
	var job dashboard.JobDetails
	var failingSince time.Time
	for {
		err := func() error {
			got, err := d.GetJob(ctx, id)
			if err != nil {
				return err
			}
			logs, err := d.JobLogs(ctx, id)
			if err != nil {
				return err
			}
			job = got
			if len(logs) > written {
				if _, err := io.WriteString(w, logs[written:]); err != nil {
					return err
				}
				written = len(logs)
			}
			return nil
		}()
		switch {
		case err == nil:
			failingSince = time.Time{}
			if job.Terminal() {
				return job, nil
			}
		case ctx.Err() != nil:
			return job, ctx.Err()
		case errors.Is(err, dashboard.ErrNotFound):
			return job, err
		case failingSince.IsZero():
			failingSince = time.Now()
		case time.Since(failingSince) > time.Minute:
			return job, fmt.Errorf("the dashboard has not answered for a minute: %w", err)
		}
		select {
		case <-ctx.Done():
			return job, ctx.Err()
		case <-time.After(every):
		}
	}
}
