// Command playground starts a local Ray-on-Kubernetes cluster to try the
// server and the launcher without owning one, and without Docker: the
// same real control plane the tests use (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, the KubeRay operator) with kwok
// nodes (two 8-GPU nodes and a CPU node by default, their pods "running"
// without containers), a kubeconfig for it, and the control-plane server
// against it. It prints what to run next and, on Ctrl-C, stops everything
// and leaves no process behind.
//
// As root, the master joins machines of this host in the kubelet join
// mode: `playground machine` makes one (a network namespace with its own
// mounts and cgroups, internal/realnode), runs the join command there,
// and shows its Node Ready and a pod running on it.
//
//	go run ./examples/playground          (make playground)
//	go run ./examples/playground machine  (make playground-machine)
//
// The first start builds the control plane's binaries from the Go module
// proxy (minutes on two cores, with progress); later starts take seconds.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
