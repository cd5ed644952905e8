// Package joinscript holds join-node.sh, the script the join command runs
// on a node, and renders it for a master's port. The script downloads the
// join agent for the node's OS and architecture from the master, checks
// its SHA-256 against the one the master announces, and runs it with the
// join key (or --leave).
package joinscript
