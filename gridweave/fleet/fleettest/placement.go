package fleettest

import (
	"fmt"
	"maps"
	"testing"
	"time"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/joinkeys"
	"gridweave.dev/mesh/wgkey"
)

// PlacementBackend is a fleet.Placement under test and what the table
// needs beside it.
type PlacementBackend struct {
	Placement fleet.Placement
	// Ledger is the ledger the backend counts registered nodes in
	// (RayGroups reads it; memfleet ignores it). The table joins and
	// registers its nodes there, and takes them away as the fleet does:
	// marked disconnected, then Remove, then released.
	Ledger *joinkeys.Keyring
	// Groups returns how many nodes each worker group holds now; a group
	// without nodes is absent or 0.
	Groups func(t *testing.T) map[string]int
}

func gpus(vendor, name string, n int) []joinkeys.GPU {
	out := make([]joinkeys.GPU, n)
	for i := range out {
		out[i] = joinkeys.GPU{Index: i, Vendor: vendor, Name: name, MemoryMiB: 81559, UUID: fmt.Sprintf("GPU-%s-%d", name, i)}
	}
	return out
}

// Placement runs the conformance table of fleet.Placement.
func Placement(t *testing.T, open func(t *testing.T) PlacementBackend) {
	ctx := testContext(t)
	b := open(t)
	key, err := b.Ledger.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "fleettest", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[string]string{}
	// register records hostname as registered with these GPUs and
	// returns the node before and after.
	register := func(hostname string, with []joinkeys.GPU) (before, after joinkeys.Node) {
		t.Helper()
		if token, ok := tokens[hostname]; ok {
			if before, err = b.Ledger.Node(ctx, hostname); err != nil {
				t.Fatal(err)
			}
			if after, err = b.Ledger.Register(ctx, joinkeys.Registration{NodeToken: token, Hostname: hostname, Version: "1.0.0", GPUs: with}); err != nil {
				t.Fatal(err)
			}
			return before, after
		}
		_, pub, _ := wgkey.GeneratePair()
		joined, err := b.Ledger.Join(ctx, joinkeys.JoinRequest{Key: key.Secret, Hostname: hostname, PublicKey: pub.String(), Version: "1.0.0"})
		if err != nil {
			t.Fatal(err)
		}
		tokens[hostname] = joined.NodeToken
		if after, err = b.Ledger.Register(ctx, joinkeys.Registration{NodeToken: joined.NodeToken, Hostname: hostname, Version: "1.0.0", GPUs: with}); err != nil {
			t.Fatal(err)
		}
		return joined.Node, after
	}
	place := func(hostname string, with []joinkeys.GPU, wantGroup string) joinkeys.Node {
		t.Helper()
		before, after := register(hostname, with)
		group, err := b.Placement.Place(ctx, before, after)
		if err != nil || group != wantGroup {
			t.Fatalf("Place %s: group %q, %v; want %q", hostname, group, err, wantGroup)
		}
		return after
	}
	// remove takes n away as the fleet does: marked disconnected in the
	// ledger (no longer counted), Remove, then released.
	remove := func(n joinkeys.Node) {
		t.Helper()
		n, err := b.Ledger.MarkDisconnected(ctx, n.Hostname, "fleettest")
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Placement.Remove(ctx, n); err != nil {
			t.Fatalf("Remove %s: %v", n.Hostname, err)
		}
		if _, err := b.Ledger.Release(ctx, n.Hostname, "fleettest"); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what string, groups map[string]int) {
		t.Helper()
		got := b.Groups(t)
		maps.DeleteFunc(got, func(_ string, n int) bool { return n == 0 })
		if !maps.Equal(got, groups) {
			t.Fatalf("%s: groups %v, want %v", what, got, groups)
		}
	}
	h100x8, _ := fleet.PoolOf(gpus(joinkeys.VendorNVIDIA, "NVIDIA H100 80GB HBM3", 8))
	mi300, _ := fleet.PoolOf(gpus(joinkeys.VendorAMD, "AMD Instinct MI300X", 1))

	place("cpu-1", nil, "")
	want("a CPU-only node", map[string]int{})
	first := place("gpu-1", gpus(joinkeys.VendorNVIDIA, "NVIDIA H100 80GB HBM3", 8), h100x8.Name)
	want("a GPU node", map[string]int{h100x8.Name: 1})
	place("gpu-2", gpus(joinkeys.VendorNVIDIA, "NVIDIA H100 80GB HBM3", 8), h100x8.Name)
	want("a second node of the kind", map[string]int{h100x8.Name: 2})
	place("gpu-3", gpus(joinkeys.VendorAMD, "AMD Instinct MI300X", 1), mi300.Name)
	want("a node of another kind", map[string]int{h100x8.Name: 2, mi300.Name: 1})
	moved := place("gpu-2", gpus(joinkeys.VendorAMD, "AMD Instinct MI300X", 1), mi300.Name)
	want("a node whose GPUs changed", map[string]int{h100x8.Name: 1, mi300.Name: 2})
	remove(first)
	want("the last node of a kind removed", map[string]int{mi300.Name: 2})
	remove(moved)
	cpu, err := b.Ledger.Node(ctx, "cpu-1")
	if err != nil {
		t.Fatal(err)
	}
	remove(cpu)
	want("a node and a CPU-only node removed", map[string]int{mi300.Name: 1})
}
