// Package scrapetargets keeps the DCGM exporter scrape targets of a
// Gridweave cluster as Prometheus file-based service discovery (file_sd)
// files: one JSON file per GPU node in one directory, which a Prometheus
// reads through
//
//	scrape_configs:
//	  - job_name: dcgm
//	    file_sd_configs:
//	      - files: ["/var/lib/gridweave/dcgm-targets/*.json"]
//
// The control-plane service writes a node's file when the node registers
// and removes it when the node disconnects; the directory is the
// server's (gridweave.Config.DCGMTargetsDir; New takes the path).
//
// # Files
//
// A node's file is named <hostname>.json, where the hostname is a DNS-1123
// label (so it can never name a path outside the directory), and holds one
// target group:
//
//	[
//	  {
//	    "targets": ["198.18.0.7:9400"],
//	    "labels": {
//	      "gpu_count": "8",
//	      "gpu_model": "NVIDIA H100 80GB HBM3",
//	      "hostname": "gpu-node-1",
//	      "node": "gpu-node-1"
//	    }
//	  }
//	]
//
// The target is the node's VPN (WireGuard) address and the DCGM exporter's
// port, 9400 unless Target.Port says otherwise; Prometheus scrapes over the
// mesh and sets the "instance" label from it. The labels, all valid
// Prometheus label names, mean:
//
//   - node: the Kubernetes node name. A Gridweave node joins k3s under its
//     hostname, so it equals hostname; it is the name kube-state-metrics and
//     the kubelet's metrics use, so DCGM series join with them on "node".
//   - hostname: the name the machine joined the cluster with, the key of
//     the node ledger and of this directory (the file's name).
//   - gpu_model: the GPU model as the driver reports it (nvidia-smi's name).
//   - gpu_count: the number of GPUs on the node, in decimal (label values
//     are strings).
//
// The label names are the constants LabelNode, LabelHostname, LabelGPUModel
// and LabelGPUCount.
//
// # Writing
//
// Dir.Write replaces a file atomically, so Prometheus, which re-reads the
// directory whenever it changes, never sees half a file: the content goes
// to a temporary file in the same directory, is flushed to disk (fsync),
// renamed over the node's file, and the directory is flushed too, so the
// file survives a crash of the machine. The temporary file is named
// ".<hostname>.json.tmp-<random>", which a "*.json" pattern does not match
// (Prometheus matches with Go's filepath.Match, where "*" also matches a
// leading dot, so the suffix is what hides it). New removes temporary files
// a crashed writer left behind. Writing the content a file already has does
// not touch it, so a reconcile loop does not make Prometheus reload for
// nothing. Dir.Remove deletes a node's file and is content with one that is
// already gone. Dir.List reads the directory back, for a reconcile after a
// restart; it ignores files whose names are not <hostname>.json.
//
// A Dir is safe for concurrent use. It assumes it is the only writer of its
// directory.
package scrapetargets
