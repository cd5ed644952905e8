// Package joinagent is the node side of the join flow: what join-node.sh
// runs on a machine joining a Gridweave cluster. Join keeps the node's
// identity (a WireGuard key pair and the node token) in a state directory
// (0600), validates with the master (the join key the first time, the node
// token after), brings up the tunnel to the master, installs the master's
// k3s when the machine has none and runs the k3s agent step, makes the
// master's GPU worker image present in the container runtime (downloaded
// once, its SHA-256 checked), detects the GPUs, registers and reports its
// version; running it again converges to the same node and VPN address.
// Leave takes the node out (POST /v1/nodes/leave), takes the tunnel down
// and deletes the identity. Serve is the link service that runs after the
// join: it long-polls the master's peer directory (GET /v1/nodes/peers)
// and keeps direct links to the other nodes with the master as fallback
// (package peering), reporting them (POST /v1/nodes/links).
//
// Its calls are pinned to the master's certificate (Options.MasterPin,
// package tlspin) until the tunnel is up, then go to the master's VPN
// listener through the tunnel (validate's master_vpn_url) on sockets
// bound to the tunnel device.
//
// The pieces that touch the machine are seams in Options: Tunnel (by
// default WireGuardTunnel: a kernel device if the kernel has WireGuard,
// else wireguard-go, configured through wgctrl), the k3s step (a command),
// Images (CommandImageRuntime: by default `k3s ctr images import`) and GPU
// detection (gridweave/gpus). The package talks to the master
// only over the HTTP contract of docs/api.md (the types of gridweave/api).
package joinagent
