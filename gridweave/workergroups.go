package gridweave

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"gridweave.dev/joinkeys"
	"gridweave.dev/rayctl"
)

// PoolLabel is the Kubernetes Node label that puts a GPU node into its
// worker pool, and the pod label that marks a worker group as one this
// service manages.
const PoolLabel = "gridweave.dev/worker-pool"

// workerGroups maps GPU nodes onto worker groups of the RayCluster
// Config.ClusterName. One group per node would grow the RayCluster by
// about a kilobyte per node (more with managedFields), past etcd's 1.5 MiB
// object limit well before 1,000 nodes. Instead there is one group per
// pool, a pool being the nodes with the same GPU vendor, model and count:
// its replicas are the registered nodes of the pool, its pods select the
// pool's Node label and repel each other by hostname, so each node runs
// exactly one worker of the group. The RayCluster then grows with the
// number of kinds of machine, not of machines.
type workerGroups struct{ s *Server }

func newWorkerGroups(s *Server) *workerGroups { return &workerGroups{s: s} }

// pool is one kind of GPU machine.
type pool struct {
	name     string
	vendor   string
	model    string
	gpus     int
	resource corev1.ResourceName
}

// poolOf returns the pool of a node's GPUs; ok is false for a CPU-only node.
func poolOf(gpus []joinkeys.GPU) (p pool, ok bool) {
	if len(gpus) == 0 {
		return pool{}, false
	}
	p = pool{vendor: gpus[0].Vendor, model: gpus[0].Name, gpus: len(gpus)}
	if p.vendor == "" {
		p.vendor = joinkeys.VendorNVIDIA
	}
	p.resource = "nvidia.com/gpu"
	if p.vendor == joinkeys.VendorAMD {
		p.resource = "amd.com/gpu"
	}
	p.name = poolName(p.vendor, p.model, p.gpus)
	return p, true
}

// poolName is a DNS-1123 label of at most 40 characters (a group name goes
// into pod names and label values): gpu-<vendor>-<model>-x<count>, the
// model shortened with a hash when too long.
func poolName(vendor, model string, count int) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(model) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	slug := strings.TrimSuffix(b.String(), "-")
	if slug == "" {
		slug = "unknown"
	}
	prefix, suffix := "gpu-"+vendor+"-", fmt.Sprintf("-x%d", count)
	if room := 40 - len(prefix) - len(suffix); len(slug) > room {
		sum := sha256.Sum256([]byte(model))
		slug = strings.TrimSuffix(slug[:room-7], "-") + "-" + hex.EncodeToString(sum[:])[:6]
	}
	return prefix + slug + suffix
}

// nodeRegistered puts a registered GPU node into its pool's group (and
// labels its Kubernetes Node), creating the RayCluster if it is missing,
// or takes a node whose GPUs are gone (before is the node as it was) out
// of its old pool. It returns the group's name, or nil for a CPU-only node.
func (g *workerGroups) nodeRegistered(ctx context.Context, before, n joinkeys.Node) (*string, error) {
	p, ok := poolOf(n.GPUs)
	old, had := poolOf(before.GPUs)
	if !ok && !had {
		return nil, nil // CPU-only before and after: no group to touch
	}
	if err := g.labelNode(ctx, n.Hostname, p.name, ok); err != nil {
		return nil, err
	}
	var leaving *joinkeys.Node
	if had && before.Status == joinkeys.StatusRegistered && old.name != p.name {
		leaving = &before // its pod in the old pool goes, not a random one
	}
	if err := g.reconcile(ctx, leaving); err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	return &p.name, nil
}

// nodeLeft takes a node (already not "registered" in the ledger) out of its
// pool: its pod is named for deletion and the group shrinks, or goes when
// it was the pool's last node.
func (g *workerGroups) nodeLeft(ctx context.Context, n joinkeys.Node) error {
	if err := g.reconcile(ctx, &n); err != nil {
		return err
	}
	// The pods go with the node, also when its group went with it (KubeRay
	// does not delete the pods of a group dropped from the spec).
	p, ok := poolOf(n.GPUs)
	if !ok {
		return nil
	}
	_, pods, err := g.podsOf(ctx, p.name, n.Hostname)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		err := g.s.kube.CoreV1().Pods(g.s.cfg.Namespace).Delete(ctx, pod, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete worker pod %s of the leaving node: %w", pod, err)
		}
	}
	return nil
}

