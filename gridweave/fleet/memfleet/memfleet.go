package memfleet

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/scrapetargets"
	"gridweave.dev/joinkeys"
)

// Routes is fleet.Routes as a set of routed prefixes.
type Routes struct {
	mu     sync.Mutex
	routed map[netip.Prefix]bool
}

// Replace implements fleet.Routes.
func (r *Routes) Replace(_ context.Context, p netip.Prefix) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.routed == nil {
		r.routed = map[netip.Prefix]bool{}
	}
	r.routed[p] = true
	return nil
}

// Delete implements fleet.Routes.
func (r *Routes) Delete(_ context.Context, p netip.Prefix) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.routed, p)
	return nil
}

// Routed returns the routed prefixes in order.
func (r *Routes) Routed() []netip.Prefix {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.SortedFunc(maps.Keys(r.routed), func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
}

// Nodes is fleet.Nodes as a map of Nodes by name. Put adds or changes a
// Node as k3s and the node controller would, and tells the watchers, in
// the order the changes were made.
type Nodes struct {
	// dispatch orders the deliveries to watchers: held by Put and by
	// Watch's first listing around both the change and its delivery.
	dispatch sync.Mutex
	mu       sync.Mutex
	nodes    map[string]*node
	watchers map[int]func(fleet.KubeNode)
	nextID   int
}

type node struct {
	kn          fleet.KubeNode
	annotations map[string]string
}

// Put adds or replaces the Node kn.Name (its labels and pod CIDR; the
// annotations stay unless kn.UID names another object, as a Node deleted
// and registered again is).
func (n *Nodes) Put(kn fleet.KubeNode) {
	n.dispatch.Lock()
	defer n.dispatch.Unlock()
	n.mu.Lock()
	if n.nodes == nil {
		n.nodes = map[string]*node{}
	}
	kn.Labels = maps.Clone(kn.Labels)
	kn.PodCIDRs, kn.InternalIPs = slices.Clone(kn.PodCIDRs), slices.Clone(kn.InternalIPs)
	if kn.PodCIDR.IsValid() && !slices.Contains(kn.PodCIDRs, kn.PodCIDR) {
		kn.PodCIDRs = append([]netip.Prefix{kn.PodCIDR}, kn.PodCIDRs...)
	}
	if old, ok := n.nodes[kn.Name]; ok && (kn.UID == "" || kn.UID == old.kn.UID) {
		old.kn = kn
	} else {
		n.nodes[kn.Name] = &node{kn: kn, annotations: map[string]string{}}
	}
	seen := clone(kn)
	watchers := slices.Collect(maps.Values(n.watchers))
	n.mu.Unlock()
	for _, w := range watchers {
		w(clone(seen))
	}
}

func clone(kn fleet.KubeNode) fleet.KubeNode {
	kn.Labels = maps.Clone(kn.Labels)
	kn.PodCIDRs, kn.InternalIPs = slices.Clone(kn.PodCIDRs), slices.Clone(kn.InternalIPs)
	return kn
}

// Get implements fleet.Nodes.
func (n *Nodes) Get(_ context.Context, name string) (fleet.KubeNode, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if nd, ok := n.nodes[name]; ok {
		return clone(nd.kn), nil
	}
	return fleet.KubeNode{}, fleet.ErrNoKubeNode
}

// Annotations returns the annotations of the Node name (nil when there
// is none).
func (n *Nodes) Annotations(name string) map[string]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if nd, ok := n.nodes[name]; ok {
		return maps.Clone(nd.annotations)
	}
	return nil
}

// SetLabel implements fleet.Nodes.
func (n *Nodes) SetLabel(_ context.Context, kn fleet.KubeNode, key, value string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if nd, ok := n.nodes[kn.Name]; ok {
		if kn.UID != "" && nd.kn.UID != "" && kn.UID != nd.kn.UID {
			return fmt.Errorf("node %s: %w", kn.Name, fleet.ErrKubeNodeReplaced)
		}
		if nd.kn.Labels == nil {
			nd.kn.Labels = map[string]string{}
		}
		if value == "" {
			delete(nd.kn.Labels, key)
		} else {
			nd.kn.Labels[key] = value
		}
	}
	return nil
}

// SetAnnotation implements fleet.Nodes.
func (n *Nodes) SetAnnotation(_ context.Context, kn fleet.KubeNode, key, value string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if nd, ok := n.nodes[kn.Name]; ok {
		if kn.UID != "" && nd.kn.UID != "" && kn.UID != nd.kn.UID {
			return fmt.Errorf("node %s: %w", kn.Name, fleet.ErrKubeNodeReplaced)
		}
		nd.annotations[key] = value
	}
	return nil
}

