package fleet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"gridweave.dev/joinkeys"
	"gridweave.dev/rayctl"
)

// RayGroups is Placement on a RayCluster: one worker group per pool. One
// group per node would grow the RayCluster by about a kilobyte per node
// (more with managedFields), past etcd's 1.5 MiB object limit well before
// 1,000 nodes. A pool's group has the pool's registered nodes as
// replicas; its pods select the pool's Node label (NodePoolLabel) and repel
// each other by hostname, so each node runs exactly one worker of the
// group. The RayCluster grows with the number of kinds of machine, not of
// machines. The cluster is created when the first GPU node registers.
//
// Writes are coalesced: every Place and Remove queues its change and
// waits for the next write of the RayCluster, which counts the ledger's
// registered nodes by kind as they are then (joinkeys.Keyring.GPUKinds,
// counts the ledger keeps: no read of the fleet); the changes queued while
// a write is under way share the write after it. N concurrent
// registrations cost about one RayCluster write, not N, and each still
// returns with its node counted.
type RayGroups struct {
	Ray    *rayctl.Client
	Kube   kubernetes.Interface
	Ledger *joinkeys.Keyring
	// Nodes carries the pool label; default KubeNodes over Kube.
	Nodes Nodes
	// Marks tells which Nodes are the fleet's: only they get a pool
	// label. Required.
	Marks *Marker
	// Namespace and Cluster name the RayCluster.
	Namespace, Cluster string
	// HeadImage is the image of a cluster RayGroups creates; WorkerImage
	// the image of the groups' workers.
	HeadImage, WorkerImage string

	queue    sync.Mutex
	next     *round // the round changes queue for; nil when none waits
	draining bool   // a writer goroutine is running rounds
}

// round is one write of the RayCluster, shared by every change queued
// before it began.
type round struct {
	leaving []joinkeys.Node // nodes whose pods go first
	done    chan struct{}
	err     error
}

// roundTimeout bounds one coalesced write (its retries on conflicts
// included).
const roundTimeout = 2 * time.Minute

// sync queues a change (leaving, if set, names a node whose pod is to go
// first) and returns when a write that includes it is done.
func (g *RayGroups) sync(ctx context.Context, leaving *joinkeys.Node) error {
	g.queue.Lock()
	if g.next == nil {
		g.next = &round{done: make(chan struct{})}
	}
	r := g.next
	if leaving != nil {
		r.leaving = append(r.leaving, *leaving)
	}
	if !g.draining {
		g.draining = true
		go g.drain()
	}
	g.queue.Unlock()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// roundLinger is how long a round waits for more changes when it follows
// another at once (the fleet is joining): two milliseconds on a join's
// answer let a round carry several times the changes, and a round costs
// the same whatever it carries (a read and a write of the RayCluster).
// A change that comes after a quiet moment is written at once.
const roundLinger = 2 * time.Millisecond

// drain writes rounds until none is queued.
func (g *RayGroups) drain() {
	for first := true; ; first = false {
		if !first {
			time.Sleep(roundLinger)
		}
		g.queue.Lock()
		r := g.next
		g.next = nil
		if r == nil {
			g.draining = false
			g.queue.Unlock()
			return
		}
		g.queue.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
		r.err = g.reconcile(ctx, r.leaving)
		cancel()
		close(r.done)
	}
}

func (g *RayGroups) nodes() Nodes {
	if g.Nodes != nil {
		return g.Nodes
	}
	return &KubeNodes{Client: g.Kube}
}

// Place implements Placement.
func (g *RayGroups) Place(ctx context.Context, before, n joinkeys.Node) (string, error) {
	p, ok := PoolOf(n.GPUs)
	old, had := PoolOf(before.GPUs)
	if !ok && !had {
		return "", nil // CPU-only before and after: no group to touch
	}
	// The label goes onto the node's own Node only; one k3s has not
	// registered yet gets it from Observe when it appears.
	if kn, err := peek(ctx, g.nodes(), n.Hostname); err == nil && g.Marks.Owns(kn, n) {
		if err := g.nodes().SetLabel(ctx, kn, NodePoolLabel, p.Name); err != nil {
			return "", err
		}
	} else if err != nil && !errors.Is(err, ErrNoKubeNode) {
		return "", err
	}
	var leaving *joinkeys.Node
	if had && before.Status == joinkeys.StatusRegistered && old.Name != p.Name {
		leaving = &before // its pod in the old pool goes, not a random one
	}
	if err := g.sync(ctx, leaving); err != nil {
		return "", err
	}
	return p.Name, nil
}

// Reconcile writes the worker groups as the ledger has them now: what Run
// does at start, so that groups an older server wrote select the pool
// label under node-restriction.kubernetes.io/.
func (g *RayGroups) Reconcile(ctx context.Context) error { return g.sync(ctx, nil) }

// Remove implements Placement: the node's pod is named for deletion and
// the group shrinks, or goes when it was the pool's last node.
func (g *RayGroups) Remove(ctx context.Context, n joinkeys.Node) error {
	p, ok := PoolOf(n.GPUs)
	if !ok {
		return nil // a CPU-only node is in no group
	}
	if err := g.sync(ctx, &n); err != nil {
		return err
	}
	// The pods go with the node, also when its group went with it (KubeRay
	// does not delete the pods of a group dropped from the spec).
	_, pods, err := g.podsOf(ctx, p.Name, n.Hostname)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		err := g.Kube.CoreV1().Pods(g.Namespace).Delete(ctx, pod, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete worker pod %s of the leaving node: %w", pod, err)
		}
	}
	return nil
}