// labelNode sets or removes the pool label on the node's Kubernetes Node,
// if Kubernetes knows the node yet.
func (g *workerGroups) labelNode(ctx context.Context, hostname, poolName string, inPool bool) error {
	value := "null"
	if inPool {
		value = fmt.Sprintf("%q", poolName)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, PoolLabel, value)
	_, err := g.s.kube.CoreV1().Nodes().Patch(ctx, hostname, types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: rayctl.FieldManager})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// reconcile sets every pool group of the cluster to the registered nodes
// of the ledger: replicas per pool, groups for new pools, no group for an
// empty pool. leaving, if set, names a node whose pod is to go first. The
// ledger is read inside the cluster's read-modify-write, after the cluster
// was read, so a concurrent registration that wrote the cluster first is
// always counted.
func (g *workerGroups) reconcile(ctx context.Context, leaving *joinkeys.Node) error {
	cfg := g.s.cfg
	var leavingPods, livePods []string
	var leavingPool string
	if leaving != nil {
		if p, ok := poolOf(leaving.GPUs); ok {
			leavingPool = p.name
			var err error
			if livePods, leavingPods, err = g.podsOf(ctx, p.name, leaving.Hostname); err != nil {
				return err
			}
		}
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
			if grp.GroupName == leavingPool && len(leavingPods) > 0 {
				// The operator never clears the list; keep only pods that
				// still exist, so it does not grow with every departure.
				grp.ScaleStrategy.WorkersToDelete = mergeNames(keepLive(grp.ScaleStrategy.WorkersToDelete, livePods), leavingPods)
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
	_, err := g.s.ray.UpdateCluster(ctx, cfg.Namespace, cfg.ClusterName, change)
	if !errors.Is(err, rayctl.ErrClusterNotFound) {
		return err
	}
	pools, err := g.pools(ctx)
	if err != nil || len(pools) == 0 {
		return err
	}
	if err := g.createCluster(ctx); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = g.s.ray.UpdateCluster(ctx, cfg.Namespace, cfg.ClusterName, change)
	return err
}

type poolCount struct {
	pool
	count int32
}

// pools counts the registered GPU nodes of the ledger by pool.
func (g *workerGroups) pools(ctx context.Context) (map[string]poolCount, error) {
	nodes, err := g.s.keyring.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]poolCount{}
	for _, n := range nodes {
		if n.Status != joinkeys.StatusRegistered {
			continue
		}
		if p, ok := poolOf(n.GPUs); ok {
			c := out[p.name]
			c.pool, c.count = p, c.count+1
			out[p.name] = c
		}
	}
	return out, nil
}

// groupSpec is the worker group of a pool.
func (g *workerGroups) groupSpec(p poolCount) (rayv1.WorkerGroupSpec, error) {
	spec, err := rayctl.WorkerGroup{
		Name:         p.name,
		Image:        g.s.cfg.RayImageWorker,
		Replicas:     ptr.To(p.count),
		MinReplicas:  ptr.To[int32](0),
		MaxReplicas:  ptr.To(p.count),
		GPUs:         p.gpus,
		GPUResource:  string(p.resource),
		NodeSelector: map[string]string{PoolLabel: p.name},
		Labels:       map[string]string{PoolLabel: p.name},
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
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{PoolLabel: p.name}},
			TopologyKey:   corev1.LabelHostname,
		}},
	}}
	return spec, nil
}

func (g *workerGroups) createCluster(ctx context.Context) error {
	cfg := g.s.cfg
	_, err := g.s.ray.CreateCluster(ctx, rayctl.ClusterSpec{Name: cfg.ClusterName, Namespace: cfg.Namespace, Image: cfg.RayImage})
	return err
}

// podsOf names the pods of a pool's group: all of them, and those on
// node hostname.
func (g *workerGroups) podsOf(ctx context.Context, group, hostname string) (all, on []string, err error) {
	cfg := g.s.cfg
	pods, err := g.s.kube.CoreV1().Pods(cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: "ray.io/cluster=" + cfg.ClusterName + ",ray.io/group=" + group,
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
