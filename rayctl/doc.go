// Package rayctl operates Ray on Kubernetes through KubeRay's generated
// clientset and client-go: RayCluster create, get, list, scale and delete;
// worker groups added from a typed or raw spec, drained and removed, swapped
// or replaced in one update of the RayCluster; worker pods and their logs;
// RayJob and RayService; server-side apply of ordered object sets and
// watch-based waiting; and the Ray dashboard client for Serve applications
// and the Jobs API. Every read-modify-write is retried on conflict.
package rayctl