// Observe implements Placement: a registered GPU node's Node carries its
// pool's label.
func (g *RayGroups) Observe(ctx context.Context, n joinkeys.Node, kn KubeNode) error {
	if p, ok := PoolOf(n.GPUs); ok && kn.Labels[NodePoolLabel] != p.Name {
		return g.nodes().SetLabel(ctx, kn, NodePoolLabel, p.Name)
	}
	return nil
}

// reconcile sets every pool group of the cluster to the registered nodes
// of the ledger: replicas per pool, groups for new pools, no group for an
// empty pool. leaving names nodes whose pods are to go first. The ledger
// is read inside the cluster's read-modify-write, after the cluster was
// read, so a registration that wrote the ledger before this round began
// is always counted.
func (g *RayGroups) reconcile(ctx context.Context, leaving []joinkeys.Node) error {
	leavingPods := map[string][]string{} // pool -> the pods of its leaving nodes
	livePods := map[string][]string{}    // pool -> all its pods
	for _, n := range leaving {
		p, ok := PoolOf(n.GPUs)
		if !ok {
			continue
		}
		all, on, err := g.podsOf(ctx, p.Name, n.Hostname)
		if err != nil {
			return err
		}
		livePods[p.Name] = all
		leavingPods[p.Name] = mergeNames(leavingPods[p.Name], on)
	}
	change := func(rc *rayv1.RayCluster) error {
		pools, err := g.pools(ctx)
		if err != nil {
			return err
		}
		kept := rc.Spec.WorkerGroupSpecs[:0:0]
		seen := map[string]bool{}
		for _, grp := range rc.Spec.WorkerGroupSpecs {
			if grp.Template.Labels[PoolLabel] == "" { // not ours
				kept = append(kept, grp)
				continue
			}
			p, wanted := pools[grp.GroupName]
			seen[grp.GroupName] = true
			if !wanted {
				continue
			}
			grp.Replicas, grp.MinReplicas, grp.MaxReplicas = ptr.To(p.count), ptr.To[int32](0), ptr.To(p.count)
			// Groups made before the pool label moved under
			// node-restriction.kubernetes.io/ select the new one.
			grp.Template.Spec.NodeSelector = map[string]string{NodePoolLabel: grp.GroupName}
			if pods := leavingPods[grp.GroupName]; len(pods) > 0 {
				// The operator never clears the list; keep only pods that
				// still exist, so it does not grow with every departure.
				grp.ScaleStrategy.WorkersToDelete = mergeNames(keepLive(grp.ScaleStrategy.WorkersToDelete, livePods[grp.GroupName]), pods)
			}
			kept = append(kept, grp)
		}
		names := make([]string, 0, len(pools))
		for name := range pools {
			if !seen[name] {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			spec, err := g.groupSpec(pools[name])
			if err != nil {
				return err
			}
			kept = append(kept, spec)
		}
		rc.Spec.WorkerGroupSpecs = kept
		return nil
	}
	_, err := g.Ray.UpdateCluster(ctx, g.Namespace, g.Cluster, change)
	if !errors.Is(err, rayctl.ErrClusterNotFound) {
		return err
	}
	pools, err := g.pools(ctx)
	if err != nil || len(pools) == 0 {
		return err
	}
	_, err = g.Ray.CreateCluster(ctx, rayctl.ClusterSpec{Name: g.Cluster, Namespace: g.Namespace, Image: g.HeadImage})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = g.Ray.UpdateCluster(ctx, g.Namespace, g.Cluster, change)
	return err
}

type poolCount struct {
	Pool
	count int32
}

// pools counts the registered GPU nodes of the ledger by pool, from the
// ledger's own counts by kind of machine (joinkeys.Keyring.GPUKinds), not
// by reading the fleet.
func (g *RayGroups) pools(ctx context.Context) (map[string]poolCount, error) {
	kinds, err := g.Ledger.GPUKinds(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]poolCount{}
	for _, k := range kinds {
		p := poolFor(k.Vendor, k.Model, k.GPUs)
		c := out[p.Name]
		c.Pool, c.count = p, c.count+int32(k.Nodes)
		out[p.Name] = c
	}
	return out, nil
}

// groupSpec is the worker group of a pool.
func (g *RayGroups) groupSpec(p poolCount) (rayv1.WorkerGroupSpec, error) {
	spec, err := rayctl.WorkerGroup{
		Name:         p.Name,
		Image:        g.WorkerImage,
		Replicas:     ptr.To(p.count),
		MinReplicas:  ptr.To[int32](0),
		MaxReplicas:  ptr.To(p.count),
		GPUs:         p.GPUs,
		GPUResource:  p.Resource,
		NodeSelector: map[string]string{NodePoolLabel: p.Name},
		Labels:       map[string]string{PoolLabel: p.Name},
	}.Build()
	if err != nil {
		return rayv1.WorkerGroupSpec{}, err
	}
	for i := range spec.Template.Spec.Containers {
		spec.Template.Spec.Containers[i].ImagePullPolicy = corev1.PullIfNotPresent
	}
	// One worker of the group per node.
	spec.Template.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{PoolLabel: p.Name}},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	return spec, nil
}

// podsOf names the pods of a pool's group: all of them, and those on
// node hostname.
func (g *RayGroups) podsOf(ctx context.Context, group, hostname string) (all, on []string, err error) {
	pods, err := g.Kube.CoreV1().Pods(g.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: "ray.io/cluster=" + g.Cluster + ",ray.io/group=" + group,
	})
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pods.Items {
		all = append(all, p.Name)
		if p.Spec.NodeName == hostname {
			on = append(on, p.Name)
		}
	}
	return all, on, nil
}

func keepLive(names, live []string) []string {
	var out []string
	for _, n := range names {
		if slices.Contains(live, n) {
			out = append(out, n)
		}
	}
	return out
}

func mergeNames(have, add []string) []string {
	out := slices.Clone(have)
	for _, n := range add {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
