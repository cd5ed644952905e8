// Package memmesh is an in-memory mesh.Mesh. The zero value is ready to use
// and makes up its own device key on first use; it enforces the same rules
// as wgmesh (an allowed IP may not overlap another peer's), so code written
// against it behaves the same on a real device.
package memmesh
