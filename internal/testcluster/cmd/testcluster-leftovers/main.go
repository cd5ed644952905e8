// Command testcluster-leftovers lists processes that a test control plane
// started and that are still running, and exits 1 if there are any. `make
// test` runs it after the tests.
package main

import (
	"fmt"
	"os"

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
	if len(left) > 0 {
		os.Exit(1)
	}
	fmt.Println("testcluster-leftovers: no control-plane process left running")
}
