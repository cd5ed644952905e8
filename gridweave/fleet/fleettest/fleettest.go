package fleettest

import (
	"context"
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/scrapetargets"
	"gridweave.dev/internal/randhex"
)

// NodesBackend is a fleet.Nodes under test and what the table needs
// beside it.
type NodesBackend struct {
	Nodes fleet.Nodes
	// Register makes the Node kn.Name as a kubelet (or k3s) registers
	// one: with kn's labels and pod CIDR, as a new object (a new UID)
	// when one of that name exists. It returns the Node as made.
	Register func(t *testing.T, kn fleet.KubeNode) fleet.KubeNode
	// Annotation reads an annotation of the Node name ("" when it has
	// none, or there is no such Node).
	Annotation func(t *testing.T, name, key string) string
	// Relabel changes a label of the existing Node name in place (the
	// same object), as its kubelet or an administrator would.
	Relabel func(t *testing.T, name, key, value string)
}

// Nodes runs the conformance table of fleet.Nodes; open gives each case
// a backend of its own.
func Nodes(t *testing.T, open func(t *testing.T) NodesBackend) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, b NodesBackend, name string)
	}{
		{"a missing Node is ErrNoKubeNode and writes to it do nothing", missingNode},
		{"a registered Node reads back", registeredNode},
		{"labels are set and removed", labels},
		{"annotations are set", annotations},
		{"writes to a replaced Node are refused", replacedNode},
		{"watch lists, then reports changes and deletions", watch},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.run(t, open(t), "fleettest-"+randhex.String(4))
		})
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func missingNode(t *testing.T, b NodesBackend, name string) {
	ctx := testContext(t)
	if _, err := b.Nodes.Get(ctx, name); !errors.Is(err, fleet.ErrNoKubeNode) {
		t.Fatalf("Get of a missing Node: %v, want ErrNoKubeNode", err)
	}
	kn := fleet.KubeNode{Name: name}
	if err := b.Nodes.SetLabel(ctx, kn, "example.com/a", "b"); err != nil {
		t.Errorf("SetLabel on a missing Node: %v", err)
	}
	if err := b.Nodes.SetAnnotation(ctx, kn, "example.com/a", "b"); err != nil {
		t.Errorf("SetAnnotation on a missing Node: %v", err)
	}
	if err := b.Nodes.Delete(ctx, kn); err != nil {
		t.Errorf("Delete of a missing Node: %v", err)
	}
	if _, err := b.Nodes.Get(ctx, name); !errors.Is(err, fleet.ErrNoKubeNode) {
		t.Errorf("after writes to a missing Node, Get: %v, want ErrNoKubeNode", err)
	}
}

func registeredNode(t *testing.T, b NodesBackend, name string) {
	ctx := testContext(t)
	cidr := netip.MustParsePrefix("198.19.42.0/24")
	made := b.Register(t, fleet.KubeNode{Name: name, PodCIDR: cidr, Labels: map[string]string{"example.com/kind": "gpu"}})
	kn, err := b.Nodes.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if kn.Name != name || kn.PodCIDR != cidr || !slices.Contains(kn.PodCIDRs, cidr) || kn.Labels["example.com/kind"] != "gpu" {
		t.Errorf("Get: %+v; registered with pod CIDR %s and label example.com/kind=gpu", kn, cidr)
	}
	if kn.UID == "" || kn.UID != made.UID {
		t.Errorf("Get's UID %q, the registered Node's %q", kn.UID, made.UID)
	}
	kn.Labels["example.com/kind"] = "changed by the caller"
	if again, err := b.Nodes.Get(ctx, name); err != nil || again.Labels["example.com/kind"] != "gpu" {
		t.Errorf("a change to a returned Node's labels reached the backend: %v, %v", again.Labels, err)
	}
}

func labels(t *testing.T, b NodesBackend, name string) {
	ctx := testContext(t)
	kn := b.Register(t, fleet.KubeNode{Name: name})
	if err := b.Nodes.SetLabel(ctx, kn, "example.com/pool", "h100x8"); err != nil {
		t.Fatal(err)
	}
	got, err := b.Nodes.Get(ctx, name)
	if err != nil || got.Labels["example.com/pool"] != "h100x8" {
		t.Fatalf("after SetLabel: %v, %v", got.Labels, err)
	}
	if err := b.Nodes.SetLabel(ctx, kn, "example.com/pool", ""); err != nil {
		t.Fatal(err)
	}
	got, err = b.Nodes.Get(ctx, name)
	if _, still := got.Labels["example.com/pool"]; err != nil || still {
		t.Fatalf("after SetLabel with an empty value: %v, %v; want the label gone", got.Labels, err)
	}
}

