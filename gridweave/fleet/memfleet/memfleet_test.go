package memfleet_test

import (
	"context"
	"net/netip"
	"testing"

	"gridweave.dev/gridweave/fleet"
	"gridweave.dev/gridweave/fleet/fleettest"
	"gridweave.dev/gridweave/fleet/memfleet"
	"gridweave.dev/gridweave/scrapetargets"
	"gridweave.dev/internal/randhex"
	"gridweave.dev/joinkeys"
	"gridweave.dev/joinkeys/memstore"
)

// The in-memory backends pass the conformance tables the real ones pass
// (gridweave/fleet's TestSeamsConformance).

func TestNodes(t *testing.T) {
	fleettest.Nodes(t, func(t *testing.T) fleettest.NodesBackend {
		nodes := &memfleet.Nodes{}
		return fleettest.NodesBackend{
			Nodes: nodes,
			Register: func(t *testing.T, kn fleet.KubeNode) fleet.KubeNode {
				kn.UID = randhex.String(8) // a new object each time, as a kubelet's registration after a deletion
				nodes.Put(kn)
				return kn
			},
			Annotation: func(t *testing.T, name, key string) string { return nodes.Annotations(name)[key] },
			Relabel: func(t *testing.T, name, key, value string) {
				kn, err := nodes.Get(context.Background(), name)
				if err != nil {
					t.Fatal(err)
				}
				kn.Labels = map[string]string{key: value}
				nodes.Put(kn) // the same UID: the same object
			},
		}
	})
}

func TestRoutes(t *testing.T) {
	fleettest.Routes(t, func(t *testing.T) fleettest.RoutesBackend {
		routes := &memfleet.Routes{}
		return fleettest.RoutesBackend{Routes: routes, Routed: func(*testing.T) []netip.Prefix { return routes.Routed() }}
	})
}

func TestPlacement(t *testing.T) {
	fleettest.Placement(t, func(t *testing.T) fleettest.PlacementBackend {
		placement := &memfleet.Placement{}
		pool, err := joinkeys.NewPool(netip.MustParsePrefix("10.100.0.0/24"), netip.MustParseAddr("10.100.0.1"))
		if err != nil {
			t.Fatal(err)
		}
		ledger, err := joinkeys.New(new(memstore.Store), &joinkeys.Options{JWTSecret: []byte("a-jwt-secret-of-at-least-32-bytes"), Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return fleettest.PlacementBackend{Placement: placement, Ledger: ledger, Groups: func(*testing.T) map[string]int { return placement.Groups() }}
	})
}

func TestTargets(t *testing.T) {
	fleettest.Targets(t, func(t *testing.T) fleettest.TargetsBackend {
		targets := &memfleet.Targets{}
		return fleettest.TargetsBackend{Targets: targets, List: func(*testing.T) []scrapetargets.Target {
			var out []scrapetargets.Target
			for _, target := range targets.Targets() {
				out = append(out, target)
			}
			return out
		}}
	})
}
