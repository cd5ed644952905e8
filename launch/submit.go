package launch

import (
	"context"
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

// into sets the runtime env's working_dir, and its py_modules when the
// code has local modules.
func (c sentCode) into(env map[string]any) {
	env["working_dir"] = c.workingDir
	if len(c.modules) > 0 {
		env["py_modules"] = c.modules
	}
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
// every is the polling interval (default one second).
func FollowJob(ctx context.Context, d *dashboard.Client, id string, w io.Writer, every time.Duration) (dashboard.JobDetails, error) {
	if every <= 0 {
		every = time.Second
	}
	written := 0
	flush := func() error {
		logs, err := d.JobLogs(ctx, id)
		if err != nil {
			return err
		}
		if len(logs) > written {
			if _, err := io.WriteString(w, logs[written:]); err != nil {
				return err
			}
			written = len(logs)
		}
		return nil
	}
	for {
		job, err := d.GetJob(ctx, id)
		if err != nil {
			return job, err
		}
		if err := flush(); err != nil {
			return job, err
		}
		if job.Terminal() {
			return job, nil
		}
		select {
		case <-ctx.Done():
			return job, ctx.Err()
		case <-time.After(every):
		}
	}
}
