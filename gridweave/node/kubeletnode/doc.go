// Package kubeletnode makes a machine a node of a conformant Kubernetes
// control plane (kubeadm's, a managed one, the tests'): the kubelet join
// mode, beside k3s's. It writes what containerd and the kubelet need, in a
// directory of Gridweave's own (nothing of the machine's configuration is
// changed, and Remove takes all of it away), and runs them:
//
//   - containerd with its root, state and socket under that directory, the
//     CNI plugins of the machine (Debian's containernetworking-plugins in
//     /usr/lib/cni), the pause image the master serves;
//   - the kubelet, TLS-bootstrapped with the bootstrap token validate
//     answered (its client certificate then rotates), against the API
//     server through the tunnel, its Node named and addressed as the
//     machine is in the mesh, its cgroup driver the host's (cgroupfs on a
//     cgroup v1 host without systemd, where it needs failCgroupV1: false);
//   - the pod network: a bridge and host-local addresses from the pod CIDR
//     the controller-manager gives the Node (WriteCNI), routed between
//     machines by the mesh, with no overlay.
//
// The machine's owner may tune the kubelet for the machine (eviction
// thresholds, reservations, pod density) with KubeletConfiguration
// drop-ins in DefaultDropInDir, which the kubelet merges over the node's
// configuration; CheckDropIns refuses any that set what is the node's
// (who may call the kubelet, static pods, the runtime, cgroups, DNS).
//
// ContainerdCommand and KubeletCommand are how the two run. Check says what
// the machine lacks, with the Debian/Ubuntu packages that bring it.
package kubeletnode
