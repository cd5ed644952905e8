// Package wgdevice starts real userspace WireGuard devices for tests:
// wireguard-go, built from the module version pinned in go.mod (a tool
// dependency), running inside a test's network namespace and reachable
// through its UAPI socket in /var/run/wireguard, which wgctrl — and so
// mesh/wgmesh — drives from the test process. Devices have unique names
// (the socket directory is not namespaced) and stop at cleanup; Restart
// replaces the process under the same name, as a service manager would.
package wgdevice
