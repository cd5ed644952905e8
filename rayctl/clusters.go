package rayctl

import (
	"context"
	"fmt"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// CreateCluster builds the RayCluster that spec describes and creates it.
func (c *Client) CreateCluster(ctx context.Context, spec ClusterSpec) (*rayv1.RayCluster, error) {
	rc, err := spec.Build()
	if err != nil {
		return nil, err
	}
	return c.CreateRayCluster(ctx, rc)
}

// CreateRayCluster validates a full RayCluster with KubeRay's rules and
// creates it. Its namespace defaults to the Client's.
func (c *Client) CreateRayCluster(ctx context.Context, rc *rayv1.RayCluster) (*rayv1.RayCluster, error) {
	rc = rc.DeepCopy()
	rc.Namespace = c.ns(rc.Namespace)
	if err := ValidateCluster(rc); err != nil {
		return nil, err
	}
	out, err := c.ray.RayV1().RayClusters(rc.Namespace).Create(ctx, rc, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, fmt.Errorf("create RayCluster %s/%s: %w", rc.Namespace, rc.Name, err)
	}
	c.log.InfoContext(ctx, "RayCluster created", "namespace", out.Namespace, "name", out.Name)
	return out, nil
}

// GetCluster returns the RayCluster, or an error wrapping ErrClusterNotFound.
func (c *Client) GetCluster(ctx context.Context, namespace, name string) (*rayv1.RayCluster, error) {
	namespace = c.ns(namespace)
	rc, err := c.ray.RayV1().RayClusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, clusterNotFound(namespace, name)
	}
	return rc, err
}

// ListOptions select objects.
type ListOptions struct {
	Namespace string // default the Client's; use metav1.NamespaceAll for all
	// LabelSelector in the usual syntax, e.g. "team=ml,env!=dev".
	LabelSelector string
}

// ListClusters lists RayClusters.
func (c *Client) ListClusters(ctx context.Context, opts ListOptions) ([]rayv1.RayCluster, error) {
	ns := opts.Namespace
	if ns == "" {
		ns = c.namespace
	}
	list, err := c.ray.RayV1().RayClusters(ns).List(ctx, metav1.ListOptions{LabelSelector: opts.LabelSelector})
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

// DeleteOptions tune DeleteCluster.
type DeleteOptions struct {
	// Wait until the RayCluster and its pods are gone.
	Wait bool
	// Timeout bounds the wait; default 5 minutes.
	Timeout time.Duration
}

// DeleteCluster deletes a RayCluster; its pods and Services are garbage
// collected. With Wait it returns once the RayCluster and every pod
// labelled with it are gone.
func (c *Client) DeleteCluster(ctx context.Context, namespace, name string, opts DeleteOptions) error {
	namespace = c.ns(namespace)
	err := c.ray.RayV1().RayClusters(namespace).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)})
	if apierrors.IsNotFound(err) {
		return clusterNotFound(namespace, name)
	}
	if err != nil {
		return err
	}
	c.log.InfoContext(ctx, "RayCluster deleted", "namespace", namespace, "name", name)
	if !opts.Wait {
		return nil
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.waitGone(ctx, namespace, name); err != nil {
		return err
	}
	return c.waitNoPods(ctx, namespace, clusterSelector(name))
}

// waitGone watches the RayCluster until it is deleted.
func (c *Client) waitGone(ctx context.Context, namespace, name string) error {
	rcs := c.ray.RayV1().RayClusters(namespace)
	for {
		list, err := rcs.List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return nil
		}
		w, err := rcs.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: list.ResourceVersion})
		if err != nil {
			return err
		}
		deleted, err := untilDeleted(ctx, w)
		if err != nil || deleted {
			return err
		}
	}
}

func untilDeleted(ctx context.Context, w watch.Interface) (bool, error) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("wait for deletion: %w", ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, nil // re-list and watch again
			}
			if ev.Type == watch.Deleted {
				return true, nil
			}
		}
	}
}

// Scale sets a worker group's replica counts; nil fields keep their value.
type Scale struct {
	Replicas    *int32 `json:"replicas,omitempty"`
	MinReplicas *int32 `json:"min_replicas,omitempty"`
	MaxReplicas *int32 `json:"max_replicas,omitempty"`
}

// ScaleGroup changes a worker group's replicas, min and max in one update,
// checking min ≤ replicas ≤ max on the merged values.
func (c *Client) ScaleGroup(ctx context.Context, namespace, cluster, group string, s Scale) (*rayv1.RayCluster, error) {
	if s.Replicas == nil && s.MinReplicas == nil && s.MaxReplicas == nil {
		return nil, invalid("replicas", "give at least one of replicas, min_replicas, max_replicas")
	}
	return c.updateCluster(ctx, namespace, cluster, func(rc *rayv1.RayCluster) error {
		i := groupIndex(rc, group)
		if i < 0 {
			return groupNotFound(rc, group)
		}
		g := &rc.Spec.WorkerGroupSpecs[i]
		replicas, minR, maxR := ptr.Deref(s.Replicas, ptr.Deref(g.Replicas, 0)), ptr.Deref(s.MinReplicas, ptr.Deref(g.MinReplicas, 0)), ptr.Deref(s.MaxReplicas, ptr.Deref(g.MaxReplicas, 0))
		switch {
		case replicas < 0 || minR < 0 || maxR < 0:
			return invalid("replicas", "replicas, min_replicas and max_replicas must not be negative")
		case minR > maxR:
			return invalid("min_replicas", "%d is above max_replicas %d", minR, maxR)
		case replicas < minR || replicas > maxR:
			return invalid("replicas", "%d is outside [min_replicas %d, max_replicas %d]", replicas, minR, maxR)
		}
		g.Replicas, g.MinReplicas, g.MaxReplicas = ptr.To(replicas), ptr.To(minR), ptr.To(maxR)
		return nil
	})
}

func groupIndex(rc *rayv1.RayCluster, group string) int {
	for i, g := range rc.Spec.WorkerGroupSpecs {
		if g.GroupName == group {
			return i
		}
	}
	return -1
}

func groupNotFound(rc *rayv1.RayCluster, group string) error {
	return fmt.Errorf("%w: %q in RayCluster %s/%s", ErrGroupNotFound, group, rc.Namespace, rc.Name)
}

func clusterSelector(cluster string) string { return "ray.io/cluster=" + cluster }
