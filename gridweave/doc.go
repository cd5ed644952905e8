// Package gridweave is the control-plane HTTP service: the join flow
// (join keys, validate, register, disconnect, version reports), RayCluster
// management over rayctl, the CRD and Ray proxies, KubeTorch and the DCGM
// scrape targets. It depends on the other packages through small
// consumer-side interfaces, and maps errors to HTTP statuses in exactly one
// place.
package gridweave
