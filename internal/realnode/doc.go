// Package realnode makes a test's machine (a network namespace of
// internal/netnstest) a real Kubernetes node: containerd and the kubelet
// run there, in a mount namespace and a cgroup namespace of the machine's
// own, and never touch the host's containerd, kubelet, cgroups or sysctls.
//
// Prepare makes the machine's cgroup root (gw-<name> in every cgroup v1
// hierarchy) and its private directories, and returns the Machine. Its
// Enter script, run first by a shell in the machine's network namespace and
// a new mount namespace, moves the shell into that cgroup root and a cgroup
// namespace rooted there (so the kubelet's cgroup root is "/"), mounts the
// machine's own /run, /var/lib/kubelet (device-plugins included),
// /var/lib/cni and /var/log over the host's, and shadows the sysctls the
// kubelet writes (vm.overcommit_memory, kernel.panic, ...) with files of
// the machine's, so the host's stay as they were. Start runs containerd
// and the kubelet there directly (a kubelet the test configures); the join
// agent runs them itself inside Enter's namespaces (examples/join-node).
//
// Teardown kills every process of the machine's cgroups (containerd's
// shims and the containers included) and removes the cgroups; the mounts
// go with the namespaces. Leftovers finds what a machine left.
package realnode
