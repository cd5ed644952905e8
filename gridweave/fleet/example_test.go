package fleet_test

import (
	"context"
	"fmt"
	"net/netip"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/fleet/memfleet"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
	"gridweave.dev/mesh/memmesh"
	"gridweave.dev/mesh/wgkey"
)

// A Go program joins a GPU machine, registers it and disconnects it, with
// in-memory backends and no HTTP.
func Example() {
	ctx := context.Background()
	pool, _ := joinkeys.NewPool(netip.MustParsePrefix("198.18.0.0/24"), netip.MustParseAddr("198.18.0.1"))
	ledger, _ := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte("a-jwt-secret-of-at-least-32-bytes"), Pool: pool})
	_, masterKey, _ := wgkey.GeneratePair()
	peers := memmesh.New(masterKey)
	nodes := new(memfleet.Nodes)
	// The marks of the machines' Nodes are an HMAC under a secret of the
	// master's; the pod range is where the cluster gives pod CIDRs.
	marks, _ := fleet.NewMarker([]byte("a-secret-of-the-master-32-bytes!"))
	svc, _ := fleet.New(fleet.Config{ServerVersion: "1.4.0", Marks: marks, ClusterCIDR: netip.MustParsePrefix("198.19.0.0/16")}, fleet.Backends{
		Ledger: ledger, Peers: peers, Nodes: nodes,
		Routes: new(memfleet.Routes), Placement: new(memfleet.Placement), Targets: new(memfleet.Targets),
	})

	key, _ := ledger.Mint(ctx, joinkeys.MintRequest{Kind: joinkeys.KindOrg, Org: "acme", TTL: 3600e9})
	_, machineKey, _ := wgkey.GeneratePair()
	v, err := svc.Validate(ctx, fleet.ValidateRequest{Key: key.Secret, Hostname: "gpu-1", PublicKey: machineKey.String(), Version: "1.4.2"})
	if err != nil {
		panic(err)
	}
	fmt.Println("validated:", v.Node.Hostname, v.Node.VPNIP)

	// k3s on the machine registers its Kubernetes Node with a pod CIDR and
	// the labels validate named (the fleet touches only a Node with its mark).
	nodes.Put(fleet.KubeNode{Name: "gpu-1", PodCIDR: netip.MustParsePrefix("198.19.1.0/24"),
		Labels: map[string]string{fleet.MarkLabel: marks.Mark(machineKey)}})
	reg, err := svc.Register(ctx, fleet.RegisterRequest{NodeToken: v.NodeToken, Hostname: "gpu-1", Version: "1.4.2",
		GPUs: []joinkeys.GPU{{Index: 0, Name: "NVIDIA H100 80GB HBM3", MemoryMiB: 81559, UUID: "GPU-0"}}})
	if err != nil {
		panic(err)
	}
	fmt.Println("registered:", reg.Node.Status, reg.Node.PodCIDR, reg.WorkerGroup)

	released, _ := svc.Disconnect(ctx, "gpu-1", "admin:example")
	all, _ := peers.Peers(ctx)
	fmt.Println("released:", released, "peers left:", len(all))
	// Output:
	// validated: gpu-1 198.18.0.2
	// registered: registered 198.19.1.0/24 gpu-nvidia-nvidia-h100-80gb-hbm3-x1
	// released: true peers left: 0
}
