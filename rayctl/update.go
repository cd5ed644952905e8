package rayctl

import (
	"context"
	"fmt"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// retryOnConflict runs attempt until it returns anything but a 409
// Conflict, at most backoff.Steps times (at least once), waiting between
// attempts as backoff says. The wait ends early when ctx does; the error
// then wraps both ctx's error and the last conflict. When every attempt
// lost, the last conflict is returned as it is.
func retryOnConflict(ctx context.Context, backoff wait.Backoff, attempt func() error) error {
	attempts := max(backoff.Steps, 1)
	for n := 1; ; n++ {
		err := attempt()
		if !apierrors.IsConflict(err) || n >= attempts {
			return err
		}
		t := time.NewTimer(backoff.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("stopped retrying after %d conflicting writes: %w (last conflict: %w)", n, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// updateCluster reads the RayCluster, lets change edit a copy, validates
// the result with KubeRay's rules and writes back only what change
// changed, as a JSON patch (see clusterPatch). The patch carries the
// resourceVersion that was read, so the API server refuses it with 409
// Conflict if anyone wrote in between; every field the patch does not
// mention is left as the server has it, including fields that a newer
// KubeRay added and this package's Go types do not know (a typed Update
// would drop them). On 409 it starts over from a fresh read, up to the
// Client's backoff; the last conflict is returned if all attempts lose. An
// error from change is returned at once. If change changes nothing, nothing
// is written and the RayCluster is returned as read.
//
// The Client's lock of the cluster is held for one attempt at a time,
// never across the wait between attempts. With Options.Replace the
// change is written whole, preconditioned on the same resourceVersion.
func (c *Client) updateCluster(ctx context.Context, namespace, name string, change func(rc *rayv1.RayCluster) error) (*rayv1.RayCluster, error) {
	namespace = c.ns(namespace)
	rcs := c.ray.RayV1().RayClusters(namespace)
	var out *rayv1.RayCluster
	err := retryOnConflict(ctx, c.backoff, func() error {
		unlock, err := c.locks.Lock(ctx, namespace+"/"+name)
		if err != nil {
			return fmt.Errorf("wait for this client's other write of RayCluster %s/%s: %w", namespace, name, err)
		}
		defer unlock()
		rc, err := rcs.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return clusterNotFound(namespace, name)
		}
		if err != nil {
			return fmt.Errorf("read RayCluster %s/%s: %w", namespace, name, err)
		}
		edited := rc.DeepCopy()
		if err := change(edited); err != nil {
			return err
		}
		if err := ValidateCluster(edited); err != nil {
			return err
		}
		if c.replace {
			if apiequality.Semantic.DeepEqual(rc.ObjectMeta, edited.ObjectMeta) && apiequality.Semantic.DeepEqual(rc.Spec, edited.Spec) {
				out = rc
				return nil
			}
			out, err = rcs.Update(ctx, edited, metav1.UpdateOptions{FieldManager: FieldManager})
			if apierrors.IsNotFound(err) {
				return clusterNotFound(namespace, name)
			}
			if err != nil {
				return fmt.Errorf("write RayCluster %s/%s: %w", namespace, name, err)
			}
			return nil
		}
		patch, err := clusterPatch(rc, edited)
		if err != nil {
			return fmt.Errorf("patch of RayCluster %s/%s: %w", namespace, name, err)
		}
		if patch == nil {
			out = rc
			return nil
		}
		out, err = rcs.Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
		if apierrors.IsNotFound(err) {
			return clusterNotFound(namespace, name)
		}
		if err != nil {
			return fmt.Errorf("write RayCluster %s/%s: %w", namespace, name, err)
		}
		return nil
	})
	return out, err
}
