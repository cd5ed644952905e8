// Package joinscript holds join-node.sh, the script the join command runs
// on a node, and renders it for a master's port and scheme. The script
// downloads the join agent for the node's OS and architecture from the
// master (over HTTPS pinned to MASTER_PIN when the master serves TLS),
// checks its SHA-256 against the one the master announces, and runs it,
// handing it the join key in its environment (or --leave).
package joinscript
