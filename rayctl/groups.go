package rayctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		c.log.Info("worker group added", "cluster", cluster, "group", spec.GroupName)
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

// RemoveWorkerGroup removes a worker group. By default it drains: it
// scales the group to 0 (naming its pods in workersToDelete when the
// autoscaler is on, which otherwise ignores a lower count), waits until no
// pod of the group remains, and only then drops the group from the spec —
// KubeRay would orphan the pods of a group removed while they run. With
// Immediate it drops the group and deletes its pods.
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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pods, err := c.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: groupSelector(cluster, group)})
	if err != nil {
		return nil, err
	}
	_, err = c.updateCluster(ctx, namespace, cluster, func(rc *rayv1.RayCluster) error {
		i := groupIndex(rc, group)
		if i < 0 {
			return groupNotFound(rc, group)
		}
		g := &rc.Spec.WorkerGroupSpecs[i]
		g.Replicas, g.MinReplicas, g.MaxReplicas = ptr.To[int32](0), ptr.To[int32](0), ptr.To[int32](0)
		if ptr.Deref(rc.Spec.EnableInTreeAutoscaling, false) {
			for _, p := range pods.Items {
				g.ScaleStrategy.WorkersToDelete = append(g.ScaleStrategy.WorkersToDelete, p.Name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("draining worker group", "cluster", cluster, "group", group, "pods", len(pods.Items))
	if err := c.waitNoPods(ctx, namespace, groupSelector(cluster, group)); err != nil {
		return nil, fmt.Errorf("drain worker group %q: %w", group, err)
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
		c.log.Info("worker group removed", "cluster", cluster, "group", group)
	}
	return out, err
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
	c.log.Info("worker group swapped", "cluster", cluster, "old", old, "new", spec.GroupName)
	// A group under the same name keeps its pods; KubeRay does not roll
	// templates, so they are deleted to come back with the new one.
	return out, c.DeleteGroupPods(ctx, namespace, cluster, old)
}

// ReplaceWorkerGroups sets the whole list of worker groups in ONE update
// of the RayCluster, then deletes the pods of every group that is gone or
// whose pod template changed (KubeRay does not roll templates).
func (c *Client) ReplaceWorkerGroups(ctx context.Context, namespace, cluster string, specs []rayv1.WorkerGroupSpec) (*rayv1.RayCluster, error) {
	namespace = c.ns(namespace)
	var stale []string
	out, err := c.updateCluster(ctx, namespace, cluster, func(rc *rayv1.RayCluster) error {
		stale = stale[:0]
		for _, g := range rc.Spec.WorkerGroupSpecs {
			kept := false
			for _, n := range specs {
				if n.GroupName == g.GroupName && equality.Semantic.DeepEqual(n.Template, g.Template) {
					kept = true
				}
			}
			if !kept {
				stale = append(stale, g.GroupName)
			}
		}
		rc.Spec.WorkerGroupSpecs = make([]rayv1.WorkerGroupSpec, len(specs))
		for i := range specs {
			rc.Spec.WorkerGroupSpecs[i] = *specs[i].DeepCopy()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.log.Info("worker groups replaced", "cluster", cluster, "groups", len(specs))
	var errs []error
	for _, g := range stale {
		errs = append(errs, c.DeleteGroupPods(ctx, namespace, cluster, g))
	}
	return out, errors.Join(errs...)
}

func groupSelector(cluster, group string) string {
	return "ray.io/cluster=" + cluster + ",ray.io/group=" + group
}
