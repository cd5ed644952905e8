// Command server runs the Gridweave control plane on a master host: the
// join flow and the clusters API of gridweave.dev/gridweave, configured
// from the environment (see docs/server.md's table). It picks its backends at
// start and says which: the SQLite ledger at KUBERAY_DB; the WireGuard
// device WG_INTERFACE through wgctrl, adopted or made (a kernel link, else
// wireguard-go in the process), or peers in memory for WG_INTERFACE=none
// and dev mode; Kubernetes through KUBECONFIG or the in-cluster config, else an
// embedded in-memory cluster where the API works and nothing runs.
//
//	server [--dev] [--addr HOST:PORT] [--version]
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		os.Stderr.WriteString("server: " + err.Error() + "\n")
		os.Exit(1)
	}
}
