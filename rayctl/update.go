package rayctl

import (
	"context"
	"fmt"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// clusterLocks serialises one Client's read-modify-writes of one
// RayCluster, so that its own callers do not race each other into
// conflicts; other writers (the operator, other Clients, other processes)
// are handled by retrying on 409. There is one lock per cluster, so calls
// on different clusters never wait for each other, and a lock is
// forgotten when nobody holds or waits for it, so memory stays bounded
// however many clusters a long-running process touches.
type clusterLocks struct {
	mu    sync.Mutex
	locks map[string]*clusterLock
}

type clusterLock struct {
	token chan struct{} // holds a value while the lock is taken
	users int           // the holder and the waiters; guarded by clusterLocks.mu
}

func newClusterLocks() *clusterLocks {
	return &clusterLocks{locks: map[string]*clusterLock{}}
}

// lock takes the lock of key, waiting at most until ctx ends, and returns
// the function that releases it.
func (l *clusterLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	k := l.locks[key]
	if k == nil {
		k = &clusterLock{token: make(chan struct{}, 1)}
		l.locks[key] = k
	}
	k.users++
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		k.users--
		if k.users == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
	select {
	case k.token <- struct{}{}:
		return func() { <-k.token; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

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
// never across the wait between attempts.
func (c *Client) updateCluster(ctx context.Context, namespace, name string, change func(rc *rayv1.RayCluster) error) (*rayv1.RayCluster, error) {
	namespace = c.ns(namespace)
	rcs := c.ray.RayV1().RayClusters(namespace)
	var out *rayv1.RayCluster
	err := retryOnConflict(ctx, c.backoff, func() error {
		unlock, err := c.locks.lock(ctx, namespace+"/"+name)
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
