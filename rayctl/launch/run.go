package launch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"gridweave.dev/manifest"
	"gridweave.dev/manifest/validation"
	"gridweave.dev/rayctl"
	"gridweave.dev/rayctl/dashboard"
)

// Plan is a rendered, linted launch: what Run applies.
type Plan struct {
	Recipe *manifest.Recipe
	Infra  *manifest.Infra
	// Name is the launch's name: the RayCluster or RayJob, and the
	// app.kubernetes.io/instance label of everything it applies.
	Name      string
	Namespace string
	// Objects are applied in this order.
	Objects []*unstructured.Unstructured
	// Skipped are rendered but never applied by the live path: the
	// namespace's ResourceQuota and LimitRange.
	Skipped  []*unstructured.Unstructured
	Findings []validation.Finding
}

// ErrLint is returned by Run when lint found errors; nothing was applied.
var ErrLint = errors.New("lint found errors; nothing was applied")

// ErrInterrupted is returned when the wait was cancelled (Ctrl-C): what
// was applied keeps running.
var ErrInterrupted = errors.New("interrupted")

// PrepareOptions override the infra spec.
type PrepareOptions struct {
	Namespace string // the infra spec's namespace
	Mode      string // launch.mode (dev brings up a bare cluster: bringup)
}

// Prepare renders the recipe and infra spec with opts' overrides and lints
// the result.
func (s *Session) Prepare(recipePath, infraPath string, opts PrepareOptions) (*Plan, error) {
	r, err := manifest.LoadRecipe(recipePath)
	if err != nil {
		return nil, err
	}
	in, err := manifest.LoadInfra(infraPath)
	if err != nil {
		return nil, err
	}
	if opts.Namespace != "" {
		in.Namespace = opts.Namespace
	}
	if opts.Mode != "" {
		in.Launch.Mode = opts.Mode
	}
	objs, err := manifest.Render(r, in)
	if err != nil {
		return nil, err
	}
	p := &Plan{Recipe: r, Infra: in, Name: r.Name, Namespace: in.Namespace}
	if in.Launch.ClusterName != "" {
		p.Name = in.Launch.ClusterName
	}
	docs := make([]validation.Document, len(objs))
	for i, o := range objs {
		docs[i] = validation.Document{Source: fmt.Sprintf("render#%d %s/%s", i+1, o.GetKind(), o.GetName()), Object: o}
	}
	p.Findings = validation.Lint(s.Validator, docs)
	for _, o := range objs {
		switch o.GetKind() {
		case "ResourceQuota", "LimitRange":
			p.Skipped = append(p.Skipped, o)
		default:
			p.Objects = append(p.Objects, o)
		}
	}
	return p, nil
}

// RunOptions tune Run.
type RunOptions struct {
	// Timeout bounds the wait; default 15 minutes.
	Timeout time.Duration
	// NoWait returns once everything is applied (or submitted).
	NoWait bool
	// DashboardURL reaches the Ray dashboard in attach mode; default the
	// API server's service proxy to the cluster's head service.
	DashboardURL string
}

// RunResult is what Run did.
type RunResult struct {
	Applied []string // Kind/name, in apply order
	// SubmissionID is the dashboard job of an attach launch.
	SubmissionID string
}

