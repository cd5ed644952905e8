// Command join-node is the node side of the join flow, the agent
// join-node.sh downloads and runs as root:
//
//	GRIDWEAVE_JOIN_KEY=KEY join-node --master https://MASTER:8800 --pin sha256//PIN   join (again: converges)
//	join-node --master https://MASTER:8800 --pin sha256//PIN --serve                  the link service
//	join-node --master https://MASTER:8800 --pin sha256//PIN --leave                  leave the cluster
//	join-node --run-node                                                             the node (kubelet join mode)
//
// The key comes in GRIDWEAVE_JOIN_KEY (or --key-file), never on the
// command line; --pin makes every call accept only the master's key.
//
// It keeps the node's identity in --state-dir (0600), brings up the
// WireGuard tunnel (--interface; kernel WireGuard or wireguard-go), runs the
// k3s agent step (--k3s-command) or, for a master of the kubelet join
// mode, the machine's own node: the master's kubelet with the machine's
// containerd, supervised by --run-node (gridweave-node.service where
// systemd runs the machine), detects the GPUs (nvidia-smi, amd-smi),
// registers and reports its version. Then it installs the link service
// (--serve, as gridweave-agent.service where systemd runs the machine):
// direct WireGuard links to the other machines, the master as fallback.
// The logic is gridweave.dev/gridweave/node/joinagent.
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
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
