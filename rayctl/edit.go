package rayctl

import (
	"context"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
)

// UpdateCluster is the read-modify-write every worker-group call of this
// package is made of, for a change of the caller's own: change edits a
// copy of the RayCluster as read; the result is checked with KubeRay's
// rules and only what change changed is written, conditioned on the
// resourceVersion read. On 409 Conflict the whole step (read, change,
// write) starts again, so change must decide from the object it is given
// and may be called more than once. Nothing is written if change changes
// nothing; an error from change is returned at once.
func (c *Client) UpdateCluster(ctx context.Context, namespace, name string, change func(rc *rayv1.RayCluster) error) (*rayv1.RayCluster, error) {
	return c.updateCluster(ctx, namespace, name, change)
}
