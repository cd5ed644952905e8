// Package gridweave is the control-plane HTTP service of a Gridweave
// cluster, the master's hands on Kubernetes and WireGuard: the join flow
// (join keys, validate, register, disconnect and leave, provider
// verification, version reports), the RayCluster API over rayctl, the
// job gateway's hands (the CRD proxy /v1/crd, the Ray proxy /v1/ray,
// KubeTorch /v1/kubetorch), health, readiness, Prometheus metrics and the
// API's own documentation (/openapi.json, /docs).
//
// A Server is built by New from a Config (DefaultConfig holds every
// setting's documented default, Validate and Check judge it; the server
// program reads it from its environment) and its Backends, each already behind
// a seam with an in-memory implementation: a joinkeys.Keyring, a mesh.Mesh,
// a rayctl.Client and a Kubernetes clientset. Handler serves the public
// listener, InternalHandler the internal one.
//
// Where things are: each group of routes is a type that holds only what it
// needs and declares its routes beside its handlers, once each (pattern,
// credential, listeners, OpenAPI words, the error codes it may answer,
// handler): nodes.go (nodeRoutes: the
// join flow, each step a call into the fleet, the join keys and the
// admin's reads of the nodes), links.go (the peer directory, its deltas,
// and the link reports), pollpark.go (the directory's long polls that
// wait, held without a handler each), console.go (a node's audit and Kubernetes Node, the fleet's
// history), downloads.go (join-node.sh, the agent, k3s, the kubelet, the
// worker image), clusters.go (the clusters API over rayctl), crdproxy.go
// (GridweaveJobs and GridweaveEndpoints for the gateway; an endpoint's
// hardware swap through package endpoints), rayproxy.go (Ray Serve through
// the dashboard), kubetorch.go (calls into package kubetorch), docs.go
// (the OpenAPI document, the API page and the console page). A JSON route
// is typed (jsonRoute): its handler takes the decoded body and returns the
// answer or an error, and the document takes both types from it.
//
// routes.go derives from the table each listener's mux (public, VPN,
// internal) and its answers for what matches nothing (404, 405 with
// Allow); openapi.go the API description, each route's error answers
// listing its own codes; errors.go is the one place errors become codes
// and the contract's error shape, with the codes each backend can give
// (ledgerCodes, kubernetesCodes, …) that routes declare; decode.go strict
// JSON; middleware.go request ids, the access log, CORS, the rate limit
// and the body limit; logging.go request ids on every log line; auth.go
// bearer credentials; reconcile.go the background work (Run: the fleet's
// reconcilers and the KubeTorch follower).
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