// Run applies the plan and starts the workload per launch.mode, then
// waits until it runs, saying why pods are not running while it waits.
func (s *Session) Run(ctx context.Context, p *Plan, opts RunOptions) (RunResult, error) {
	var res RunResult
	if validation.HasErrors(p.Findings) {
		for _, f := range p.Findings {
			s.say("%s", f)
		}
		return res, ErrLint
	}
	for _, o := range p.Skipped {
		s.say("not applied: %s %s (a cluster administrator applies namespace quotas and limits; see launcher render)", o.GetKind(), o.GetName())
	}
	if err := s.warnUnrolled(ctx, p); err != nil {
		return res, err
	}
	applied, err := s.Rayctl.Apply(ctx, p.Objects, rayctl.ApplyOptions{})
	for _, o := range applied {
		res.Applied = append(res.Applied, o.GetKind()+"/"+o.GetName())
		s.say("applied %s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
	}
	if err != nil {
		return res, err
	}
	if p.Infra.Launch.Mode == manifest.ModeAttach {
		id, err := s.submitToCluster(ctx, p, opts.DashboardURL)
		res.SubmissionID = id
		if err == nil {
			s.say("submitted job %s to RayCluster %s/%s; follow it with: launcher job logs %s --cluster %s -n %s", id, p.Namespace, p.Name, id, p.Name, p.Namespace)
		}
		return res, err
	}
	if opts.NoWait {
		return res, nil
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 15 * time.Minute
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = s.waitLaunch(wctx, p)
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		s.say("interrupted: what was applied keeps running. Follow it: launcher status %s -n %s; launcher logs %s -n %s --follow. Stop it: launcher cluster down %s -n %s",
			p.Name, p.Namespace, p.Name, p.Namespace, p.Name, p.Namespace)
		return res, ErrInterrupted
	case wctx.Err() != nil:
		return res, fmt.Errorf("%s %s/%s not running after %s (see launcher status %s -n %s)", kindOf(p), p.Namespace, p.Name, timeout, p.Name, p.Namespace)
	}
	return res, err
}

func kindOf(p *Plan) string {
	if p.Infra.Launch.Mode == manifest.ModeRayJob {
		return "RayJob"
	}
	return "RayCluster"
}

// waitLaunch polls the launch until its Ray part runs and its sandbox is
// available, printing what changed.
func (s *Session) waitLaunch(ctx context.Context, p *Plan) error {
	spin := newSpinner(s)
	defer spin.done()
	for {
		state, ready, err := s.launchState(ctx, p)
		if err != nil {
			return err
		}
		pods, err := s.launchPods(ctx, p)
		if err != nil {
			return err
		}
		lines := append([]string{state}, Explain(pods)...)
		spin.show(lines)
		if ready {
			spin.done()
			s.say("%s %s/%s is running", kindOf(p), p.Namespace, p.Name)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.poll()):
		}
	}
}

