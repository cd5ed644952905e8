// Package memfleet holds in-memory implementations of the fleet's seams
// (fleet.Routes, fleet.Nodes, fleet.Placement, fleet.Targets), for tests
// and examples that run the node lifecycle without a kernel, a Kubernetes
// API server or a Prometheus. Each records what was done to it and can be
// read back; the zero value of each is ready to use, and all are safe for
// concurrent use.
package memfleet
