// Package node is the room of the code that runs on a GPU machine rather
// than on the master: the join agent and its link service
// (node/joinagent), the direct links to the other machines
// (node/peering), GPU detection (node/gpus) and the join script the
// master serves for the machine to run (node/joinscript). Nothing here imports the server or Kubernetes;
// what a node sends and receives is package gridweave/api.
package node
