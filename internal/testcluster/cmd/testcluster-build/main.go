// Command testcluster-build builds (or finds in the cache) the control-plane
// binaries used by gridweave.dev/internal/testcluster, and the kubelet of
// the tests' machines and CoreDNS, and prints where they are. `make testcluster` runs it; with -clean it
// removes the whole cache instead (`make clean-cache`).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"gridweave.dev/internal/testcluster"
)

func main() {
	clean := flag.Bool("clean", false, "remove the binary cache instead of building")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *clean); err != nil {
		fmt.Fprintln(os.Stderr, "testcluster-build:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, clean bool) error {
	root, err := testcluster.DefaultCacheRoot()
	if err != nil {
		return err
	}
	if clean {
		fmt.Println("removing", root)
		return os.RemoveAll(root)
	}
	bins, err := testcluster.EnsureBinaries(ctx, root, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Println(bins.Dir)
	// The kubelet of the tests' machines, cached beside them.
	kubelet, err := testcluster.EnsureKubelet(ctx, root, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Println(kubelet)
	// CoreDNS, for the real nodes' pods to find the cluster's Services.
	coredns, err := testcluster.EnsureCoreDNS(ctx, root, os.Stderr)
	if err != nil {
		return err
	}
	fmt.Println(coredns)
	return nil
}