// Delete implements fleet.Nodes. The watchers hear of it (Deleted) from
// another goroutine, as from an informer: the fleet deletes a Node while
// it holds the lock its watcher takes.
func (n *Nodes) Delete(_ context.Context, kn fleet.KubeNode) error {
	n.mu.Lock()
	nd, ok := n.nodes[kn.Name]
	if ok && kn.UID != "" && nd.kn.UID != "" && kn.UID != nd.kn.UID {
		n.mu.Unlock()
		return fmt.Errorf("node %s: %w; not deleted", kn.Name, fleet.ErrKubeNodeReplaced)
	}
	delete(n.nodes, kn.Name)
	n.mu.Unlock()
	if ok {
		gone := clone(nd.kn)
		gone.Deleted = true
		go func() {
			n.dispatch.Lock()
			defer n.dispatch.Unlock()
			n.mu.Lock()
			watchers := slices.Collect(maps.Values(n.watchers))
			n.mu.Unlock()
			for _, w := range watchers {
				w(clone(gone))
			}
		}()
	}
	return nil
}

// Watch implements fleet.Nodes.
func (n *Nodes) Watch(ctx context.Context, observe func(fleet.KubeNode)) error {
	n.dispatch.Lock()
	n.mu.Lock()
	if n.watchers == nil {
		n.watchers = map[int]func(fleet.KubeNode){}
	}
	id := n.nextID
	n.nextID++
	n.watchers[id] = observe
	var now []fleet.KubeNode
	for _, nd := range n.nodes {
		now = append(now, clone(nd.kn))
	}
	n.mu.Unlock()
	for _, kn := range now {
		observe(kn)
	}
	n.dispatch.Unlock()
	<-ctx.Done()
	n.mu.Lock()
	delete(n.watchers, id)
	n.mu.Unlock()
	return nil
}

// Placement is fleet.Placement as a count of registered nodes per pool:
// a pool's group exists while it has a node.
type Placement struct {
	mu    sync.Mutex
	nodes map[string]string // hostname -> pool
}

// Place implements fleet.Placement.
func (p *Placement) Place(_ context.Context, _, n joinkeys.Node) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodes == nil {
		p.nodes = map[string]string{}
	}
	pool, ok := fleet.PoolOf(n.GPUs)
	if !ok {
		delete(p.nodes, n.Hostname)
		return "", nil
	}
	p.nodes[n.Hostname] = pool.Name
	return pool.Name, nil
}

// Remove implements fleet.Placement.
func (p *Placement) Remove(_ context.Context, n joinkeys.Node) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.nodes, n.Hostname)
	return nil
}

// Observe implements fleet.Placement; there is nothing to repair.
func (p *Placement) Observe(context.Context, joinkeys.Node, fleet.KubeNode) error { return nil }

// Groups returns the number of nodes in each pool's group.
func (p *Placement) Groups() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, pool := range p.nodes {
		out[pool]++
	}
	return out
}

// Targets is fleet.Targets as a map of scrape targets by hostname.
type Targets struct {
	mu      sync.Mutex
	targets map[string]scrapetargets.Target
}

// Write implements fleet.Targets; a target scrapetargets.Dir refuses
// (Target.Validate) is refused too.
func (t *Targets) Write(_ context.Context, target scrapetargets.Target) error {
	if err := target.Validate(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.targets == nil {
		t.targets = map[string]scrapetargets.Target{}
	}
	t.targets[target.Hostname] = target
	return nil
}

// Remove implements fleet.Targets.
func (t *Targets) Remove(hostname string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.targets, hostname)
	return nil
}

// Targets returns the targets by hostname.
func (t *Targets) Targets() map[string]scrapetargets.Target {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.targets)
}

var (
	_ fleet.Routes    = (*Routes)(nil)
	_ fleet.Nodes     = (*Nodes)(nil)
	_ fleet.Placement = (*Placement)(nil)
	_ fleet.Targets   = (*Targets)(nil)
)

// ServiceRanges is fleet.ServiceRanges as a fixed list.
type ServiceRanges []netip.Prefix

// ServiceCIDRs implements fleet.ServiceRanges.
func (r ServiceRanges) ServiceCIDRs(context.Context) ([]netip.Prefix, error) {
	return slices.Clone(r), nil
}
