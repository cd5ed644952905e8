// Package gridweave is the control-plane HTTP service of a Gridweave
// cluster, the master's hands on Kubernetes and WireGuard: the join flow
// (join keys, validate, register, disconnect and leave, provider
// verification, version reports), the RayCluster API over rayctl, the
// job gateway's hands (the CRD proxy /v1/crd, the Ray proxy /v1/ray,
// KubeTorch /v1/kubetorch), health, readiness, Prometheus metrics and the
// API's own documentation (/openapi.json, /docs).
//
// A Server is built by New from a Config (ConfigFromEnv reads it from the
// environment) and its Backends, each already behind
// a seam with an in-memory implementation: a joinkeys.Keyring, a mesh.Mesh,
// a rayctl.Client and a Kubernetes clientset. Handler serves the public
// listener, InternalHandler the internal one.
//
// Where things are: routes.go is the whole API surface on one screen
// (method, path, auth rule, handler); errors.go the one place errors
// become statuses and the contract's error shape; decode.go strict JSON;
// middleware.go request ids, the access log, CORS, the rate limit and the
// body limit; logging.go request ids on every log line; auth.go bearer
// credentials; nodes.go the join flow's routes, each a call into the
// fleet; reconcile.go the background work (Run: the fleet's reconcilers
// and the KubeTorch follower); downloads.go join-node.sh and the agent binaries; clusters.go the
// clusters API; crdproxy.go GridweaveJobs and GridweaveEndpoints for the
// gateway, endpoints.go an endpoint's hardware swap (package endpoints); rayproxy.go Ray Serve
// through the dashboard; kubetorch.go the KubeTorch routes, each a call
// into package kubetorch; openapi.go the API description.
//
// Subpackages with a vocabulary of their own, which do not import the
// server: fleet (the node lifecycle as a library: what the join routes
// call), api (the wire types of every route), scrapetargets (DCGM file_sd
// targets), crd (our CRDs and their Go types), kubetorch (checked,
// content-addressed code bundles, and the Trainer that trains from them
// on a cluster's GPU workers), endpoints (an endpoint moved to new
// hardware), and under node/ what runs on a GPU
// machine: joinagent (the node side of the join), gpus (nvidia-smi and
// amd-smi), joinscript (join-node.sh).
//
// GPU nodes join one worker group per kind of machine (GPU vendor, model
// and count), its replicas the registered nodes of that kind, one pod per
// node pinned by a Node label (fleet.PoolLabel): the RayCluster grows with
// the kinds of machine, not the machines, and stays far below etcd's
// object size limit at thousands of nodes (fleet.RayGroups).
package gridweave
