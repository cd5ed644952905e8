// Package master runs a Gridweave master from its configuration: Run
// picks the backends the configuration names and says which (the SQLite
// ledger in cfg.DBPath, or the Kubernetes ledger shared by replicas; the
// WireGuard device cfg.WireGuardInterface, adopted or made, or peers in
// memory; the cluster Options.Kubernetes names, or an embedded in-memory
// one where the API works and nothing runs), builds the service of
// package gridweave over them and serves its listeners (public, internal,
// VPN) until its context ends.
//
// With cfg.Store "kubernetes" the master is one of several replicas on
// one ledger: every replica serves the API, and the one holding the Lease
// LeaderLease (package lease) drives what must be single: the WireGuard
// device, routes, the reaper, the worker-group reconciler, scrape
// targets. It publishes where nodes reach its device in the ConfigMap
// HubConfigMap, which every replica answers from; the replicas share the
// master's identity through package identity's Secret.
//
// Backup, Restore and Migrate move a master's ledger and identity: a
// backup of the SQLite ledger (online) with the identity's files, its
// restore, and a copy between the SQLite and the Kubernetes ledgers.
package master
