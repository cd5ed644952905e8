// Package realnode makes a test's machine (a network namespace of
// internal/netnstest) a real Kubernetes node: containerd and the kubelet
// run there, in a mount namespace and a cgroup namespace of the machine's
// own, and never touch the host's containerd, kubelet, cgroups or sysctls.
//
// New (Prepare in a test) makes the machine's cgroup root (gw-<name> in
// every cgroup v1 hierarchy) and its private directories, and returns the
// Machine. Its Enter script, run first by a shell in the machine's network
// namespace and a new mount namespace, moves the shell into that cgroup
// root and a cgroup namespace rooted there (so the kubelet's cgroup root is
// "/"), mounts the machine's own directories (Private: /run,
// /var/lib/kubelet with device-plugins, /var/lib/containerd, /var/lib/cni,
// /etc/cni/net.d, /etc/kubernetes, /etc/gridweave, /var/log) over the
// host's, and shadows
// the sysctls the kubelet writes (vm.overcommit_memory, kernel.panic, ...)
// with files of the machine's, so the host's stay as they were. Where the
// host lacks a mountpoint, MakeMountpoint makes and records it, and
// RemoveMountpoints takes it away once no machine uses it. Run starts a
// process in the machine (a test's own containerd and kubelet); the join
// agent runs them itself inside Enter's namespaces (examples/join-node).
//
// Every machine's owner puts one kubelet drop-in in /etc/gridweave
// (SharedDiskDropIn; KubeletDropInDir as the host sees it): the host's
// disk is shared, so its kubelet evicts on absolute free space, never on
// shares of a disk others fill, and a pressure lasts 30 s after it is
// gone, not 5 minutes.
//
// Teardown (Remove, by name) kills every process of the machine's cgroups
// (containerd's shims and the containers included) and removes the
// cgroups; the mounts go with the namespaces. Leftovers finds what a
// machine left. ApplyKubeletRBAC applies the kubelet join mode's bindings
// and its admission policy (a kubelet may not choose its pod CIDR) to a
// control plane.
package realnode
