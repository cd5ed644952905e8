// Package deploy ships what runs the control-plane server on a master:
// Kubernetes manifests (least-privilege RBAC, the server as a Deployment
// pinned to the control-plane node with host networking; NVIDIA's DCGM
// exporter on the GPU pools' machines) and a systemd unit for bare-metal
// masters. The files are embedded so tests (and
// programs) read exactly what is shipped.
package deploy
