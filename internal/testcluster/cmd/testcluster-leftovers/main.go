// Command testcluster-leftovers lists processes that a test control plane
// started and that are still running, and the cgroups of real nodes the
// tests ran (internal/realnode) that are still there, and exits 1 if there
// are any; then it removes the empty mountpoints the machines made on the
// host (realnode.RemoveMountpoints). `make test` runs it after the tests.
package main

import (
	"fmt"
	"os"

	"gridweave.dev/internal/realnode"
	"gridweave.dev/internal/testcluster"
)

func main() {
	left, err := testcluster.Leftovers("")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcluster-leftovers:", err)
		os.Exit(1)
	}
	for _, p := range left {
		fmt.Printf("left running: pid %d: %s\n", p.PID, p.Cmdline)
	}
	cgroups, err := realnode.Leftovers()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcluster-leftovers:", err)
		os.Exit(1)
	}
	for _, c := range cgroups {
		fmt.Printf("left behind: a real node's cgroup %s\n", c)
	}
	if len(left) > 0 || len(cgroups) > 0 {
		os.Exit(1)
	}
	// The host directories the machines mounted their own over, made by
	// the tests where the host had none.
	removed, err := realnode.RemoveMountpoints()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcluster-leftovers:", err)
		os.Exit(1)
	}
	for _, d := range removed {
		fmt.Printf("removed the empty mountpoint %s a real node's machine made\n", d)
	}
	fmt.Println("testcluster-leftovers: no control-plane process or real node's cgroup left")
}