// launchState is a line about the Ray object and the sandbox, and whether
// both are ready; a terminal failure is an error.
func (s *Session) launchState(ctx context.Context, p *Plan) (string, bool, error) {
	var parts []string
	ready := true
	switch p.Infra.Launch.Mode {
	case manifest.ModeRayJob:
		job, err := s.Ray.RayV1().RayJobs(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return "", false, err
		}
		st := job.Status
		if st.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed || st.JobStatus == rayv1.JobStatusFailed {
			return "", false, fmt.Errorf("RayJob %s/%s failed: %s %s", p.Namespace, p.Name, st.Reason, st.Message)
		}
		parts = append(parts, fmt.Sprintf("RayJob %s: deployment %s, job %s", p.Name, orDash(string(st.JobDeploymentStatus)), orDash(string(st.JobStatus))))
		ready = st.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning || st.JobDeploymentStatus == rayv1.JobDeploymentStatusComplete
	default:
		rc, err := s.Ray.RayV1().RayClusters(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return "", false, err
		}
		parts = append(parts, fmt.Sprintf("RayCluster %s: %s", p.Name, rayctl.ClusterState(rc)))
		ready = rayctl.ClusterReady(rc)
	}
	if sb := sandboxDeployment(p); sb != "" {
		d, err := s.Kube.AppsV1().Deployments(p.Namespace).Get(ctx, sb, metav1.GetOptions{})
		if err != nil {
			return "", false, err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		parts = append(parts, fmt.Sprintf("sandbox %d/%d available", d.Status.AvailableReplicas, want))
		ready = ready && d.Status.AvailableReplicas >= want
	}
	return strings.Join(parts, "; "), ready, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// sandboxDeployment is the name of the plan's sandbox Deployment, if any.
func sandboxDeployment(p *Plan) string {
	for _, o := range p.Objects {
		if o.GetKind() == "Deployment" && o.GetLabels()["app.kubernetes.io/component"] == "sandbox" {
			return o.GetName()
		}
	}
	return ""
}

// launchPods lists every pod of the launch: the Ray cluster's (a RayJob's
// cluster has a generated name), the sandbox's and the submitter's.
func (s *Session) launchPods(ctx context.Context, p *Plan) ([]corev1.Pod, error) {
	return s.podsOf(ctx, p.Namespace, p.Name)
}

// podsOf lists the pods of the launch called name.
func (s *Session) podsOf(ctx context.Context, namespace, name string) ([]corev1.Pod, error) {
	clusters := []string{name}
	if job, err := s.Ray.RayV1().RayJobs(namespace).Get(ctx, name, metav1.GetOptions{}); err == nil && job.Status.RayClusterName != "" {
		clusters = append(clusters, job.Status.RayClusterName)
	}
	selectors := []string{"app.kubernetes.io/instance=" + name, "batch.kubernetes.io/job-name=" + name}
	for _, c := range clusters {
		selectors = append(selectors, "ray.io/cluster="+c)
	}
	seen := map[string]bool{}
	var out []corev1.Pod
	for _, sel := range selectors {
		list, err := s.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, err
		}
		for _, pod := range list.Items {
			if !seen[pod.Name] {
				seen[pod.Name] = true
				out = append(out, pod)
			}
		}
	}
	return out, nil
}

// submitToCluster submits the recipe's entrypoint to the existing
// cluster through its dashboard's Jobs API, with the sandbox URLs in the
// runtime env.
func (s *Session) submitToCluster(ctx context.Context, p *Plan, dashboardURL string) (string, error) {
	d, err := s.Dashboard(ctx, p.Namespace, p.Name, dashboardURL)
	if err != nil {
		return "", err
	}
	resp, err := d.SubmitJob(ctx, dashboard.SubmitRequest{Entrypoint: entrypoint(p), RuntimeEnv: runtimeEnv(p)})
	if err != nil {
		return "", fmt.Errorf("submit to RayCluster %s/%s: %w", p.Namespace, p.Name, err)
	}
	return resp.SubmissionID, nil
}

// entrypoint is the command the launch's job runs, as a RayJob would.
func entrypoint(p *Plan) string {
	return manifest.JobEntrypoint(p.Recipe, sandboxURL(p))
}

// runtimeEnv is the recipe's runtime env with the sandbox URLs added.
func runtimeEnv(p *Plan) map[string]any {
	env := map[string]string{}
	runtimeEnv := map[string]any{}
	if re := p.Recipe.RuntimeEnv; re != nil {
		maps.Copy(env, re.EnvVars)
		if re.WorkingDir != "" {
			runtimeEnv["working_dir"] = re.WorkingDir
		}
		if len(re.PyModules) > 0 {
			runtimeEnv["py_modules"] = re.PyModules
		}
	}
	if url := sandboxURL(p); url != "" {
		env[manifest.SandboxURLsEnv] = url
	}
	runtimeEnv["env_vars"] = env
	return runtimeEnv
}

// sandboxURL is the in-cluster URL of the plan's sandbox service, when
// the infra spec injects it (sandbox.injectUrls), as Render gives it to
// the Ray pods it renders.
func sandboxURL(p *Plan) string {
	if !p.Infra.Sandbox.InjectURLs {
		return ""
	}
	for _, o := range p.Objects {
		if o.GetKind() == "Service" && o.GetLabels()["app.kubernetes.io/component"] == "sandbox" {
			ports, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
			port := int64(80)
			if len(ports) > 0 {
				if m, ok := ports[0].(map[string]any); ok {
					if v, ok := m["port"].(int64); ok {
						port = v
					}
				}
			}
			return fmt.Sprintf("http://%s.%s.svc.cluster.local:%d", o.GetName(), p.Namespace, port)
		}
	}
	return ""
}
