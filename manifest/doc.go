// Package manifest turns launcher specs (a recipe and an infra spec) and the
// RayService chart's values into hardened Kubernetes objects in apply order,
// validates any objects in process with the API server's own semantics, lints
// them for Ray-specific mistakes, and computes the resources KubeRay passes to
// `ray start`. It is pure: it never talks to a cluster.
package manifest
