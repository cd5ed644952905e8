package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

// mirrorPodAnnotation marks the API server's copy of a kubelet's static
// pod: it cannot be evicted, and goes with its kubelet.
const mirrorPodAnnotation = "kubernetes.io/config.mirror"

// drain cordons the Node and evicts its pods, as kubectl drain does: the
// Node is marked unschedulable (by a patch that carries its UID), then
// each of its pods is evicted through the Eviction API (which honours
// PodDisruptionBudgets), except the mirror pods of static pods, the pods
// of DaemonSets (they tolerate an unschedulable Node and go with it) and
// the pods that have finished; drain waits, until DrainTimeout, for the
// evicted pods and those already being deleted to be gone (their kubelet
// stops them within their grace periods, then deletes them). An eviction refused (a budget, a 403, two budgets on one pod)
// is logged and asked again until then. Past it, drain returns with what
// is left, logged: the Node is deleted anyway, and the pod garbage
// collector deletes the pods of a Node that no longer exists. Only a
// Node that cannot be cordoned or whose pods cannot be listed fails it.
func (k *KubeNodes) drain(ctx context.Context, kn KubeNode) error {
	patch := map[string]any{"spec": map[string]any{"unschedulable": true}}
	if kn.UID != "" {
		patch["metadata"] = map[string]any{"uid": kn.UID}
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = k.Client.CoreV1().Nodes().Patch(ctx, kn.Name, types.MergePatchType, raw, metav1.PatchOptions{FieldManager: FieldManager})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case kn.UID != "" && (apierrors.IsConflict(err) || uidRefused(err)):
		return fmt.Errorf("node %s: %w: %v", kn.Name, ErrKubeNodeReplaced, err)
	case err != nil:
		return fmt.Errorf("cordon node %s: %w", kn.Name, err)
	}
	deadline := time.Now().Add(k.DrainTimeout)
	evicted := map[types.UID]bool{}
	refused := map[types.UID]error{}
	for {
		// From the API server's watch cache: a drain asks every half
		// second.
		pods, err := k.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{ResourceVersion: "0",
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", kn.Name).String()})
		if err != nil {
			return fmt.Errorf("list the pods of node %s: %w", kn.Name, err)
		}
		var left []string
		for _, p := range pods.Items {
			if evicted[p.UID] || p.DeletionTimestamp != nil {
				// On its way: waited for until it is gone (its kubelet
				// deletes it once its containers stopped).
				left = append(left, p.Namespace+"/"+p.Name)
				continue
			}
			if !evictable(&p) {
				continue
			}
			left = append(left, p.Namespace+"/"+p.Name)
			eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
				DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}}
			err := k.Client.CoreV1().Pods(p.Namespace).EvictV1(ctx, eviction)
			switch {
			case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
				evicted[p.UID] = true
			default:
				// A PodDisruptionBudget holds it for now (429), or the
				// eviction is refused: asked again on the next round.
				if refused[p.UID] == nil {
					k.logger().Warn("node drain: an eviction refused; asked again until the drain timeout", "node", kn.Name,
						"pod", p.Namespace+"/"+p.Name, "error", err)
				}
				refused[p.UID] = err
			}
		}
		if len(left) == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			k.logger().Warn("node drain: pods still there at the drain timeout; the Node is deleted anyway, and its pods with it by the pod garbage collector",
				"node", kn.Name, "pods", left, "timeout", k.DrainTimeout)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// evictable reports whether drain evicts p: not a mirror pod, not a
// DaemonSet's, not finished.
func evictable(p *corev1.Pod) bool {
	if _, mirror := p.Annotations[mirrorPodAnnotation]; mirror {
		return false
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" {
			return false
		}
	}
	return true
}
