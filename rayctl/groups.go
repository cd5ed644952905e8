package rayctl

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"
)

// AddWorkerGroup builds the typed group and adds it to the cluster.
func (c *Client) AddWorkerGroup(ctx context.Context, namespace, cluster string, g WorkerGroup) (*rayv1.RayCluster, error) {
	spec, err := g.Build()
	if err != nil {
		return nil, err
	}
	return c.AddWorkerGroupSpec(ctx, namespace, cluster, spec)
}

// AddWorkerGroupRaw decodes a full WorkerGroupSpec from JSON (strictly:
// an unknown or duplicate field is an error naming it), validates it, and
// adds it to the cluster.
func (c *Client) AddWorkerGroupRaw(ctx context.Context, namespace, cluster string, raw []byte) (*rayv1.RayCluster, error) {
	spec, err := DecodeWorkerGroupSpec(raw)
	if err != nil {
		return nil, err
	}
	return c.AddWorkerGroupSpec(ctx, namespace, cluster, spec)
}

// DecodeWorkerGroupSpec decodes a WorkerGroupSpec strictly (an unknown or
// duplicate field is an InvalidSpecError naming it) and requires a
// container. The add call then checks the whole cluster with KubeRay's
// rules before anything is sent.
func DecodeWorkerGroupSpec(raw []byte) (rayv1.WorkerGroupSpec, error) {
	var spec rayv1.WorkerGroupSpec
	strict, err := sigsjson.UnmarshalStrict(raw, &spec)
	if err != nil {
		return spec, invalid("worker_group", "not a WorkerGroupSpec: %v", err)
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return spec, invalid("worker_group", "%s", strings.Join(msgs, "; "))
	}
	if len(spec.Template.Spec.Containers) == 0 {
		return spec, invalid("worker_group.template.spec.containers", "at least one container is required")
	}
	if spec.RayStartParams == nil {
		spec.RayStartParams = map[string]string{}
	}
	return spec, nil
}

// AddWorkerGroupSpec adds a worker group in one update of the RayCluster.
// A group of that name already there is ErrGroupExists.
func (c *Client) AddWorkerGroupSpec(ctx context.Context, namespace, cluster string, spec rayv1.WorkerGroupSpec) (*rayv1.RayCluster, error) {
	out, err := c.updateCluster(ctx, namespace, cluster, func(rc *rayv1.RayCluster) error {
		if groupIndex(rc, spec.GroupName) >= 0 {
			return fmt.Errorf("%w: %q in RayCluster %s/%s", ErrGroupExists, spec.GroupName, rc.Namespace, rc.Name)
		}
		rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs, *spec.DeepCopy())
		return nil
	})
	if err == nil {
		c.log.InfoContext(ctx, "worker group added", "cluster", cluster, "group", spec.GroupName)
	}
	return out, err
}

// RemoveOptions tune RemoveWorkerGroup.
type RemoveOptions struct {
	// Immediate drops the group from the spec and deletes its pods at once,
	// instead of draining first.
	Immediate bool
	// Timeout bounds the drain; default 5 minutes.
	Timeout time.Duration
}

// restoreTimeout bounds the write that undoes a drain that failed, which
// runs even when the caller's context has ended.
const restoreTimeout = 30 * time.Second

