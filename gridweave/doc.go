// Package gridweave is reserved for the control-plane HTTP service: the
// join flow (join keys, validate, register, disconnect, version reports),
// RayCluster management over rayctl, the CRD and Ray proxies, KubeTorch and
// the DCGM scrape targets, mapping errors to HTTP statuses in exactly one
// place. It is not built yet; the libraries it will compose (joinkeys, mesh,
// rayctl, manifest) are.
package gridweave