func annotations(t *testing.T, b NodesBackend, name string) {
	ctx := testContext(t)
	kn := b.Register(t, fleet.KubeNode{Name: name})
	if err := b.Nodes.SetAnnotation(ctx, kn, "example.com/mark", "m1"); err != nil {
		t.Fatal(err)
	}
	if got := b.Annotation(t, name, "example.com/mark"); got != "m1" {
		t.Errorf("after SetAnnotation: %q", got)
	}
}

func replacedNode(t *testing.T, b NodesBackend, name string) {
	ctx := testContext(t)
	old := b.Register(t, fleet.KubeNode{Name: name})
	now := b.Register(t, fleet.KubeNode{Name: name})
	if old.UID == "" || old.UID == now.UID {
		t.Fatalf("registering again gave UID %q, before %q: want a new object", now.UID, old.UID)
	}
	if err := b.Nodes.SetLabel(ctx, old, "example.com/pool", "x"); !errors.Is(err, fleet.ErrKubeNodeReplaced) {
		t.Errorf("SetLabel on the Node read before it was replaced: %v, want ErrKubeNodeReplaced", err)
	}
	if err := b.Nodes.SetAnnotation(ctx, old, "example.com/mark", "x"); !errors.Is(err, fleet.ErrKubeNodeReplaced) {
		t.Errorf("SetAnnotation on the Node read before it was replaced: %v, want ErrKubeNodeReplaced", err)
	}
	if err := b.Nodes.Delete(ctx, old); !errors.Is(err, fleet.ErrKubeNodeReplaced) {
		t.Errorf("Delete of the Node read before it was replaced: %v, want ErrKubeNodeReplaced", err)
	}
	got, err := b.Nodes.Get(ctx, name)
	if err != nil || got.UID != now.UID || got.Labels["example.com/pool"] != "" || b.Annotation(t, name, "example.com/mark") != "" {
		t.Fatalf("the new Node after writes meant for the old one: %+v, %v", got, err)
	}
	if err := b.Nodes.Delete(ctx, now); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Nodes.Get(ctx, name); !errors.Is(err, fleet.ErrNoKubeNode) {
		t.Errorf("after Delete, Get: %v, want ErrNoKubeNode", err)
	}
}

func watch(t *testing.T, b NodesBackend, name string) {
	ctx := testContext(t)
	first := b.Register(t, fleet.KubeNode{Name: name + "-a"})
	seen := make(chan fleet.KubeNode, 64)
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Nodes.Watch(watchCtx, func(kn fleet.KubeNode) { seen <- kn }) }()
	// until waits for a report about name that satisfies ok.
	until := func(what, name string, ok func(fleet.KubeNode) bool) {
		t.Helper()
		for {
			select {
			case kn := <-seen:
				if kn.Name == name && ok(kn) {
					return
				}
			case <-ctx.Done():
				t.Fatalf("Watch did not report %s", what)
			}
		}
	}
	until("a Node there before it started", first.Name, func(kn fleet.KubeNode) bool { return !kn.Deleted && kn.UID == first.UID })
	second := b.Register(t, fleet.KubeNode{Name: name + "-b"})
	until("a Node added", second.Name, func(kn fleet.KubeNode) bool { return !kn.Deleted })
	b.Relabel(t, second.Name, "example.com/pool", "p")
	until("a Node changed in place", second.Name, func(kn fleet.KubeNode) bool {
		return !kn.Deleted && kn.UID == second.UID && kn.Labels["example.com/pool"] == "p"
	})
	now, err := b.Nodes.Get(ctx, first.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Nodes.Delete(ctx, now); err != nil {
		t.Fatal(err)
	}
	until("a Node deleted", first.Name, func(kn fleet.KubeNode) bool { return kn.Deleted })
	stop()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Watch did not return after its context ended")
	}
}

// RoutesBackend is a fleet.Routes under test and a way to read what it
// routes.
type RoutesBackend struct {
	Routes fleet.Routes
	// Routed returns the prefixes routed through the device now.
	Routed func(t *testing.T) []netip.Prefix
}