// RemoveWorkerGroup removes a worker group. By default it drains: it
// scales the group to 0, waits until no pod of the group remains, and only
// then drops the group from the spec — KubeRay would orphan the pods of a
// group removed while they run. When the cluster runs the autoscaler,
// which otherwise ignores a lower count, every pod of the group seen while
// draining is named in workersToDelete, including pods created after the
// scale-down was written.
//
// If the drain does not finish within the timeout (or ctx ends), the group
// is put back as it was (its replicas, minimum, maximum and
// workersToDelete) and the error says so, or says that it is left at 0
// replicas if that write failed too.
//
// With Immediate it drops the group and deletes its pods.
func (c *Client) RemoveWorkerGroup(ctx context.Context, namespace, cluster, group string, opts RemoveOptions) (*rayv1.RayCluster, error) {
	namespace = c.ns(namespace)
	if opts.Immediate {
		out, err := c.updateCluster(ctx, namespace, cluster, func(rc *rayv1.RayCluster) error {
			i := groupIndex(rc, group)
			if i < 0 {
				return groupNotFound(rc, group)
			}
			rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs[:i], rc.Spec.WorkerGroupSpecs[i+1:]...)
			return nil
		})
		if err != nil {
			return nil, err
		}
		return out, c.DeleteGroupPods(ctx, namespace, cluster, group)
	}

	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	drainCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		before      groupCounts
		autoscaling bool
	)
	_, err := c.updateCluster(drainCtx, namespace, cluster, func(rc *rayv1.RayCluster) error {
		i := groupIndex(rc, group)
		if i < 0 {
			return groupNotFound(rc, group)
		}
		g := &rc.Spec.WorkerGroupSpecs[i]
		before = countsOf(g)
		autoscaling = ptr.Deref(rc.Spec.EnableInTreeAutoscaling, false)
		g.Replicas, g.MinReplicas, g.MaxReplicas = ptr.To[int32](0), ptr.To[int32](0), ptr.To[int32](0)
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.log.InfoContext(ctx, "draining worker group", "cluster", cluster, "group", group)
	named, err := c.drain(drainCtx, namespace, cluster, group, autoscaling)
	if err != nil {
		return nil, c.undoDrain(ctx, namespace, cluster, group, before, named, err)
	}
	out, err := c.updateCluster(ctx, namespace, cluster, func(rc *rayv1.RayCluster) error {
		i := groupIndex(rc, group)
		if i < 0 {
			return groupNotFound(rc, group)
		}
		rc.Spec.WorkerGroupSpecs = append(rc.Spec.WorkerGroupSpecs[:i], rc.Spec.WorkerGroupSpecs[i+1:]...)
		return nil
	})
	if err == nil {
		c.log.InfoContext(ctx, "worker group removed", "cluster", cluster, "group", group)
	}
	return out, err
}

// groupCounts is what a drain changes in a worker group.
type groupCounts struct {
	replicas, minReplicas, maxReplicas *int32
	workersToDelete                    []string
}

func countsOf(g *rayv1.WorkerGroupSpec) groupCounts {
	return groupCounts{
		replicas: g.Replicas, minReplicas: g.MinReplicas, maxReplicas: g.MaxReplicas,
		workersToDelete: slices.Clone(g.ScaleStrategy.WorkersToDelete),
	}
}

func (gc groupCounts) String() string {
	return fmt.Sprintf("replicas %d (min %d, max %d)", ptr.Deref(gc.replicas, 0), ptr.Deref(gc.minReplicas, 0), ptr.Deref(gc.maxReplicas, 0))
}

// drain waits until no pod of the group is left. With the autoscaler on,
// KubeRay deletes only the pods named in workersToDelete, so every pod
// seen is named there, including one created after the scale-down (it is
// seen by the watch, then named). It returns the names it added.
//
// Each round starts the watch before it lists, so that no event after the
// list can be missed even where a watch cannot start from the list's
// resourceVersion (fake clientsets); events about pods the list already
// reflects are harmless.
func (c *Client) drain(ctx context.Context, namespace, cluster, group string, autoscaling bool) (named []string, err error) {
	pods := c.kube.CoreV1().Pods(namespace)
	selector := groupSelector(cluster, group)
	matches, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("pod selector of worker group %q: %w", group, err)
	}
	seen := map[string]bool{}
	for {
		gone, err := func() (bool, error) {
			w, err := pods.Watch(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, fmt.Errorf("watch pods of worker group %q: %w", group, err)
			}
			defer w.Stop()
			list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
			if err != nil {
				return false, fmt.Errorf("list pods of worker group %q: %w", group, err)
			}
			left := map[string]bool{}
			var unseen []string
			for _, p := range list.Items {
				left[p.Name] = true
				if !seen[p.Name] {
					unseen = append(unseen, p.Name)
					seen[p.Name] = true
				}
			}
			if len(left) == 0 {
				return true, nil
			}
			if autoscaling && len(unseen) > 0 {
				added, err := c.nameWorkersToDelete(ctx, namespace, cluster, group, unseen)
				named = append(named, added...)
				if err != nil {
					return false, err
				}
			}
			return watchDrain(ctx, w, matches, left, seen)
		}()
		if err != nil || gone {
			return named, err
		}
	}
}

