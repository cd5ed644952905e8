// Package gridweave is the root of the Gridweave SDK, which turns a fleet of
// GPU machines into a Ray-on-Kubernetes cluster and runs Ray workloads on it.
// The SDK is library-first: every capability is an importable package with a
// small seam, each seam with a real backend and an in-memory one, and the
// binaries under examples/ only parse configuration and wire packages
// together. This file is the map.
//
// joinkeys owns onboarding state: org join keys (random secrets stored
// hashed), provider keys (HS256 JWTs that double as the provider's token),
// the node ledger that ties a hostname to a WireGuard public key and a VPN IP,
// and the audit trail. Its logic lives in a concrete Keyring over a small
// Store interface, with joinkeys/sqlitestore (SQLite, WAL),
// joinkeys/kubestore (objects in the Kubernetes API, which several server
// replicas share) and joinkeys/memstore behind it and joinkeys/storetest as
// the conformance suite they pass. Node writes are compare-and-swap on a store-wide revision, so a
// stale write never lands; joinkeys/addrpool is the address arithmetic
// stores share.
//
// mesh owns the master's WireGuard peers: a Mesh interface that upserts,
// removes and lists peers by public key, programming only differences and
// refusing an allowed IP that overlaps another peer's.
// mesh/wgmesh drives a kernel or userspace (wireguard-go) device through
// wgctrl; mesh/memmesh keeps peers in memory; mesh/standby is the mesh of
// a server replica that drives the device only while it leads;
// mesh/meshtest is the conformance suite; mesh/kernelroutes routes prefixes
// into a device over netlink; mesh/wgkey is the WireGuard key type the mesh
// and joinkeys share.
//
// rayctl owns the Ray side of Kubernetes: RayCluster, RayJob and RayService
// operations over KubeRay's generated clientset and client-go (worker groups
// added, drained, swapped and replaced in one update, every write retried on
// conflict), server-side apply of ordered object sets, watch-based waiting,
// and the Ray dashboard client for Serve and Jobs.
//
// manifest is pure: it renders launcher recipes and infra specs, and the
// RayService chart, into hardened Kubernetes objects in apply order, and
// describes the specs as JSON Schemas (deploy/helm/rayservice is the same
// chart for Helm).
// manifest/validation, pure as well, validates any objects in process with
// the API server's own semantics (KubeRay CRD schemas, CEL rules, built-in
// types), lints them for Ray mistakes, and computes the resources
// `ray start` will see. Neither talks to a cluster.
//
// gridweave/fleet is the node lifecycle as a library: validate, register,
// leave, disconnect and version reports, and the reconcilers that keep the
// master's peers, pod-CIDR routes, worker groups, scrape targets and
// Kubernetes Nodes in step with the ledger, each over a seam with a real
// and an in-memory backend (gridweave/fleet/memfleet). gridweave/api holds
// the wire types of every route.
//
// The gridweave/ directory holds the control-plane HTTP service that ties
// the others together: the join flow over fleet, the cluster endpoints
// over rayctl, the CRD proxy, the Ray Serve proxy and KubeTorch for the
// job gateway, auth and rate limits, metrics and its OpenAPI description,
// with exactly one place that maps errors to HTTP statuses, the peer
// directory and link reports of direct tunnels, and the web console (/ui/).
// gridweave/node/ holds what runs on a GPU machine: the join agent and its
// link service, direct links to the other machines (node/peering), GPU
// detection and the join script.
//
// examples/ holds the binaries: the server (its environment read into a
// gridweave.Config by examples/server/serverenv, then gridweave/master:
// backends, listeners, leader election, the master's identity, backups),
// the node's join agent and the launcher CLI. rayctl/launch is
// the launcher's live half. internal/ holds
// helpers the SDK's own tests use, such as internal/testcluster, which starts
// a real kube-apiserver with the real KubeRay operator and kwok GPU nodes,
// and internal/raytest, which runs real Ray nodes (from a cached Python
// environment) in network namespaces.
package gridweave
