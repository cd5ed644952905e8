package rayctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// Progress is one observation while waiting.
type Progress struct {
	Kind, Namespace, Name string
	// State is a short word (e.g. "ready", "Initializing", "2/3 available").
	State string
	Ready bool
}

// WaitOptions tune the Wait calls.
type WaitOptions struct {
	// Timeout bounds the wait; default 10 minutes.
	Timeout time.Duration
	// Progress, if set, is called on every change observed.
	Progress func(Progress)
}

// ErrFailed is wrapped when a waited-for object reaches a terminal failure.
var ErrFailed = errors.New("failed")

// readiness judges one object: ready, a terminal failure, or neither.
type readiness func(obj runtime.Object) (p Progress, ready bool, err error)

// listWatch lists and watches the one object a wait is about.
type listWatch struct {
	list  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error)
	watch func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error)
}

// waitFor lists the object, judges it, then watches from the list's
// resourceVersion and judges every change; a closed or failed watch leads
// to a fresh list. It works the same on a real API server and on fakes.
func (c *Client) waitFor(ctx context.Context, kind, namespace, name string, lw listWatch, judge readiness, opts WaitOptions) error {
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := Progress{Kind: kind, Namespace: namespace, Name: name}
	observe := func(obj runtime.Object) (bool, error) {
		p, ready, err := judge(obj)
		if err != nil {
			return false, err
		}
		p.Ready = ready
		if p != last && opts.Progress != nil {
			opts.Progress(p)
		}
		last = p
		return ready, nil
	}
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	for {
		list, err := lw.list(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return c.waitError(ctx, last, timeout, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		var found runtime.Object
		for _, it := range items {
			if acc, err := meta.Accessor(it); err == nil && acc.GetName() == name {
				found = it
			}
		}
		if found == nil {
			return fmt.Errorf("%s %s/%s: %w", kind, namespace, name, ErrNotFound)
		}
		if ready, err := observe(found); err != nil || ready {
			return err
		}
		listMeta, err := meta.ListAccessor(list)
		if err != nil {
			return err
		}
		w, err := lw.watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: listMeta.GetResourceVersion()})
		if err != nil {
			return c.waitError(ctx, last, timeout, err)
		}
		ready, err := func() (bool, error) {
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return false, c.waitError(ctx, last, timeout, ctx.Err())
				case ev, ok := <-w.ResultChan():
					if !ok {
						return false, nil
					}
					switch ev.Type {
					case watch.Deleted:
						return false, fmt.Errorf("%s %s/%s was deleted while waiting: %w", kind, namespace, name, ErrNotFound)
					case watch.Added, watch.Modified:
						if acc, err := meta.Accessor(ev.Object); err != nil || acc.GetName() != name {
							continue
						}
						if ready, err := observe(ev.Object); err != nil || ready {
							return ready, err
						}
					case watch.Error:
						return false, nil // relist
					}
				}
			}
		}()
		if err != nil || ready {
			return err
		}
		if ctx.Err() != nil {
			return c.waitError(ctx, last, timeout, ctx.Err())
		}
	}
}

func (c *Client) waitError(ctx context.Context, last Progress, timeout time.Duration, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s/%s not ready after %s (last state %q): %w", last.Kind, last.Namespace, last.Name, timeout, last.State, ctx.Err())
	}
	return err
}

// WaitClusterReady waits until a RayCluster's head and all the workers its
// spec asks for are ready, as the operator reports them for the current
// generation.
func (c *Client) WaitClusterReady(ctx context.Context, namespace, name string, opts WaitOptions) error {
	namespace = c.ns(namespace)
	rcs := c.ray.RayV1().RayClusters(namespace)
	lw := listWatch{
		list:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return rcs.List(ctx, o) },
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return rcs.Watch(ctx, o) },
	}
	return c.waitFor(ctx, "RayCluster", namespace, name, lw, func(obj runtime.Object) (Progress, bool, error) {
		rc := obj.(*rayv1.RayCluster)
		ready, state := clusterReady(rc), clusterState(rc)
		//lint:ignore SA1019 the state word is still what users read
		if ready && rc.Status.State == "" {
			// KubeRay may set HeadPodReady a status update before its state
			// word: the wait ends on what it decided.
			state = string(rayv1.Ready)
		}
		return Progress{Kind: "RayCluster", Namespace: namespace, Name: name, State: state}, ready, nil
	}, opts)
}

// clusterReady: the operator has seen the current spec, the head pod is
// ready, and as many workers are ready as the spec asks for. The
// RayClusterProvisioned condition and the ready state alone are not enough:
// KubeRay computes them from the pods that exist, so a worker whose
// creation was refused for a moment (a ResourceQuota whose usage is not
// computed yet) leaves them true with a worker still to come.
// ClusterReady says whether a RayCluster is ready: its head pod ready (the
// HeadPodReady condition, or the state word of older operators) and every
// desired worker ready, as of its current generation.
func ClusterReady(rc *rayv1.RayCluster) bool { return clusterReady(rc) }

// ClusterState is a RayCluster's state in a word a person reads ("ready",
// "suspended", …), or its ready workers when the operator reports none.
func ClusterState(rc *rayv1.RayCluster) string { return clusterState(rc) }