// nameWorkersToDelete adds pods to the group's workersToDelete and returns
// those it added (not there yet).
func (c *Client) nameWorkersToDelete(ctx context.Context, namespace, cluster, group string, pods []string) ([]string, error) {
	var added []string
	_, err := c.updateCluster(ctx, namespace, cluster, func(rc *rayv1.RayCluster) error {
		i := groupIndex(rc, group)
		if i < 0 {
			return groupNotFound(rc, group)
		}
		s := &rc.Spec.WorkerGroupSpecs[i].ScaleStrategy
		added = added[:0]
		for _, p := range pods {
			if !slices.Contains(s.WorkersToDelete, p) {
				s.WorkersToDelete = append(s.WorkersToDelete, p)
				added = append(added, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("name pods of worker group %q in workersToDelete: %w", group, err)
	}
	return added, nil
}

// watchDrain follows the events of pods matching selector until no pod
// in left remains (true), the watch ends or a pod not seen before appears
// (false, to list again), or ctx ends (an error naming the pods still
// there).
func watchDrain(ctx context.Context, w watch.Interface, selector labels.Selector, left, seen map[string]bool) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			names := slices.Sorted(maps.Keys(left))
			return false, fmt.Errorf("%d pods still present (%s): %w", len(names), strings.Join(names, ", "), ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok || ev.Type == watch.Error {
				return false, nil
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod || !selector.Matches(labels.Set(p.Labels)) {
				continue
			}
			switch ev.Type {
			case watch.Deleted:
				delete(left, p.Name)
			case watch.Added:
				if !seen[p.Name] {
					return false, nil
				}
			}
			if len(left) == 0 {
				return true, nil
			}
		}
	}
}

// undoDrain puts a group whose drain failed back as it was before and
// returns the error for the caller, saying in which state the group is.
// It writes with a context of its own: the caller's may have ended.
func (c *Client) undoDrain(ctx context.Context, namespace, cluster, group string, before groupCounts, named []string, drainErr error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	_, err := c.updateCluster(ctx, namespace, cluster, func(rc *rayv1.RayCluster) error {
		i := groupIndex(rc, group)
		if i < 0 {
			return groupNotFound(rc, group)
		}
		g := &rc.Spec.WorkerGroupSpecs[i]
		g.Replicas, g.MinReplicas, g.MaxReplicas = before.replicas, before.minReplicas, before.maxReplicas
		g.ScaleStrategy.WorkersToDelete = slices.DeleteFunc(g.ScaleStrategy.WorkersToDelete, func(p string) bool {
			return slices.Contains(named, p) && !slices.Contains(before.workersToDelete, p)
		})
		return nil
	})
	if err != nil {
		c.log.WarnContext(ctx, "drain failed and the worker group could not be put back", "cluster", cluster, "group", group, "error", err)
		return fmt.Errorf("drain worker group %q of RayCluster %s/%s: %w; the group is left in the cluster at 0 replicas, draining: putting back %s failed: %w",
			group, namespace, cluster, drainErr, before, err)
	}
	c.log.InfoContext(ctx, "drain failed; worker group put back", "cluster", cluster, "group", group)
	return fmt.Errorf("drain worker group %q of RayCluster %s/%s: %w; the group was not removed and is put back to %s",
		group, namespace, cluster, drainErr, before)
}

// DeleteGroupPods deletes every pod of a worker group (the operator
// recreates those the spec still asks for).
func (c *Client) DeleteGroupPods(ctx context.Context, namespace, cluster, group string) error {
	namespace = c.ns(namespace)
	err := c.kube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: groupSelector(cluster, group)})
	if err != nil {
		return fmt.Errorf("delete pods of worker group %q: %w", group, err)
	}
	return nil
}

// SwapWorkerGroup replaces group old by spec in ONE update of the
// RayCluster (same position in the list; head and other groups untouched),
// then deletes the old group's pods. spec may reuse the old name.
func (c *Client) SwapWorkerGroup(ctx context.Context, namespace, cluster, old string, spec rayv1.WorkerGroupSpec) (*rayv1.RayCluster, error) {
	namespace = c.ns(namespace)
	out, err := c.updateCluster(ctx, namespace, cluster, func(rc *rayv1.RayCluster) error {
		i := groupIndex(rc, old)
		if i < 0 {
			return groupNotFound(rc, old)
		}
		if spec.GroupName != old && groupIndex(rc, spec.GroupName) >= 0 {
			return fmt.Errorf("%w: %q in RayCluster %s/%s", ErrGroupExists, spec.GroupName, rc.Namespace, rc.Name)
		}
		rc.Spec.WorkerGroupSpecs[i] = *spec.DeepCopy()
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.log.InfoContext(ctx, "worker group swapped", "cluster", cluster, "old", old, "new", spec.GroupName)
	// A group under the same name keeps its pods; KubeRay does not roll
	// templates, so they are deleted to come back with the new one.
	return out, c.DeleteGroupPods(ctx, namespace, cluster, old)
}

// ReplaceWorkerGroups sets the whole list of worker groups in ONE update
// of the RayCluster, then deletes the pods of every group that is gone or
// whose pods would now be made differently (KubeRay does not roll them):
// a change of its pod template, rayStartParams, resources or labels. The
// groups are compared as the server stored them before and after the
// write, so that defaults the server fills in (protocol TCP on a port, and
// the like) are on both sides and a group the caller sent unchanged keeps
// its pods.
func (c *Client) ReplaceWorkerGroups(ctx context.Context, namespace, cluster string, specs []rayv1.WorkerGroupSpec) (*rayv1.RayCluster, error) {
	namespace = c.ns(namespace)
	var before []rayv1.WorkerGroupSpec
	out, err := c.updateCluster(ctx, namespace, cluster, func(rc *rayv1.RayCluster) error {
		before = slices.Clone(rc.Spec.WorkerGroupSpecs) // rc is a copy; its groups are replaced below, not edited
		rc.Spec.WorkerGroupSpecs = make([]rayv1.WorkerGroupSpec, len(specs))
		for i := range specs {
			rc.Spec.WorkerGroupSpecs[i] = *specs[i].DeepCopy()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.log.InfoContext(ctx, "worker groups replaced", "cluster", cluster, "groups", len(specs))
	var errs []error
	for _, old := range before {
		i := groupIndex(out, old.GroupName)
		if i >= 0 && samePods(&old, &out.Spec.WorkerGroupSpecs[i]) {
			continue
		}
		errs = append(errs, c.DeleteGroupPods(ctx, namespace, cluster, old.GroupName))
	}
	return out, errors.Join(errs...)
}

// samePods reports whether two versions of a worker group make the same
// pods: the same template, rayStartParams, resources and labels.
func samePods(a, b *rayv1.WorkerGroupSpec) bool {
	return equality.Semantic.DeepEqual(a.Template, b.Template) &&
		equality.Semantic.DeepEqual(a.RayStartParams, b.RayStartParams) &&
		equality.Semantic.DeepEqual(a.Resources, b.Resources) &&
		equality.Semantic.DeepEqual(a.Labels, b.Labels)
}

func groupSelector(cluster, group string) string {
	return "ray.io/cluster=" + cluster + ",ray.io/group=" + group
}