// Routes runs the conformance table of fleet.Routes.
func Routes(t *testing.T, open func(t *testing.T) RoutesBackend) {
	ctx := testContext(t)
	b := open(t)
	a, c := netip.MustParsePrefix("198.19.1.0/24"), netip.MustParsePrefix("198.19.2.0/24")
	want := func(what string, prefixes ...netip.Prefix) {
		t.Helper()
		got := b.Routed(t)
		slices.SortFunc(got, func(x, y netip.Prefix) int { return x.Addr().Compare(y.Addr()) })
		if !slices.Equal(got, prefixes) {
			t.Fatalf("%s: routed %v, want %v", what, got, prefixes)
		}
	}
	for _, step := range []struct {
		what string
		do   func() error
		want []netip.Prefix
	}{
		{"Replace", func() error { return b.Routes.Replace(ctx, a) }, []netip.Prefix{a}},
		{"Replace again (idempotent)", func() error { return b.Routes.Replace(ctx, a) }, []netip.Prefix{a}},
		{"Replace another", func() error { return b.Routes.Replace(ctx, c) }, []netip.Prefix{a, c}},
		{"Delete", func() error { return b.Routes.Delete(ctx, a) }, []netip.Prefix{c}},
		{"Delete of a route that is not there", func() error { return b.Routes.Delete(ctx, a) }, []netip.Prefix{c}},
		{"Delete the last", func() error { return b.Routes.Delete(ctx, c) }, nil},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		want(step.what, step.want...)
	}
}

// TargetsBackend is a fleet.Targets under test and a way to read what
// it holds.
type TargetsBackend struct {
	Targets fleet.Targets
	// List returns the targets held now.
	List func(t *testing.T) []scrapetargets.Target
}

// Targets runs the conformance table of fleet.Targets.
func Targets(t *testing.T, open func(t *testing.T) TargetsBackend) {
	ctx := testContext(t)
	b := open(t)
	gpu := scrapetargets.Target{Hostname: "gpu-1", VPNIP: netip.MustParseAddr("10.100.0.7"), GPUModel: "NVIDIA H100 80GB HBM3", GPUCount: 8}
	moved := gpu
	moved.VPNIP, moved.Port = netip.MustParseAddr("10.100.0.9"), 9500
	other := scrapetargets.Target{Hostname: "gpu-2", VPNIP: netip.MustParseAddr("10.100.0.8"), GPUModel: "AMD Instinct MI300X", GPUCount: 1}
	want := func(what string, targets ...scrapetargets.Target) {
		t.Helper()
		byHost := map[string]string{}
		for _, target := range b.List(t) {
			byHost[target.Hostname] = describe(target)
		}
		wanted := map[string]string{}
		for _, target := range targets {
			wanted[target.Hostname] = describe(target)
		}
		if !maps.Equal(byHost, wanted) {
			t.Fatalf("%s: the backend holds %v, want %v", what, byHost, wanted)
		}
	}
	for _, step := range []struct {
		what string
		do   func() error
		want []scrapetargets.Target
	}{
		{"Write", func() error { return b.Targets.Write(ctx, gpu) }, []scrapetargets.Target{gpu}},
		{"Write another", func() error { return b.Targets.Write(ctx, other) }, []scrapetargets.Target{gpu, other}},
		{"Write replaces", func() error { return b.Targets.Write(ctx, moved) }, []scrapetargets.Target{moved, other}},
		{"Remove", func() error { return b.Targets.Remove(gpu.Hostname) }, []scrapetargets.Target{other}},
		{"Remove of a target that is not there", func() error { return b.Targets.Remove(gpu.Hostname) }, []scrapetargets.Target{other}},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		want(step.what, step.want...)
	}
	for _, bad := range []scrapetargets.Target{
		{Hostname: "../etc", VPNIP: gpu.VPNIP, GPUModel: "x", GPUCount: 1},
		{Hostname: "gpu-3", GPUModel: "x", GPUCount: 1},
		{Hostname: "gpu-3", VPNIP: gpu.VPNIP, GPUModel: "x", GPUCount: 0},
	} {
		if err := b.Targets.Write(ctx, bad); err == nil {
			t.Errorf("Write of %+v: accepted", bad)
		}
	}
	want("after refused writes", other)
}

// describe is what a target says to Prometheus.
func describe(t scrapetargets.Target) string {
	return t.Address() + " " + t.GPUModel + " ×" + strconv.Itoa(t.GPUCount)
}
