package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// FieldManager is the field manager of the fleet's writes to Kubernetes.
const FieldManager = "gridweave"

// KubeNodes is Nodes over a Kubernetes clientset. While Watch runs, Get
// answers from the informer's cache when it holds the Node (a register
// then costs no read of the API server), and asks the API server when it
// does not (a Node k3s registered a moment ago may not have reached the
// cache). Use it by pointer.
type KubeNodes struct {
	Client kubernetes.Interface
	// Resync is the informer's resync period for Watch; default 10 minutes.
	Resync time.Duration
	// Logger hears of Nodes that Watch cannot read (a pod CIDR that is not
	// a CIDR) and of drains that ran out of time; default discards.
	Logger *slog.Logger
	// DrainTimeout, when set, makes Delete drain the Node first (cordon
	// it, evict its pods, wait for them until DrainTimeout): for Nodes
	// whose kubelet runs pods (the kubelet join mode). Zero deletes at
	// once.
	DrainTimeout time.Duration

	cache    atomic.Pointer[nodeCache] // set while Watch runs, once synced
	watching atomic.Bool               // Watch runs and has not delivered its first listing yet
}

// Synced reports whether a running Watch has delivered every Node there
// was when it started (true too when no Watch runs): until then the
// Nodes that are not the fleet's are not all known.
func (k *KubeNodes) Synced() bool { return !k.watching.Load() }

// nodeCache is Watch's informer cache.
type nodeCache struct{ lister corelisters.NodeLister }

// cached returns the Node name from Watch's cache; found is false when
// the cache does not hold it or no synced cache is there to ask.
func (k *KubeNodes) cached(name string) (n *corev1.Node, found, synced bool) {
	c := k.cache.Load()
	if c == nil {
		return nil, false, false
	}
	n, err := c.lister.Get(name)
	return n, err == nil, true
}

// Peek is Get that trusts a synced watch cache for a Node it does not
// hold (ErrNoKubeNode, with no request to the API server): for the join's
// hot path, where a Node registered a moment ago is taken care of by the
// watch when it arrives. Without a synced cache it is Get.
func (k *KubeNodes) Peek(ctx context.Context, name string) (KubeNode, error) {
	n, found, synced := k.cached(name)
	switch {
	case found:
		return kubeNodeOf(n)
	case synced:
		return KubeNode{}, ErrNoKubeNode
	}
	return k.Get(ctx, name)
}

// Get implements Nodes.
func (k *KubeNodes) Get(ctx context.Context, name string) (KubeNode, error) {
	if n, found, _ := k.cached(name); found {
		return kubeNodeOf(n)
	}
	n, err := k.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return KubeNode{}, ErrNoKubeNode
	}
	if err != nil {
		return KubeNode{}, err
	}
	return kubeNodeOf(n)
}

func kubeNodeOf(n *corev1.Node) (KubeNode, error) {
	kn := KubeNode{Name: n.Name, UID: string(n.UID), Labels: maps.Clone(n.Labels)} // a cached Node is shared: never hand out its maps
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP {
			kn.InternalIPs = append(kn.InternalIPs, ip)
		}
	}
	for _, c := range append([]string{n.Spec.PodCIDR}, n.Spec.PodCIDRs...) {
		if c == "" {
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return kn, fmt.Errorf("node %s: Kubernetes gave it pod CIDR %q, which is not a CIDR", n.Name, c)
		}
		if !slices.Contains(kn.PodCIDRs, p) {
			kn.PodCIDRs = append(kn.PodCIDRs, p)
		}
	}
	if n.Spec.PodCIDR != "" {
		kn.PodCIDR = kn.PodCIDRs[0]
	}
	return kn, nil
}

// SetLabel implements Nodes.
func (k *KubeNodes) SetLabel(ctx context.Context, kn KubeNode, key, value string) error {
	return k.patchMeta(ctx, kn, "labels", key, value)
}

// SetAnnotation implements Nodes.
func (k *KubeNodes) SetAnnotation(ctx context.Context, kn KubeNode, key, value string) error {
	return k.patchMeta(ctx, kn, "annotations", key, value)
}

// patchMeta sets (or, with an empty value, removes) one label or
// annotation by a merge patch that carries the Node's metadata.uid when
// known: the API server applies it to that object only.
func (k *KubeNodes) patchMeta(ctx context.Context, kn KubeNode, field, key, value string) error {
	var v any
	if value != "" {
		v = value
	}
	meta := map[string]any{field: map[string]any{key: v}}
	if kn.UID != "" {
		meta["uid"] = kn.UID
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	_, err = k.Client.CoreV1().Nodes().Patch(ctx, kn.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case kn.UID != "" && (apierrors.IsConflict(err) || uidRefused(err)):
		return fmt.Errorf("node %s: %w: %v", kn.Name, ErrKubeNodeReplaced, err)
	}
	return err
}

// uidRefused reports whether err is the API server's refusal of a patch
// whose metadata.uid is not the object's (422, the field is immutable).
func uidRefused(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// Delete implements Nodes, with the UID as a precondition; with a
// DrainTimeout, the Node is drained first.
func (k *KubeNodes) Delete(ctx context.Context, kn KubeNode) error {
	if k.DrainTimeout > 0 {
		if err := k.drain(ctx, kn); err != nil {
			return err
		}
	}
	opts := metav1.DeleteOptions{}
	if kn.UID != "" {
		uid := types.UID(kn.UID)
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := k.Client.CoreV1().Nodes().Delete(ctx, kn.Name, opts)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if apierrors.IsConflict(err) {
		return fmt.Errorf("node %s: %w; not deleted: %w", kn.Name, ErrKubeNodeReplaced, err)
	}
	return err
}

// Watch implements Nodes with a shared informer.
func (k *KubeNodes) Watch(ctx context.Context, observe func(KubeNode)) error {
	resync := k.Resync
	if resync <= 0 {
		resync = 10 * time.Minute
	}
	factory := informers.NewSharedInformerFactory(k.Client, resync)
	informer := factory.Core().V1().Nodes().Informer()
	log := k.logger()
	on := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok {
			kn, err := kubeNodeOf(n)
			if err != nil {
				// Its labels are still followed; its pod CIDR is not routed.
				log.WarnContext(ctx, "a Kubernetes Node the fleet cannot read", "node", n.Name, "err", err)
				kn.PodCIDR = netip.Prefix{}
			}
			observe(kn)
		}
	}
	gone := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if n, ok := obj.(*corev1.Node); ok {
			kn, _ := kubeNodeOf(n)
			kn.Deleted = true
			observe(kn)
		}
	}
	k.watching.Store(true)
	defer k.watching.Store(false)
	registration, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, obj any) { on(obj) },
		DeleteFunc: gone,
	})
	if err != nil {
		return err
	}
	lister := factory.Core().V1().Nodes().Lister()
	factory.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), informer.HasSynced, registration.HasSynced) {
		k.cache.Store(&nodeCache{lister: lister})
		k.watching.Store(false)
	}
	<-ctx.Done()
	k.cache.Store(nil)
	factory.Shutdown()
	return nil
}

func (k *KubeNodes) logger() *slog.Logger {
	if k.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return k.Logger
}
