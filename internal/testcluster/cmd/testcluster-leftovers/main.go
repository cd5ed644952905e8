// Command testcluster-leftovers lists processes that a test control plane
// started and that are still running, and the cgroups of real nodes the
// tests ran (internal/realnode) that are still there, and exits 1 if there
// are any. `make
// test` runs it after the tests.
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
	fmt.Println("testcluster-leftovers: no control-plane process or real node's cgroup left")
}
