// Package meshtest is the conformance suite for mesh.Mesh implementations
// (Run) and an Interceptor that wraps any Mesh to inject faults. memmesh and
// wgmesh (on a real wireguard-go device) both pass Run.
package meshtest
