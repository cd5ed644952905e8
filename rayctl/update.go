package rayctl

import (
	"context"
	"hash/fnv"
	"sync"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// clusterLocks serialises one Client's read-modify-writes of one
// RayCluster, so that its own callers do not race each other into
// conflicts; other writers (the operator, other Clients, other processes)
// are handled by retrying on 409. The locks are striped by name, so memory stays
// bounded however many clusters a long-running process touches.
type clusterLocks [64]sync.Mutex

func (l *clusterLocks) lock(key string) func() {
	h := fnv.New32a()
	h.Write([]byte(key))
	m := &l[h.Sum32()%uint32(len(l))]
	m.Lock()
	return m.Unlock
}

// updateCluster reads the RayCluster, lets change edit it, validates the
// result with KubeRay's rules and writes it back with one Update. On 409
// Conflict it starts over from a fresh read, up to the Client's backoff;
// the last conflict is returned if all attempts lose. An error from change
// is returned at once.
func (c *Client) updateCluster(ctx context.Context, namespace, name string, change func(rc *rayv1.RayCluster) error) (*rayv1.RayCluster, error) {
	namespace = c.ns(namespace)
	defer c.locks.lock(namespace + "/" + name)()
	var out *rayv1.RayCluster
	err := retry.RetryOnConflict(c.backoff, func() error {
		rc, err := c.ray.RayV1().RayClusters(namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return clusterNotFound(namespace, name)
		}
		if err != nil {
			return err
		}
		if err := change(rc); err != nil {
			return err
		}
		if err := ValidateCluster(rc); err != nil {
			return err
		}
		out, err = c.ray.RayV1().RayClusters(namespace).Update(ctx, rc, metav1.UpdateOptions{FieldManager: FieldManager})
		return err
	})
	return out, err
}