func clusterReady(rc *rayv1.RayCluster) bool {
	if rc.Status.ObservedGeneration < rc.Generation {
		return false
	}
	if !meta.IsStatusConditionTrue(rc.Status.Conditions, string(rayv1.HeadPodReady)) {
		//lint:ignore SA1019 older operators report only the state field
		if rc.Status.State != rayv1.Ready {
			return false
		}
	}
	return rc.Status.ReadyWorkerReplicas >= rc.Status.DesiredWorkerReplicas
}

func clusterState(rc *rayv1.RayCluster) string {
	//lint:ignore SA1019 the state word is still what users read
	if s := string(rc.Status.State); s != "" {
		return s
	}
	return fmt.Sprintf("%d/%d workers ready", rc.Status.ReadyWorkerReplicas, rc.Status.DesiredWorkerReplicas)
}

// WaitJobRunning waits until a RayJob's deployment status is Running or
// Complete; a Failed job is an error wrapping ErrFailed.
func (c *Client) WaitJobRunning(ctx context.Context, namespace, name string, opts WaitOptions) error {
	return c.waitJob(ctx, namespace, name, opts, func(j *rayv1.RayJob) (bool, error) {
		return j.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusRunning || j.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusComplete, nil
	})
}

// WaitJobFinished waits until a RayJob's Ray job has succeeded. A job
// that failed is an error wrapping ErrFailed; a job that was stopped
// (KubeRay marks it Complete, with job status STOPPED) is an error
// wrapping ErrJobStopped.
func (c *Client) WaitJobFinished(ctx context.Context, namespace, name string, opts WaitOptions) error {
	return c.waitJob(ctx, namespace, name, opts, func(j *rayv1.RayJob) (bool, error) {
		if j.Status.JobDeploymentStatus != rayv1.JobDeploymentStatusComplete {
			return false, nil
		}
		switch j.Status.JobStatus {
		case rayv1.JobStatusStopped:
			return false, fmt.Errorf("RayJob %s/%s was stopped before it finished: %w", j.Namespace, j.Name, ErrJobStopped)
		case rayv1.JobStatusFailed:
			return false, fmt.Errorf("RayJob %s/%s: %s: %w", j.Namespace, j.Name, j.Status.Message, ErrFailed)
		}
		return true, nil
	})
}

// waitJob waits until done says the RayJob is done or returns an error; a
// Failed deployment status is an error wrapping ErrFailed.
func (c *Client) waitJob(ctx context.Context, namespace, name string, opts WaitOptions, done func(*rayv1.RayJob) (bool, error)) error {
	namespace = c.ns(namespace)
	jobs := c.ray.RayV1().RayJobs(namespace)
	lw := listWatch{
		list:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return jobs.List(ctx, o) },
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return jobs.Watch(ctx, o) },
	}
	return c.waitFor(ctx, "RayJob", namespace, name, lw, func(obj runtime.Object) (Progress, bool, error) {
		j := obj.(*rayv1.RayJob)
		p := Progress{Kind: "RayJob", Namespace: namespace, Name: name, State: string(j.Status.JobDeploymentStatus)}
		if j.Status.JobStatus != "" {
			p.State += "/" + string(j.Status.JobStatus)
		}
		if j.Status.JobDeploymentStatus == rayv1.JobDeploymentStatusFailed {
			return p, false, fmt.Errorf("RayJob %s/%s: %s: %w", namespace, name, j.Status.Message, ErrFailed)
		}
		ok, err := done(j)
		return p, ok, err
	}, opts)
}

// WaitServiceReady waits until a RayService reports its Ready condition.
func (c *Client) WaitServiceReady(ctx context.Context, namespace, name string, opts WaitOptions) error {
	namespace = c.ns(namespace)
	svcs := c.ray.RayV1().RayServices(namespace)
	lw := listWatch{
		list:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return svcs.List(ctx, o) },
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return svcs.Watch(ctx, o) },
	}
	return c.waitFor(ctx, "RayService", namespace, name, lw, func(obj runtime.Object) (Progress, bool, error) {
		s := obj.(*rayv1.RayService)
		ready := meta.IsStatusConditionTrue(s.Status.Conditions, string(rayv1.RayServiceReady))
		state := "not ready"
		if cond := meta.FindStatusCondition(s.Status.Conditions, string(rayv1.RayServiceReady)); cond != nil {
			state = cond.Reason
		}
		return Progress{Kind: "RayService", Namespace: namespace, Name: name, State: state}, ready, nil
	}, opts)
}

// WaitDeploymentReady waits until a Deployment's rollout is complete: the
// controller saw the newest generation and every replica is updated and
// available.
func (c *Client) WaitDeploymentReady(ctx context.Context, namespace, name string, opts WaitOptions) error {
	namespace = c.ns(namespace)
	deps := c.kube.AppsV1().Deployments(namespace)
	lw := listWatch{
		list:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return deps.List(ctx, o) },
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return deps.Watch(ctx, o) },
	}
	return c.waitFor(ctx, "Deployment", namespace, name, lw, func(obj runtime.Object) (Progress, bool, error) {
		d := obj.(*appsv1.Deployment)
		want := ptr.Deref(d.Spec.Replicas, 1)
		ready := d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.AvailableReplicas == want && d.Status.Replicas == want
		return Progress{Kind: "Deployment", Namespace: namespace, Name: name,
			State: fmt.Sprintf("%d/%d available", d.Status.AvailableReplicas, want)}, ready, nil
	}, opts)
}
