// Package testcluster starts a real Kubernetes control plane for tests: etcd,
// kube-apiserver, kube-controller-manager and kube-scheduler (Kubernetes
// v1.35.4), kwok (v0.8.0) for fake nodes whose pods turn Running at once, and
// the KubeRay operator (v1.6.0) with its CRDs installed by server-side apply.
// It needs no Docker, no root and no network beyond the Go module proxy.
//
// The pieces:
//
//   - EnsureBinaries builds the programs from the Go module proxy, once, into
//     a cache directory keyed by their versions (DefaultCacheRoot: the user
//     cache dir, or $GRIDWEAVE_TESTCLUSTER_CACHE). Kubernetes and etcd come
//     from the separate tools module beside this file (tools/go.mod), which
//     pins them and never enters the SDK's build list; kwok and the operator
//     are built inside their own released modules. A file lock makes parallel
//     test packages wait for one build.
//   - New starts the processes on free loopback ports, each a child with its
//     log in the cluster's directory, and returns a Cluster holding a
//     *rest.Config, the Kubernetes, KubeRay and dynamic clientsets and a
//     kubeconfig path. Stop stops every child by its own PID.
//   - Start (one test) and Shared with RunMain (one package) wrap New for
//     tests: cleanup even on failure or panic, logs printed on failure,
//     skipped only in -short mode (make test-unit).
//   - AddNode makes a kwok node with the given allocatable resources (for a
//     GPU node, nvidia.com/gpu), labels and pod CIDR, and waits until it is
//     Ready and schedulable. kwok also plays every node's kubelet on a
//     loopback port, so pod logs come through the API server for real:
//     AppendPodLog writes what every container logs.
//   - EnsureKubelet and EnsureCoreDNS build the real nodes' kubelet and
//     CoreDNS (v1.15.0, inside its released module) into the same cache;
//     CoreDNSConfig writes CoreDNS's Corefile and a kubeconfig with a
//     credential that may only list and watch what it serves, and
//     RunCoreDNS (StartCoreDNS in a test) runs it on an address the
//     caller made, so real nodes' pods resolve the cluster's Services
//     (KubeRay's headless head Service among them); it answers no other
//     names.
//
// Children are started from one OS thread with PR_SET_PDEATHSIG, so they die
// with the test binary even when it is killed; Leftovers finds any that
// survived, through the GRIDWEAVE_TESTCLUSTER_OWNER variable in their
// environment.
package testcluster
