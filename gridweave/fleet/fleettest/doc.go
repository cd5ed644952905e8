// Package fleettest is the conformance suite of package fleet's seams:
// one table per seam, run against memfleet's in-memory backends and
// against the real ones (KubeNodes on a real API server, DeviceRoutes on
// a device in a network namespace, scrapetargets.Dir in a directory), as
// storetest is for the ledger's stores. A backend that passes behaves as
// the fleet expects, so the fleet's own tests on the in-memory backends
// say something about the real ones.
//
//	func TestNodes(t *testing.T) {
//		fleettest.Nodes(t, func(t *testing.T) fleettest.NodesBackend { ... })
//	}
//
// Each case opens a backend of its own.
package fleettest
